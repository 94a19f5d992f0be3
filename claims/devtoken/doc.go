// Package devtoken is a development token issuer for your own `go run` dev
// server: it generates an Ed25519 key in memory, serves its JWKS on a
// loopback port and mints signed JWTs with whatever subject, groups, roles
// and claims you ask for, which the normal verifier of package [claims]
// accepts like any identity provider's:
//
//	dev, err := devtoken.Start(devtoken.Options{Audience: "http://127.0.0.1:8080/mcp"})
//	if err != nil { ... }
//	defer dev.Close()
//	v, err := claims.New(dev.ClaimsOptions(mapping)) // the same verifier production uses
//	token, err := dev.Mint(devtoken.Token{Subject: "alice", Groups: []string{"/tenants/acme"}})
//
// Anyone who can call [Issuer.Mint] or reach its key can become any
// tenant, so it is for development only: [Start] refuses any address but a
// loopback one ([ErrNotLoopback]), before it listens, and logs one warning
// line saying that it is for development. It never logs its key or a
// token. Point the verifier at your identity provider for anything else.
//
// Tests should use [github.com/tenantmcp/tenantmcp/claims/claimstest],
// which runs the same issuer for the length of a test and refuses to run
// outside a test binary.
package devtoken
