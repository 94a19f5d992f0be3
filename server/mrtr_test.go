//lint:file-ignore SA1019 Input must keep serving sampling and roots during their deprecation window

package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
	"github.com/tenantmcp/tenantmcp/internal/rpctest"
	"github.com/tenantmcp/tenantmcp/server"
	"github.com/tenantmcp/tenantmcp/server/internal/replaytest"
	"github.com/tenantmcp/tenantmcp/server/pgstore"
	"github.com/tenantmcp/tenantmcp/server/redisstore"
)

// mrtrPolicy: card data (payment, secret) may reach a partner address only
// through the "invoice" declassification of the mail sinks, which the
// person behind the client must accept; ledger data (finance) may go there.
const mrtrPolicy = `{
  "version": 1,
  "categories": {
    "payment": {"level": "secret"},
    "finance": {"level": "internal", "to": ["email:*@partner.example"]}
  },
  "destinations": {"email:*@partner.example": "internal"},
  "tools": {"card": {"level": "secret", "categories": ["payment"]}, "ledger": {"level": "internal", "categories": ["finance"]}},
  "declassify": [
    {"reason": "invoice", "sink": ["mail", "mail2"], "to": "email:*@partner.example", "categories": ["payment"], "max_level": "secret"}
  ]
}`

const consentKey = "tenantmcp/consent"

// replicas are two servers behind no session: they share the signing keys,
// the replay store and the flow taints, and nothing else.
type replicas struct {
	urls   [2]string
	issuer *devtoken.Issuer
	audit  *logbuf.Buffer
	mu     sync.Mutex
	sent   []string
	skew   atomic.Int64 // added to the servers' clock
	unsup  atomic.Int32 // handlers that saw ErrInputUnsupported
}

func newReplicas(t *testing.T, store server.ReplayStore, stateless bool, mutate ...func(*server.Options)) *replicas {
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
	pol, err := flow.ParsePolicy("policy.json", []byte(mrtrPolicy))
	if err != nil {
		t.Fatal(err)
	}
	r := &replicas{issuer: is, audit: &logbuf.Buffer{}}
	key := bytes.Repeat([]byte("k"), 32)
	taints := flow.NewMemoryStore()
	for i := range r.urls {
		db, err := guardedsql.Open(context.Background(), "sqlite::memory:", testSchema, guardedsql.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		fc, err := flow.New(pol, flow.Options{Store: taints})
		if err != nil {
			t.Fatal(err)
		}
		opts := server.Options{Name: "notes", Verifier: v, DB: db, Levels: []string{"org"}, Flow: fc,
			AuditLogger: slog.New(slog.NewJSONHandler(r.audit, nil)), Logger: slog.New(slog.DiscardHandler),
			Now:            func() time.Time { return time.Now().Add(time.Duration(r.skew.Load())) },
			ConsentTimeout: time.Minute, Input: server.InputOptions{Keys: [][]byte{key}, Replays: store}}
		for _, m := range mutate {
			m(&opts)
		}
		srv, err := server.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		r.addTools(t, srv)
		if err := fc.Verify(); err != nil {
			t.Fatal(err)
		}
		h, err := srv.Handler(server.HTTPOptions{ResourceURL: "https://notes.test/mcp", Sessions: !stateless})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		r.urls[i] = ts.URL + "/mcp"
	}
	return r
}

type mailIn struct {
	To   string `json:"to"`
	Body string `json:"body"`
}

type said struct {
	Said map[string]any `json:"said"`
}

func (r *replicas) addTools(t *testing.T, s *server.Server) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	type Card struct {
		Number string `json:"number"`
	}
	must(server.AddTool(s, server.Tool{Name: "card"}, func(context.Context, *guardedsql.DB, empty) (Card, error) {
		return Card{Number: "4111 1111 1111 1111"}, nil
	}))
	must(server.AddTool(s, server.Tool{Name: "ledger"}, func(context.Context, *guardedsql.DB, empty) (Card, error) {
		return Card{Number: "ledger"}, nil
	}))
	for _, name := range []string{"mail", "mail2"} {
		must(server.AddTool(s, server.Tool{Name: name, Flow: flow.Decl{Level: flow.Public, Sink: &flow.Sink{Kind: flow.Email, DestArg: "to"}}},
			func(_ context.Context, _ *guardedsql.DB, in mailIn) (empty, error) {
				r.mu.Lock()
				r.sent = append(r.sent, in.To)
				r.mu.Unlock()
				return empty{}, nil
			}))
	}
	ask := func(ctx context.Context, reqs mcp.InputRequestMap) (said, error) {
		res, err := server.Input(ctx, reqs)
		if errors.Is(err, server.ErrInputUnsupported) {
			r.unsup.Add(1)
		}
		if err != nil {
			return said{}, err
		}
		out := said{Said: map[string]any{}}
		for id, a := range res {
			out.Said[id] = a
		}
		return out, nil
	}
	name := &mcp.ElicitParams{Message: "Your name?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}
	must(server.AddTool(s, server.Tool{Name: "ask"}, func(ctx context.Context, _ *guardedsql.DB, _ empty) (said, error) {
		return ask(ctx, mcp.InputRequestMap{"name": name})
	}))
	must(server.AddTool(s, server.Tool{Name: "ask3"}, func(ctx context.Context, _ *guardedsql.DB, _ empty) (said, error) {
		return ask(ctx, mcp.InputRequestMap{"name": name,
			"greeting": &mcp.CreateMessageParams{MaxTokens: 50, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Greet"}}}},
			"roots":    &mcp.ListRootsParams{}})
	}))
	must(server.AddTool(s, server.Tool{Name: "steps"}, func(ctx context.Context, _ *guardedsql.DB, _ empty) (said, error) {
		one, err := ask(ctx, mcp.InputRequestMap{"step1": name})
		if err != nil {
			return said{}, err
		}
		two, err := ask(ctx, mcp.InputRequestMap{"step2": &mcp.ElicitParams{Message: "Colour?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"colour":{"type":"string"}}}`)}})
		if err != nil {
			return said{}, err
		}
		two.Said["step1"] = one.Said["step1"]
		return two, nil
	}))
	must(server.AddPrompt(s, server.Prompt{Name: "greet"}, func(ctx context.Context, _ *guardedsql.DB, _ map[string]string) (string, said, error) {
		out, err := ask(ctx, mcp.InputRequestMap{"name": name})
		return "Greet them.", out, err
	}))
	must(server.AddResource(s, server.Resource{URI: "note://asked", Name: "asked"}, func(ctx context.Context, _ *guardedsql.DB, _ map[string]string) (said, error) {
		return ask(ctx, mcp.InputRequestMap{"name": name})
	}))
}

func (r *replicas) token(t *testing.T, sub, org string) string {
	t.Helper()
	tok, err := r.issuer.Mint(devtoken.Token{Subject: sub, Groups: []string{"org:" + org}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (r *replicas) sentCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

// allCaps is what a 2026-07-28 client that can answer everything declares.
var allCaps = map[string]any{"elicitation": map[string]any{}, "sampling": map[string]any{}, "roots": map[string]any{}}

// reply is a JSON-RPC response.
type reply struct {
	Result map[string]any
	Error  *jsonrpc.Error
}

func (p reply) inputRequired() bool {
	return p.Error == nil && p.Result["resultType"] == "input_required"
}
func (p reply) state() string { s, _ := p.Result["requestState"].(string); return s }

// post26 sends one 2026-07-28 request (no session, only its _meta) with
// params (name and extra fields) to url.
func post26(t *testing.T, url, tok, method, name string, params map[string]any, caps map[string]any) reply {
	t.Helper()
	p := map[string]any{"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps, "io.modelcontextprotocol/clientInfo": map[string]any{"name": "t", "version": "1"}}}
	for k, v := range params {
		p[k] = v
	}
	switch method {
	case "resources/read":
		p["uri"] = name
	default:
		p["name"] = name
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": p})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if i := bytes.Index(raw, []byte("data: ")); i >= 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw = raw[i+len("data: "):]
		if j := bytes.IndexByte(raw, '\n'); j >= 0 {
			raw = raw[:j]
		}
	}
	var out reply
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: HTTP %d %q", method, name, resp.StatusCode, raw)
	}
	return out
}

func accept(content map[string]any) map[string]any {
	return map[string]any{"action": "accept", "content": content}
}

var allow = map[string]any{consentKey: accept(map[string]any{"allow": true})}

var mailArgs = map[string]any{"to": "ap@partner.example", "body": "your invoice"}

// offer taints sub's conversation with card data through replica 0 and
// calls the mail sink there: the consent question and its state.
func (r *replicas) offer(t *testing.T, tok string) reply {
	t.Helper()
	if p := post26(t, r.urls[0], tok, "tools/call", "card", map[string]any{"arguments": map[string]any{}}, allCaps); p.Error != nil || p.Result["isError"] == true {
		t.Fatalf("card: %+v", p)
	}
	p := post26(t, r.urls[0], tok, "tools/call", "mail", map[string]any{"arguments": mailArgs}, allCaps)
	if !p.inputRequired() || p.state() == "" || p.Result["content"] != nil {
		t.Fatalf("no consent question: %+v", p)
	}
	q, _ := p.Result["inputRequests"].(map[string]any)[consentKey].(map[string]any)
	if q["method"] != "elicitation/create" || !strings.Contains(fmt.Sprint(q["params"]), "Allow it this once") ||
		strings.Contains(fmt.Sprint(q), "4111") {
		t.Fatalf("consent question %v", q)
	}
	return p
}

func (r *replicas) retry(t *testing.T, i int, tok, tool string, args map[string]any, answers map[string]any, state string) reply {
	t.Helper()
	return post26(t, r.urls[i], tok, "tools/call", tool, map[string]any{"arguments": args, "inputResponses": answers, "requestState": state}, allCaps)
}

// refused asserts the one generic answer to a state that does not verify:
// invalid params, no data, and the same message whatever the cause (the
// server's own, or the fixed one of the HTTP front's error scrubber).
func refused(t *testing.T, what string, p reply) {
	t.Helper()
	if p.Error == nil || p.Error.Code != jsonrpc.CodeInvalidParams || len(p.Error.Data) > 0 ||
		(p.Error.Message != "invalid requestState: send the request again without it" && p.Error.Message != "invalid params") {
		t.Errorf("%s: want the generic invalid-state error, got %+v", what, p)
		return
	}
	refusedMu.Lock()
	defer refusedMu.Unlock()
	if refusedMessage == "" {
		refusedMessage = p.Error.Message
	} else if p.Error.Message != refusedMessage {
		t.Errorf("%s: message %q differs from an earlier refusal's %q", what, p.Error.Message, refusedMessage)
	}
}

var (
	refusedMu      sync.Mutex
	refusedMessage string
)

// replayStores are the shared stores the consent test runs on: the
// in-process one shared by pointer, and PostgreSQL and Redis when their
// environment variables are set.
func replayStores(t *testing.T) map[string]server.ReplayStore {
	stores := map[string]server.ReplayStore{"memory": server.NewMemoryReplays()}
	if dsn := os.Getenv("TENANTMCP_TEST_POSTGRES_DSN"); dsn != "" {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		stores["postgres"] = pgstore.NewReplays(db)
	}
	if addr := os.Getenv("TENANTMCP_TEST_REDIS_ADDR"); addr != "" {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		rs, err := redisstore.NewReplays(c, redisstore.Options{Prefix: fmt.Sprintf("tenantmcp-test:%d:", time.Now().UnixNano())})
		if err != nil {
			t.Fatal(err)
		}
		stores["redis"] = rs
	}
	return stores
}

// TestConsentAcrossReplicas: a declassification offer is asked through an
// input-required result on replica A and accepted on replica B, with no
// session; the accepted state is refused when replayed on either replica.
// A decline denies. The audit records say what the person did.
func TestConsentAcrossReplicas(t *testing.T) {
	for name, store := range replayStores(t) {
		t.Run(name, func(t *testing.T) {
			r := newReplicas(t, store, true)
			ann := r.token(t, "ann", "north")
			p := r.offer(t, ann)
			ok := r.retry(t, 1, ann, "mail", mailArgs, allow, p.state())
			if ok.Error != nil || ok.inputRequired() || ok.Result["isError"] == true || r.sentCount() != 1 {
				t.Fatalf("accepted consent on B: %+v, %d sent", ok, r.sentCount())
			}
			for i := range 2 {
				refused(t, fmt.Sprintf("replay on replica %d", i), r.retry(t, i, ann, "mail", mailArgs, allow, p.state()))
			}
			if r.sentCount() != 1 {
				t.Fatalf("a replay sent: %d", r.sentCount())
			}
			for _, answer := range []map[string]any{
				{consentKey: map[string]any{"action": "decline"}},
				{consentKey: map[string]any{"action": "cancel"}},
				{consentKey: accept(map[string]any{"allow": false})},
				{consentKey: accept(map[string]any{"allow": "true"})},
				{},
			} {
				p := r.offer(t, ann)
				d := r.retry(t, 1, ann, "mail", mailArgs, answer, p.state())
				if d.Error == nil || d.Error.Code != server.CodeDenied {
					t.Errorf("answer %v: want a denial, got %+v", answer, d)
				}
			}
			if r.sentCount() != 1 {
				t.Fatalf("a declined call sent: %d", r.sentCount())
			}
			consents := map[string]int{}
			for _, line := range strings.Split(strings.TrimSpace(r.audit.String()), "\n") {
				var rec map[string]any
				if json.Unmarshal([]byte(line), &rec) == nil && rec["tool"] == "mail" {
					c, _ := rec["consent"].(string)
					consents[c]++
					if c == server.ConsentAccepted && rec["witness"] == nil {
						t.Error("the accepted call's audit record has no witness")
					}
				}
			}
			if consents[server.ConsentRequested] != 6 || consents[server.ConsentAccepted] != 1 || consents[server.ConsentDeclined] != 4 || consents[server.ConsentCancelled] != 1 {
				t.Errorf("audit consents %v", consents)
			}
			if !strings.Contains(r.audit.String(), `"request_state":"replayed"`) {
				t.Error("the audit record does not say the state was replayed")
			}
		})
	}
}

// TestConsentStateBindings: a consent state answers only the request it
// was issued for. Every altered binding (arguments, tool, subject, grants,
// the witness, expiry, the signature) is refused with one generic error,
// nothing is sent, and the audit record has the precise reason.
func TestConsentStateBindings(t *testing.T) {
	r := newReplicas(t, server.NewMemoryReplays(), true)
	ann, bob := r.token(t, "ann", "north"), r.token(t, "bob", "north")
	annSouth := r.token(t, "ann", "south")
	post26(t, r.urls[1], bob, "tools/call", "card", map[string]any{"arguments": map[string]any{}}, allCaps)
	for _, c := range []struct {
		name, reason string
		retry        func(state string) reply
	}{
		{"arguments", "arguments mismatch", func(s string) reply {
			return r.retry(t, 1, ann, "mail", map[string]any{"to": "ap@partner.example", "body": "all the cards"}, allow, s)
		}},
		{"tool name", "name mismatch", func(s string) reply { return r.retry(t, 1, ann, "mail2", mailArgs, allow, s) }},
		{"subject", "subject mismatch", func(s string) reply { return r.retry(t, 1, bob, "mail", mailArgs, allow, s) }},
		{"grants", "grants mismatch", func(s string) reply { return r.retry(t, 1, annSouth, "mail", mailArgs, allow, s) }},
		{"witness", "consent rule or witness changed", func(s string) reply {
			// The conversation took in more since the person was asked.
			post26(t, r.urls[1], ann, "tools/call", "ledger", map[string]any{"arguments": map[string]any{}}, allCaps)
			return r.retry(t, 1, ann, "mail", mailArgs, allow, s)
		}},
		{"expiry", "expired", func(s string) reply {
			r.skew.Store(int64(time.Minute + time.Second))
			defer r.skew.Store(0)
			return r.retry(t, 1, ann, "mail", mailArgs, allow, s)
		}},
		{"signature byte", "bad signature", func(s string) reply {
			// Another base64url digit (one that flips bits could leave the
			// alphabet, which is a malformed state, not a bad signature).
			b := []byte(s)
			b[len(b)-2] = map[bool]byte{true: 'B', false: 'A'}[b[len(b)-2] == 'A']
			return r.retry(t, 1, ann, "mail", mailArgs, allow, string(b))
		}},
		{"suffix", "signature", func(s string) reply { return r.retry(t, 1, ann, "mail", mailArgs, allow, s+"-TAMPERED") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := r.sentCount()
			p := r.offer(t, ann)
			refused(t, c.name, c.retry(p.state()))
			if r.sentCount() != before {
				t.Fatal("the call ran")
			}
			if !strings.Contains(r.audit.String(), c.reason+`"`) || !strings.Contains(r.audit.String(), `"request_state":"`) {
				t.Errorf("audit lacks the reason %q", c.reason)
			}
		})
	}
}

// TestConsentWithoutMRTR: a client that cannot be asked is denied with
// consent "unsupported", as before: a 2025-era client with no session,
// and a 2026-07-28 client that declares no elicitation capability.
func TestConsentWithoutMRTR(t *testing.T) {
	r := newReplicas(t, nil, true)
	ann := r.token(t, "ann", "north")
	r.offer(t, ann) // taints ann
	old, err := rpctest.Call(context.Background(), r.urls[1], ann, "mail", mailArgs)
	if err != nil || old.Err == nil || old.Err.Code != server.CodeDenied {
		t.Fatalf("2025 client without a session: %+v %v", old, err)
	}
	p := post26(t, r.urls[1], ann, "tools/call", "mail", map[string]any{"arguments": mailArgs}, map[string]any{"sampling": map[string]any{}})
	if p.Error == nil || p.Error.Code != server.CodeDenied {
		t.Fatalf("2026 client without elicitation: %+v", p)
	}
	if n := strings.Count(r.audit.String(), `"consent":"unsupported"`); n != 2 || r.sentCount() != 0 {
		t.Fatalf("%d unsupported consents, %d sent", n, r.sentCount())
	}
}

// TestConsentInSession: a 2025-era client in a stateful session is still
// asked through elicitation on its session (the go-sdk turns the
// input-required result into an elicitation request and retries); one
// that does not answer within ConsentTimeout is denied, audited
// "consent":"timeout".
func TestConsentInSession(t *testing.T) {
	r := newReplicas(t, nil, false, func(o *server.Options) { o.ConsentTimeout = 300 * time.Millisecond })
	ctx := context.Background()
	connect := func(sub string, answer func(context.Context) (*mcp.ElicitResult, error)) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return answer(ctx) }}).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.urls[0], HTTPClient: &http.Client{Transport: bearer{r.token(t, sub, "north")}}}, legacy)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "card", Arguments: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		return cs
	}
	asked := 0
	cs := connect("ann", func(context.Context) (*mcp.ElicitResult, error) {
		asked++
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}, nil
	})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mail", Arguments: mailArgs})
	if err != nil || res.IsError || asked != 1 || r.sentCount() != 1 {
		t.Fatalf("session consent: %v %+v, asked %d, sent %d", err, res, asked, r.sentCount())
	}
	if !strings.Contains(r.audit.String(), `"consent":"accepted"`) {
		t.Error("audit lacks the accepted consent")
	}
	slow := connect("bob", func(ctx context.Context) (*mcp.ElicitResult, error) {
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}, nil
	})
	start := time.Now()
	if res, err := slow.CallTool(ctx, &mcp.CallToolParams{Name: "mail", Arguments: mailArgs}); err == nil && !res.IsError {
		t.Fatalf("unanswered consent ran the call: %+v", res)
	}
	if time.Since(start) > 1500*time.Millisecond || r.sentCount() != 1 || !strings.Contains(r.audit.String(), `"consent":"timeout"`) {
		t.Fatalf("unanswered consent: %s, %d sent, audit %s", time.Since(start), r.sentCount(), r.audit.String())
	}
}

// TestInput: a tool, a prompt and a resource ask the person through
// server.Input across two replicas: one request, several of each kind,
// several rounds; a missing answer is asked again; a tampered or replayed
// state gets the generic error; a kind the client did not declare is
// ErrInputUnsupported.
func TestInput(t *testing.T) {
	r := newReplicas(t, server.NewMemoryReplays(), true)
	ann := r.token(t, "ann", "north")
	call := func(i int, tool string, extra map[string]any) reply {
		t.Helper()
		params := map[string]any{"arguments": map[string]any{}}
		for k, v := range extra {
			params[k] = v
		}
		return post26(t, r.urls[i], ann, "tools/call", tool, params, allCaps)
	}
	alice := map[string]any{"name": accept(map[string]any{"name": "Alice"})}

	p := call(0, "ask", nil)
	if !p.inputRequired() || p.Result["content"] != nil {
		t.Fatalf("ask: %+v", p)
	}
	if q := p.Result["inputRequests"].(map[string]any)["name"].(map[string]any); q["method"] != "elicitation/create" {
		t.Fatalf("ask: %v", q)
	}
	// A retry without the answer asks again.
	if again := call(1, "ask", map[string]any{"inputResponses": map[string]any{"wrong": accept(nil)}, "requestState": p.state()}); !again.inputRequired() {
		t.Fatalf("missing answer: %+v", again)
	} else {
		p = again
	}
	done := call(1, "ask", map[string]any{"inputResponses": alice, "requestState": p.state()})
	if done.Error != nil || done.inputRequired() || !strings.Contains(fmt.Sprint(done.Result["structuredContent"]), "Alice") {
		t.Fatalf("answered: %+v", done)
	}
	refused(t, "replayed input state", call(0, "ask", map[string]any{"inputResponses": alice, "requestState": p.state()}))
	refused(t, "tampered input state", call(0, "ask", map[string]any{"inputResponses": alice, "requestState": p.state() + "-TAMPERED"}))
	refused(t, "another tool's state", call(0, "steps", map[string]any{"inputResponses": alice, "requestState": call(0, "ask", nil).state()}))

	// Several kinds in one round.
	p = call(0, "ask3", nil)
	methods := map[string]bool{}
	for _, q := range p.Result["inputRequests"].(map[string]any) {
		methods[q.(map[string]any)["method"].(string)] = true
	}
	if !p.inputRequired() || len(methods) != 3 || !methods["sampling/createMessage"] || !methods["roots/list"] {
		t.Fatalf("ask3: %+v", p)
	}
	done = call(1, "ask3", map[string]any{"requestState": p.state(), "inputResponses": map[string]any{
		"name":     accept(map[string]any{"name": "Alice"}),
		"greeting": map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "Hello"}, "model": "m"},
		"roots":    map[string]any{"roots": []any{map[string]any{"uri": "file:///r"}}},
	}})
	if done.Error != nil || done.inputRequired() || !strings.Contains(fmt.Sprint(done.Result["structuredContent"]), "file:///r") {
		t.Fatalf("ask3 answered: %+v", done)
	}

	// Several rounds: the first answer travels in the signed state.
	r1 := call(0, "steps", nil)
	r2 := call(1, "steps", map[string]any{"inputResponses": map[string]any{"step1": accept(map[string]any{"name": "Alice"})}, "requestState": r1.state()})
	if !r2.inputRequired() || r2.state() == r1.state() || r2.Result["inputRequests"].(map[string]any)["step2"] == nil {
		t.Fatalf("round 2: %+v", r2)
	}
	r3 := call(0, "steps", map[string]any{"inputResponses": map[string]any{"step2": accept(map[string]any{"colour": "blue"})}, "requestState": r2.state()})
	if s := fmt.Sprint(r3.Result["structuredContent"]); r3.Error != nil || r3.inputRequired() || !strings.Contains(s, "Alice") || !strings.Contains(s, "blue") {
		t.Fatalf("round 3: %+v", r3)
	}

	// A client that declares sampling only is never sent an elicitation.
	if p := post26(t, r.urls[0], ann, "tools/call", "ask", map[string]any{"arguments": map[string]any{}}, map[string]any{"sampling": map[string]any{}}); p.inputRequired() || p.Error == nil || p.Error.Code != -32021 || r.unsup.Load() != 1 {
		t.Fatalf("no elicitation capability: %+v (%d unsupported)", p, r.unsup.Load())
	}

	// Prompts and resources ask the same way.
	for _, c := range []struct{ method, name, want string }{{"prompts/get", "greet", "messages"}, {"resources/read", "note://asked", "contents"}} {
		p := post26(t, r.urls[0], ann, c.method, c.name, nil, allCaps)
		if !p.inputRequired() || p.state() == "" {
			t.Fatalf("%s: %+v", c.method, p)
		}
		done := post26(t, r.urls[1], ann, c.method, c.name, map[string]any{"inputResponses": alice, "requestState": p.state()}, allCaps)
		if done.Error != nil || done.inputRequired() || !strings.Contains(fmt.Sprint(done.Result[c.want]), "Alice") {
			t.Fatalf("%s answered: %+v", c.method, done)
		}
	}
}

// failingReplays is a replay store that cannot be reached.
type failingReplays struct{}

func (failingReplays) Spend(context.Context, string, time.Time) error {
	return errors.New("dial tcp 10.0.0.9:6379: secret-host-name unreachable")
}

// TestConsentReplayStoreDown: a state that cannot be spent is refused
// (fail closed) with the generic error; the audit record names a fixed
// reason, never the store's own text.
func TestConsentReplayStoreDown(t *testing.T) {
	r := newReplicas(t, failingReplays{}, true)
	ann := r.token(t, "ann", "north")
	p := r.offer(t, ann)
	refused(t, "store down", r.retry(t, 1, ann, "mail", mailArgs, allow, p.state()))
	if r.sentCount() != 0 {
		t.Fatal("the call ran without its nonce spent")
	}
	if a := r.audit.String(); !strings.Contains(a, `"request_state":"replay store unavailable"`) || strings.Contains(a, "secret-host-name") {
		t.Errorf("audit: %s", a)
	}
}

// TestMemoryReplaysSpendOnce: the in-process store, shared by two Servers
// of one process, spends a nonce once.
func TestMemoryReplaysSpendOnce(t *testing.T) {
	st := server.NewMemoryReplays()
	replaytest.SpendOnce(t, st, st, "n1")
}

// TestStateChecksAreLoadBearing is the mutation check of the consent
// tests: with the nonce spend or the binding comparison switched off, the
// replay and the altered-arguments retry they refuse go through.
func TestStateChecksAreLoadBearing(t *testing.T) {
	if !guardfault.Enabled {
		t.Skip(guardfault.NotBuilt)
	}
	t.Run("replay", func(t *testing.T) {
		defer guardfault.Disable(guardfault.StateReplay)()
		r := newReplicas(t, server.NewMemoryReplays(), true)
		ann := r.token(t, "ann", "north")
		p := r.offer(t, ann)
		for i := range 2 {
			if ok := r.retry(t, i, ann, "mail", mailArgs, allow, p.state()); ok.Error != nil || ok.Result["isError"] == true {
				t.Fatalf("retry %d: %+v", i, ok)
			}
		}
		if r.sentCount() != 2 {
			t.Fatalf("without the spend, the replay should have sent again: %d sent", r.sentCount())
		}
	})
	t.Run("bindings", func(t *testing.T) {
		defer guardfault.Disable(guardfault.StateBindings)()
		r := newReplicas(t, server.NewMemoryReplays(), true)
		ann := r.token(t, "ann", "north")
		p := r.offer(t, ann)
		other := map[string]any{"to": "ap@partner.example", "body": "all the cards"}
		if ok := r.retry(t, 1, ann, "mail", other, allow, p.state()); ok.Error != nil || r.sentCount() != 1 {
			t.Fatalf("without the binding check, altered arguments should pass it: %+v", ok)
		}
	})
}
