// Package claims verifies bearer tokens (JWTs) and mints the tenant scope a
// token grants. It is the only place in tenantmcp where a [scope.Scope] comes
// into being from outside a test: a verified group claim is the only source
// of tenant scope.
//
// # Verifying
//
// A [Verifier] is built with [New] from an [Options] naming the issuer, the accepted
// audiences, the signing keys and the [Mapping] from group strings to grants:
//
//	v, err := claims.New(claims.Options{
//		Issuer:   "https://idp.example.com/realms/hotels",
//		Audience: []string{"https://mcp.example.com"},
//		JWKSURL:  "https://idp.example.com/realms/hotels/protocol/openid-connect/certs",
//		Mapping: claims.Mapping{Patterns: []string{
//			"/tenants/{chain}",
//			"/tenants/{chain}/hotels/{hotel}",
//		}},
//	})
//	defer v.Close()
//	err = v.WaitReady(ctx)
//	s, info, err := v.Verify(ctx, token)
//
// Verify checks, in order, and fails closed at the first problem:
//
//   - keys are loaded (ErrNotReady);
//   - the token is at most Options.MaxTokenBytes long, 16 KiB by default,
//     before anything is decoded (ErrTooLarge);
//   - it is a compact JWS whose header has no "crit" (ErrMalformed);
//   - its alg is in Options.Algorithms (ErrAlgNotAllowed); "none" never is,
//     and HS256/384/512 only when listed together with Options.HMACKey;
//   - the kid names a key of the kind alg needs (ErrUnknownKey,
//     ErrAlgNotAllowed), and the signature verifies with it
//     (ErrBadSignature);
//   - exp is present (ErrMissingExpiry) and not past, nbf and iat are not in
//     the future, all with Options.Leeway, 30 s by default (ErrExpired,
//     ErrNotYetValid);
//   - the token lives at most Options.MaxTokenLifetime, 24 hours by default:
//     exp-iat and exp-now (plus the leeway) are both within it (ErrLifetime),
//     so a stolen token is useful for a day at most even when the identity
//     provider mints long-lived ones; a negative MaxTokenLifetime lifts it;
//   - iss equals Options.Issuer (ErrWrongIssuer) and aud names one of
//     Options.Audience (ErrWrongAudience);
//   - sub is a non-empty string (ErrNoSubject);
//   - the groups are in the token (ErrGroupOverage), and at least one maps
//     to a grant (ErrNoScope).
//
// Every token error wraps auth.ErrInvalidToken from the go-sdk as well as its
// own sentinel; several at once (expired and wrong audience) all match. No
// error text contains any part of the token, the kid included.
//
// # Keys
//
// Keys come from a JWKS URL ([Options.JWKSURL]), fetched in the background and
// refreshed every [Options.RefreshInterval], or from a static JWKS document
// ([Options.JWKS]). They are held in a github.com/MicahParks/jwkset memory
// storage and looked up through github.com/MicahParks/keyfunc/v3; signatures
// and registered claims are checked by github.com/golang-jwt/jwt/v5 with
// WithValidMethods, WithIssuer, WithAudience, WithExpirationRequired,
// WithLeeway, WithIssuedAt and WithStrictDecoding always set.
//
// Only keys that can verify signatures are kept: RSA of 2048 bits or more,
// ECDSA on P-256/384/521, Ed25519, with "use" absent or "sig". Symmetric JWKs
// and private members are ignored, so a JWKS never supplies an HMAC secret,
// and HMAC tokens are checked against [Options.HMACKey] alone: the classic
// confusion of an HS256 token "signed" with the RSA public key fails. A
// token's alg must also fit its key (RS/PS with RSA, ES256 with P-256, and so
// on) and the JWK's own alg when the JWK declares one. A token without kid is
// tried against every key that fits its alg.
//
// With a JWKS URL, [New] returns at once. Until the first fetch succeeds
// (retried with backoff from 1 s) Ready reports false and Verify refuses
// every token with [ErrNotReady], which does not wrap auth.ErrInvalidToken: the
// go-sdk middleware answers 500, not 401. Servers should call WaitReady before
// serving. Once loaded, keys are kept through outages: a failed refresh, or a
// JWKS without a single usable key, leaves the cached keys in place. A
// successful refresh replaces the set, so a key removed by the provider stops
// verifying within [Options.RefreshInterval] (one minute by default) of its
// removal. Within that bound the response's Cache-Control max-age (less its
// Age) sets the next fetch, but never sooner than
// [Options.MinRefreshInterval] (5 s by default): a provider that says
// max-age=10 has its retired keys refused within ten seconds, one that says
// max-age=86400 still within a minute. Failed fetches are retried with
// jittered exponential backoff, so replicas that lost the endpoint together
// do not return to it in step.
//
// A kid that is not in the set makes the token wait for the next fetch of
// the JWKS that starts after it arrived (a fetch already under way may
// predate the key's publication). Such fetches start at most once per
// [Options.UnknownKIDInterval] (two seconds by default) across all callers,
// and every token waiting at one time shares one: a flood of random kids
// costs one fetch per interval, and a key published in the middle of the
// flood is picked up within one interval plus the fetch, because junk kids
// only share its fetch, they never use it up. A token is refused at once
// with [ErrUnknownKey], without waiting, when the next fetch is more than
// five seconds off or beyond its context's deadline, and when a successful
// fetch in the last ten intervals lacked its kid (a negative cache of up to
// 10,000 kids, so a client repeating a bogus kid is refused without delay).
// A fetch that fails (a JWKS blip) is no evidence about the kid and is never
// remembered: the next unknown-kid fetch may start after a short jittered
// backoff, and the background refresh retries at once, so a rotation that
// coincides with an outage is picked up as soon as the endpoint answers
// again. On the HTTP endpoint, package server also limits failed-token
// attempts per client address, which bounds how many such waits one client
// can cause.
//
// # Cached verifications
//
// A client sends the same bearer token on every call until it expires, so
// Verify remembers the tokens it verified (Options.TokenCacheSize, 1024 by
// default, least recently used evicted; negative disables) and answers a
// repeat without checking the signature or mapping the groups again: about
// a microsecond instead of 50–200. The cache is keyed by the token's
// SHA-256, never the token, and keeps successes only. A hit gives exactly
// what a fresh verification would give at that moment: exp, nbf and iat are
// checked again on every hit with the same clock and Options.Leeway, and an
// entry counts only while the key set is the one it was verified under. A
// refresh that changes the set's public keys (a key retired, added, or a
// kid republished with other material) empties the cache; one that returns
// the same keys keeps it. Each caller gets its own copy of the Claims.
//
// # Groups, roles and the scope
//
// The group strings are read from [Options.GroupsClaim] ("groups" by default)
// and the roles from [Options.RolesClaim] ("roles"). Both accept a path into
// nested objects with a syntax that keeps namespaced claim names
// unambiguous: segments are separated by '.', and a segment containing
// anything but letters, digits, '_', '-' and '$' is written as a JSON
// string. So realm_access.roles is Keycloak's realm roles,
// "https://example.com/groups" is one top-level claim named by a URL (as
// Auth0 requires), and resource_access."tenant-app".roles is a Keycloak
// client's roles. A claim may hold a string or an array of strings; any other
// type is [ErrMalformed].
//
// Mapping turns group strings into grants: exact Table entries (identity
// provider group ids) first, then the first matching pattern such as
// "/tenants/{chain}/hotels/{hotel}" or "tenant:{chain}". The last level
// placeholder of a pattern is the level granted; a hotel group grants the
// hotel, not its chain. The earlier placeholders confine the grant: the
// group /tenants/initech/hotels/acme-paris grants "hotel acme-paris within
// chain initech" (scope.Grant.Within), and the guard and the generated
// row-level security policies require every level the path names, so a
// group whose ancestors disagree with the data (an IdP with delegated group
// administration lets a tenant admin create one) grants nothing. Unmatched
// groups are ignored. Rules are checked by [New], which reports syntax errors
// with their offset. See [Mapping] for the exact rules.
//
// Roles are bound to grants, not to the token. The placeholder {@role}
// binds a role to the grant its group makes
// ("/tenants/{chain}/hotels/{hotel}/{@role}" matching
// /tenants/acme/hotels/acme-paris/front_desk), and so do a Table entry's
// roles and a per-group roles claim ([Options.GroupRolesClaim], an object
// from group to roles). The token-wide roles claim is bound to the grant only when the
// token's groups yield exactly one grant; with several it is bound to
// none, since nothing says which tenant it was given for. The scope's
// effective roles, which drive what package redact reveals, are those
// bound to every grant (the most restrictive choice).
//
// When Microsoft Entra ID has too many groups to put in the token it leaves
// the claim out and sets "_claim_names" (or "hasgroups"). Verify refuses such
// a token with [ErrGroupOverage] rather than mint a partial scope; configure
// the application to emit only the groups assigned to it, or app roles.
//
// The scope is minted with the subject (sub) and the grants with their
// roles. A
// matched value the scope would refuse (too many grants, a role with control
// characters) refuses the whole token with [ErrNoScope] wrapping
// [scope.ErrInvalid]; nothing is silently dropped.
//
// # MCP servers
//
// TokenVerifier returns an auth.TokenVerifier for auth.RequireBearerToken.
// The TokenInfo carries UserID = sub, Expiration = exp, Scopes = the token's
// OAuth scopes ("scope" or "scp"), and the scope under [TokenInfoScopeKey] in
// Extra; read it with [ScopeFromTokenInfo]. Over stdio, where there is no HTTP
// request, call Verify directly.
package claims
