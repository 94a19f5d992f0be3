package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/server"
)

var testSchema = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: "org", Key: builder.TextKey}},
	Tables: []builder.TableDef{{Name: "notes", Columns: []string{"id", "org_id", "body"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"org_id": "org"}}},
})

type fixture struct {
	srv    *server.Server
	issuer *devtoken.Issuer
	audit  *bytes.Buffer
}

func newFixture(t *testing.T, mutate func(*server.Options)) *fixture {
	t.Helper()
	is, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: "https://notes.test/mcp", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close() })
	v, err := claims.New(claims.Options{Issuer: is.URL, Audience: []string{is.Audience}, JWKS: is.JWKS(),
		Mapping: claims.Mapping{Patterns: []string{"org:{org}"}}})
	if err != nil {
		t.Fatal(err)
	}
	db, err := guardedsql.Open(context.Background(), "sqlite::memory:", testSchema, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	audit := &bytes.Buffer{}
	opts := server.Options{Name: "notes", Verifier: v, DB: db, Levels: []string{"org"},
		AuditLogger: slog.New(slog.NewJSONHandler(audit, nil)), Logger: slog.New(slog.DiscardHandler)}
	if mutate != nil {
		mutate(&opts)
	}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, issuer: is, audit: audit}
}

type empty struct{}

func TestRegistrationRefusesTenantInput(t *testing.T) {
	f := newFixture(t, nil)
	type Filter struct {
		TenantID string `json:"tenant_id"`
	}
	type Nested struct {
		Query  string `json:"query"`
		Filter Filter `json:"filter"`
	}
	type OrgLevel struct {
		Org string `json:"org"`
	}
	type CamelCase struct {
		ChainID string `json:"chainId"`
	}
	type Clean struct {
		Query string `json:"query"`
	}
	h := func(context.Context, *guardedsql.DB, Nested) (empty, error) { return empty{}, nil }
	err := server.AddTool(f.srv, server.Tool{Name: "search"}, h)
	var te *server.TenantInputError
	if !errors.Is(err, server.ErrTenantInInput) || !errors.As(err, &te) {
		t.Fatalf("nested tenant_id: err = %v", err)
	}
	if te.Tool != "search" || te.Property != "/filter/tenant_id" || !strings.Contains(err.Error(), "search") || !strings.Contains(err.Error(), "tenant_id") {
		t.Fatalf("error does not name the tool and property: %+v / %v", te, err)
	}
	if err := server.AddTool(f.srv, server.Tool{Name: "level"}, func(context.Context, *guardedsql.DB, OrgLevel) (empty, error) { return empty{}, nil }); !errors.Is(err, server.ErrTenantInInput) {
		t.Fatalf("a scope level name as input: err = %v", err)
	}
	if err := server.AddTool(f.srv, server.Tool{Name: "camel"}, func(context.Context, *guardedsql.DB, CamelCase) (empty, error) { return empty{}, nil }); !errors.Is(err, server.ErrTenantInInput) {
		t.Fatalf("chainId spelled in camel case: err = %v", err)
	}
	if err := server.AddTool(f.srv, server.Tool{Name: "clean"}, func(context.Context, *guardedsql.DB, Clean) (empty, error) { return empty{}, nil }); err != nil {
		t.Fatalf("clean input refused: %v", err)
	}
	if err := server.AddTool(f.srv, server.Tool{Name: "clean"}, func(context.Context, *guardedsql.DB, Clean) (empty, error) { return empty{}, nil }); !errors.Is(err, server.ErrConfig) {
		t.Fatalf("duplicate tool name: err = %v", err)
	}
}

// TestNewRefusesNegative: a negative duration or size that has no "off"
// meaning is refused with ErrConfig naming the field; the same Options
// without it are accepted.
func TestNewRefusesNegative(t *testing.T) {
	var base server.Options
	newFixture(t, func(o *server.Options) { base = *o })
	for field, set := range map[string]func(o *server.Options){
		"CallTimeout":       func(o *server.Options) { o.CallTimeout = -time.Second },
		"MaxRequestBytes":   func(o *server.Options) { o.MaxRequestBytes = -1 },
		"MaxTokenLifetime":  func(o *server.Options) { o.MaxTokenLifetime = -time.Hour },
		"ConsentTimeout":    func(o *server.Options) { o.ConsentTimeout = -time.Second },
		"LogLimit.Interval": func(o *server.Options) { o.LogLimit.Interval = -time.Second },
		// Not negative, equally without an "off" meaning: a short HMAC key.
		"Input.Keys[1]": func(o *server.Options) { o.Input.Keys = [][]byte{make([]byte, 32), make([]byte, 31)} },
	} {
		o := base
		set(&o)
		if _, err := server.New(o); !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("negative %s: err = %v, want ErrConfig naming it", field, err)
		}
	}
	if _, err := server.New(base); err != nil {
		t.Fatalf("the same Options without a negative field: %v", err)
	}
}

func TestNewRequiresVerifierAndDB(t *testing.T) {
	if _, err := server.New(server.Options{Name: "x"}); !errors.Is(err, server.ErrConfig) {
		t.Fatalf("err = %v", err)
	}
}

// connectStdio runs f.srv over in-memory transports, as RunStdio would
// over stdin/stdout, with the token from src.
func connectStdio(t *testing.T, f *fixture, src server.TokenSource) (*mcp.ClientSession, error) {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	errc := make(chan error, 1)
	go func() { errc <- f.srv.Run(ctx, st, src) }()
	select {
	case err := <-errc:
		return nil, err
	case <-time.After(200 * time.Millisecond):
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, nil
}

func staticToken(tok string) server.TokenSource {
	return func(context.Context) (string, error) { return tok, nil }
}

func TestStdioRefusesToStartWithoutValidToken(t *testing.T) {
	f := newFixture(t, nil)
	expired, _ := f.issuer.Mint(devtoken.Token{Subject: "a", Groups: []string{"org:a"}, TTL: -time.Hour})
	for name, src := range map[string]server.TokenSource{
		"empty env": server.TokenFromEnv("TENANTMCP_TEST_NO_SUCH_VAR"),
		"no file":   server.TokenFromFile("/nonexistent/token"),
		"expired":   staticToken(expired),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := connectStdio(t, f, src); err == nil {
				t.Fatal("served with no valid token")
			}
		})
	}
}

func TestStdioScopesCalls(t *testing.T) {
	f := newFixture(t, nil)
	type Out struct {
		Sub    string   `json:"sub"`
		Grants []string `json:"grants"`
	}
	err := server.AddTool(f.srv, server.Tool{Name: "whoami"}, func(ctx context.Context, _ *guardedsql.DB, _ empty) (Out, error) {
		sc, ok := scope.FromContext(ctx)
		if !ok {
			return Out{}, errors.New("no scope")
		}
		return Out{Sub: sc.Subject(), Grants: sc.GrantsAt("org")}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}})
	cs, err := connectStdio(t, f, staticToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("whoami: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if string(raw) != `{"grants":["north"],"sub":"ann"}` && string(raw) != `{"sub":"ann","grants":["north"]}` {
		t.Fatalf("whoami = %s", raw)
	}
}

func TestErrorsRevealNothing(t *testing.T) {
	f := newFixture(t, func(o *server.Options) { o.CallTimeout = 100 * time.Millisecond })
	type In struct {
		Mode string `json:"mode"`
	}
	secret := "jane.doe@example.com"
	err := server.AddTool(f.srv, server.Tool{Name: "fail"}, func(ctx context.Context, _ *guardedsql.DB, in In) (empty, error) {
		switch in.Mode {
		case "internal":
			return empty{}, errors.New("db exploded near row of " + secret)
		case "input":
			return empty{}, server.InvalidInput("no guest %s here", secret)
		case "panic":
			panic("boom " + secret)
		case "slow":
			<-ctx.Done()
			return empty{}, ctx.Err()
		case "deny":
			return empty{}, server.Deny("flow.egress", "guest data cannot reach "+secret, map[string]any{"sink": secret})
		}
		return empty{}, guardedsql.ErrNotFound
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}})
	cs, err := connectStdio(t, f, staticToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	for mode, want := range map[string]string{
		"internal": "internal error (correlation id ", "input": "no guest ", "panic": "internal error (correlation id ",
		"slow": "timed out after 100ms", "notfound": "not found",
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{"mode": mode}})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		txt := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError || !strings.HasPrefix(txt, want) || strings.Contains(txt, secret) {
			t.Errorf("%s: %q (isError %v), want prefix %q without the e-mail", mode, txt, res.IsError, want)
		}
	}
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{"mode": "deny"}})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != server.CodeDenied {
		t.Fatalf("deny: err = %v, want a JSON-RPC error with code %d", err, server.CodeDenied)
	}
	var data map[string]any
	if err := json.Unmarshal(we.Data, &data); err != nil || data["rule"] != "flow.egress" || data["tool"] != "fail" {
		t.Fatalf("deny witness = %s (%v)", we.Data, err)
	}
	if strings.Contains(string(we.Data), secret) {
		t.Fatalf("deny witness leaks the e-mail: %s", we.Data)
	}
	if strings.Contains(f.audit.String(), secret) {
		t.Fatalf("audit log leaks the e-mail:\n%s", f.audit.String())
	}
}

// exampleServer is a server for the examples: a static-JWKS verifier and an
// in-memory database with sch.
func exampleServer() *server.Server {
	is, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: "https://example.test/mcp", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	v, err := claims.New(claims.Options{Issuer: is.URL, Audience: []string{is.Audience}, JWKS: is.JWKS(),
		Mapping: claims.Mapping{Patterns: []string{"/tenants/{chain}"}}})
	if err != nil {
		panic(err)
	}
	db, err := guardedsql.Open(context.Background(), "sqlite::memory:", sch, guardedsql.Options{})
	if err != nil {
		panic(err)
	}
	srv, err := server.New(server.Options{Name: "example", Verifier: v, DB: db, Levels: []string{"chain"}})
	if err != nil {
		panic(err)
	}
	return srv
}

// TestStdioReverifiesOnExpiry: once the stdio token has expired, the next
// call takes a fresh token from the source and verifies it; if the source
// has nothing valid, the call is denied, never served on the old scope.
func TestStdioReverifiesOnExpiry(t *testing.T) {
	var shift atomic.Int64 // how far the server's clock is ahead
	f := newFixture(t, func(o *server.Options) {
		o.Now = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	})
	type Out struct {
		Sub string `json:"sub"`
	}
	if err := server.AddTool(f.srv, server.Tool{Name: "whoami"}, func(ctx context.Context, _ *guardedsql.DB, _ empty) (Out, error) {
		sc, _ := scope.FromContext(ctx)
		return Out{Sub: sc.Subject()}, nil
	}); err != nil {
		t.Fatal(err)
	}
	first, _ := f.issuer.Mint(devtoken.Token{Subject: "first", Groups: []string{"org:north"}, TTL: time.Hour})
	second, _ := f.issuer.Mint(devtoken.Token{Subject: "second", Groups: []string{"org:north"}, TTL: 3 * time.Hour})
	var current atomic.Value
	current.Store(first)
	cs, err := connectStdio(t, f, func(context.Context) (string, error) { return current.Load().(string), nil })
	if err != nil {
		t.Fatal(err)
	}
	whoami := func() (string, error) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
		if err != nil {
			return "", err
		}
		var out Out
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &out)
		return out.Sub, nil
	}
	current.Store(second) // the refresher rewrote the file; the old token is still valid
	if sub, err := whoami(); err != nil || sub != "first" {
		t.Fatalf("before expiry: %q %v, want the first token's subject", sub, err)
	}
	shift.Store(int64(2 * time.Hour)) // the first token has expired
	if sub, err := whoami(); err != nil || sub != "second" {
		t.Fatalf("after expiry: %q %v, want the fresh token's subject", sub, err)
	}
	expired, _ := f.issuer.Mint(devtoken.Token{Subject: "stale", Groups: []string{"org:north"}, TTL: -time.Hour})
	current.Store(expired)
	shift.Store(int64(4 * time.Hour)) // the second has expired too, and the source has only a dead token
	_, err = whoami()
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != server.CodeDenied || !strings.Contains(string(we.Data), server.RuleTokenExpired) {
		t.Fatalf("with no valid token: err = %v, want a %s denial", err, server.RuleTokenExpired)
	}
}

// TestLargeIntegerArgumentsArriveExactly: validation decodes numbers as
// float64; the handler must still get the client's exact int64.
func TestLargeIntegerArgumentsArriveExactly(t *testing.T) {
	f := newFixture(t, nil)
	type In struct {
		ID int64 `json:"id"`
	}
	type Out struct {
		ID string `json:"id"`
	}
	if err := server.AddTool(f.srv, server.Tool{Name: "echo"}, func(_ context.Context, _ *guardedsql.DB, in In) (Out, error) {
		return Out{ID: strconv.FormatInt(in.ID, 10)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}})
	cs, err := connectStdio(t, f, staticToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"id": 9007199254740993}`)})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if string(raw) != `{"id":"9007199254740993"}` {
		t.Fatalf("echo = %s, want the exact id", raw)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"id": 1, "tenant": "x"}`)})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "invalid arguments") {
		t.Fatalf("unknown property accepted: %v %+v", err, res)
	}
}
