package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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
	"github.com/tenantmcp/tenantmcp/internal/rpctest"
	"github.com/tenantmcp/tenantmcp/server"
)

// statelessHTTP serves requests that carry no session, as rpctest posts
// them.
var statelessHTTP = server.HTTPOptions{}

// secretURI is read through a template; its id stands for a tenant's value
// that no refusal may echo.
const secretURI = "notes://n/north-secret-7"

// admitted is one request of a method that passes admission, over HTTP
// (params) and through a client session.
type admitted struct {
	method string
	params any
	call   func(context.Context, *mcp.ClientSession) error
}

func probes() []admitted {
	complete := &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "brief"},
		Argument: mcp.CompleteParamsArgument{Name: "who", Value: "n"}}
	read := &mcp.ReadResourceParams{URI: secretURI}
	prompt := &mcp.GetPromptParams{Name: "brief", Arguments: map[string]string{"who": "x"}}
	none := map[string]any{}
	return []admitted{
		{"completion/complete", complete, func(ctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.Complete(ctx, complete)
			return err
		}},
		{"resources/read", read, func(ctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.ReadResource(ctx, read)
			return err
		}},
		{"prompts/get", prompt, func(ctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.GetPrompt(ctx, prompt)
			return err
		}},
		{"tools/list", none, func(ctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.ListTools(ctx, nil)
			return err
		}},
		{"resources/list", none, func(ctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.ListResources(ctx, nil)
			return err
		}},
		{"resources/templates/list", none, func(ctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.ListResourceTemplates(ctx, nil)
			return err
		}},
		{"prompts/list", none, func(ctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.ListPrompts(ctx, nil)
			return err
		}},
	}
}

// surfaceFixture is a server under limits l with a resource, a resource
// template and a prompt whose argument completes.
func surfaceFixture(t *testing.T, l server.Limits) *fixture {
	t.Helper()
	f := newFixture(t, func(o *server.Options) { o.Limits = l })
	read := func(context.Context, *guardedsql.DB, map[string]string) (empty, error) { return empty{}, nil }
	who := &server.Completion{Func: func(context.Context, *guardedsql.DB, string, map[string]string) ([]string, error) {
		return []string{"north"}, nil
	}}
	for _, err := range []error{
		server.AddResource(f.srv, server.Resource{URI: "notes://all", Name: "all"}, read),
		server.AddResourceTemplate(f.srv, server.ResourceTemplate{URITemplate: "notes://n/{id}", Name: "one"}, read),
		server.AddPrompt(f.srv, server.Prompt{Name: "brief", Args: []server.PromptArg{{Name: "who", Complete: who}}},
			func(context.Context, *guardedsql.DB, map[string]string) (string, empty, error) {
				return "x", empty{}, nil
			}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// auditRecords are the audit log's records of outcome limited, by method.
func limitedAudits(t *testing.T, f *fixture) map[string]int {
	t.Helper()
	out := map[string]int{}
	for line := range strings.Lines(f.audit.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if rec["outcome"] == server.OutcomeLimited {
			m, _ := rec["method"].(string)
			out[m]++
		}
	}
	return out
}

// TestEveryMethodAdmittedHTTP: completions, resource reads, prompts and
// lists pass admission as tool calls do. 200 back-to-back requests of one
// tenant are served up to the burst and then refused with 429,
// Retry-After and the JSON-RPC error, which names the method (never the
// tenant or the URI); each refusal is audited with its method; another
// tenant is served meanwhile, and ping stays free.
func TestEveryMethodAdmittedHTTP(t *testing.T) {
	const burst, rate = 5, 0.5
	f := surfaceFixture(t, server.Limits{PerTenant: server.Limit{Rate: rate, Burst: burst}})
	ts := httpServer(t, f, statelessHTTP)
	ctx := context.Background()
	endpoint := ts.URL + "/mcp"
	for i, p := range probes() {
		org := fmt.Sprintf("org%d", i) // a budget of its own for each method
		tok := f.token(t, "ann", org, time.Hour)
		served, start := 0, time.Now()
		for n := range 200 {
			r, err := rpctest.Post(ctx, endpoint, tok, p.method, p.params)
			switch {
			case err != nil:
				t.Fatalf("%s #%d: %v", p.method, n, err)
			case r.Status == http.StatusOK && r.Err == nil:
				served++
			case r.Status == http.StatusTooManyRequests && r.RetryAfter != "" && r.Err != nil && r.Err.Code == server.CodeLimited:
				d := limitData(t, r.Err)
				if d["rule"] != server.RuleTenantRate || d["method"] != p.method || d["tool"] != nil {
					t.Fatalf("%s: limit data %v", p.method, d)
				}
				if bytes.Contains(r.Err.Data, []byte(org)) || bytes.Contains(r.Err.Data, []byte("secret")) {
					t.Fatalf("%s: limit data names the tenant or the URI: %s", p.method, r.Err.Data)
				}
			default:
				t.Fatalf("%s #%d: %+v", p.method, n, r)
			}
		}
		if most := burst + 1 + int(time.Since(start).Seconds()*rate); served < burst || served > most {
			t.Errorf("%s: %d of 200 back-to-back requests served, want %d to %d", p.method, served, burst, most)
		}
		if n := limitedAudits(t, f)[p.method]; n != 200-served {
			t.Errorf("%s: %d refusals audited with the method, want %d", p.method, n, 200-served)
		}
		other := f.token(t, "ben", "other"+org, time.Hour)
		if r, err := rpctest.Post(ctx, endpoint, other, p.method, p.params); err != nil || r.Status != http.StatusOK || r.Err != nil {
			t.Errorf("%s: another tenant refused while one is limited: %+v %v", p.method, r, err)
		}
		if r, err := rpctest.Post(ctx, endpoint, tok, "ping", map[string]any{}); err != nil || r.Status != http.StatusOK || r.Err != nil {
			t.Errorf("ping of a limited tenant: %+v %v", r, err)
		}
	}
	if strings.Contains(f.audit.String(), "secret") {
		t.Error("the audit log names the resource by its URI")
	}
}

// TestEveryMethodAdmittedStdio: on stdio the pipeline itself refuses these
// methods past the burst with a JSON-RPC error (CodeLimited), and the
// session goes on: once the bucket refills, the same session is served.
func TestEveryMethodAdmittedStdio(t *testing.T) {
	const burst, rate = 3, 5
	for _, p := range probes() {
		t.Run(strings.ReplaceAll(p.method, "/", "_"), func(t *testing.T) {
			f := surfaceFixture(t, server.Limits{PerTenant: server.Limit{Rate: rate, Burst: burst}})
			cs, err := connectStdio(t, f, staticToken(f.token(t, "ann", "north", time.Hour)))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			served, start := 0, time.Now()
			for range 200 {
				err := p.call(ctx, cs)
				var je *jsonrpc.Error
				switch {
				case err == nil:
					served++
				case errors.As(err, &je) && je.Code == server.CodeLimited:
					if d := limitData(t, je); d["method"] != p.method || d["rule"] != server.RuleTenantRate {
						t.Fatalf("limit data %v", d)
					}
				default:
					t.Fatal(err)
				}
			}
			if most := burst + 1 + int(time.Since(start).Seconds()*rate); served < burst || served > most {
				t.Fatalf("%d of 200 back-to-back requests served, want %d to %d", served, burst, most)
			}
			time.Sleep(time.Second / rate * 2)
			if err := p.call(ctx, cs); err != nil {
				t.Fatalf("after the refusals and a refill: %v", err)
			}
		})
	}
}

// TestRefusalKeepsHTTPSession: a go-sdk client's request refused with 429
// leaves its HTTP session usable: once the bucket refills, the same
// session is served again.
func TestRefusalKeepsHTTPSession(t *testing.T) {
	f := surfaceFixture(t, server.Limits{PerSubject: server.Limit{Rate: 4, Burst: 2}})
	ts := httpServer(t, f, server.HTTPOptions{Sessions: true})
	ctx := context.Background()
	cs, err := connectHTTP(ctx, ts.URL, f.token(t, "ann", "north", time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	refused := false
	for i := 0; i < 50 && !refused; i++ {
		_, err := cs.ListPrompts(ctx, nil)
		if refused = err != nil; refused && !strings.Contains(err.Error(), http.StatusText(http.StatusTooManyRequests)) {
			t.Fatalf("list %d: %v, want a 429", i, err)
		}
	}
	if !refused {
		t.Fatal("50 back-to-back prompts/list all served")
	}
	time.Sleep(time.Second)
	if _, err := cs.ListPrompts(ctx, nil); err != nil {
		t.Fatalf("the session after a refusal: %v", err)
	}
}

// hotelSchema has chains of hotels.
var hotelSchema = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}, {Name: "hotel", Key: builder.TextKey}},
	Tables: []builder.TableDef{{Name: "rooms", Columns: []string{"id", "chain_id", "hotel_id"}, PrimaryKey: []string{"id"},
		Levels: map[string]string{"chain_id": "chain", "hotel_id": "hotel"}}},
})

// chainFixture serves hotelSchema under limits l with the tool "noop";
// its tokens' groups /tenants/{chain}/hotels/{hotel} grant a hotel within
// its chain.
func chainFixture(t *testing.T, l server.Limits) *fixture {
	t.Helper()
	is, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: "https://notes.test/mcp", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close() })
	v, err := claims.New(claims.Options{Issuer: is.URL, Audience: []string{is.Audience}, JWKS: is.JWKS(),
		Mapping: claims.Mapping{Patterns: []string{"/tenants/{chain}", "/tenants/{chain}/hotels/{hotel}"}}})
	if err != nil {
		t.Fatal(err)
	}
	db, err := guardedsql.Open(context.Background(), "sqlite::memory:", hotelSchema, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := newFixture(t, func(o *server.Options) { o.Verifier, o.DB, o.Levels, o.Limits = v, db, nil, l })
	f.issuer = is
	if err := server.AddTool(f.srv, server.Tool{Name: "noop"}, func(context.Context, *guardedsql.DB, empty) (empty, error) {
		return empty{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return f
}

// countingRates counts the tokens taken.
type countingRates struct {
	server.RateStore
	taken atomic.Int64
}

func (c *countingRates) Take(ctx context.Context, key string, r float64, burst int) (time.Duration, error) {
	c.taken.Add(1)
	return c.RateStore.Take(ctx, key, r, burst)
}

// TestChainHotelsShareOneBudget: the budget is the root tenant's. A token
// holding three hotels of chain initech takes one token from one bucket
// per request (not one per hotel), and tokens holding other initech
// hotels draw on that same budget, while chain globex, with a hotel of the
// same id, keeps its own.
func TestChainHotelsShareOneBudget(t *testing.T) {
	rates := &countingRates{RateStore: server.NewLocalRates()}
	f := chainFixture(t, server.Limits{PerTenant: server.Limit{Rate: 0.01, Burst: 4}, Rates: rates})
	ts := httpServer(t, f, statelessHTTP)
	call := func(sub string, hotels ...string) rpctest.Reply {
		t.Helper()
		tok, err := f.issuer.Mint(devtoken.Token{Subject: sub, Groups: hotels})
		if err != nil {
			t.Fatal(err)
		}
		r, err := rpctest.Call(context.Background(), ts.URL+"/mcp", tok, "noop", map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ann := []string{"/tenants/initech/hotels/h1", "/tenants/initech/hotels/h2", "/tenants/initech/hotels/h3"}
	for i := range 2 {
		if r := call("ann", ann...); r.Status != http.StatusOK {
			t.Fatalf("ann's call %d: %+v", i, r)
		}
	}
	if n := rates.taken.Load(); n != 2 {
		t.Errorf("two requests of a token with three hotels of one chain took %d tokens, want 2", n)
	}
	for i := range 2 {
		if r := call("ben", "/tenants/initech/hotels/h4"); r.Status != http.StatusOK {
			t.Fatalf("ben's call %d: %+v", i, r)
		}
	}
	// initech's burst of 4 is spent, whichever of its hotels a token holds.
	if r := call("ann", ann...); r.Status != http.StatusTooManyRequests {
		t.Errorf("ann past initech's budget: %+v", r)
	}
	if r := call("cat", "/tenants/initech/hotels/h9"); r.Status != http.StatusTooManyRequests {
		t.Errorf("another initech hotel past initech's budget: %+v", r)
	}
	if r := call("dan", "/tenants/globex/hotels/h1"); r.Status != http.StatusOK {
		t.Errorf("chain globex refused with initech's budget: %+v", r)
	}
}
