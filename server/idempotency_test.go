package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// flakyStore is a flow.Store that fails every Join while fail is set: the
// taint store going away between a tool's commit and its result's label.
type flakyStore struct {
	flow.Store
	fail  atomic.Bool
	joins atomic.Int64
}

func (s *flakyStore) Join(ctx context.Context, k flow.Key, now time.Time, retain time.Duration, add flow.Taint) error {
	if s.fail.Load() {
		return fmt.Errorf("%w: store cut", flow.ErrTaintStore)
	}
	s.joins.Add(1)
	return s.Store.Join(ctx, k, now, retain, add)
}

type noteIn struct {
	Body string `json:"body"`
}

type noteOut struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

// writeFixture: a notes server on a SQLite file with the idempotency table,
// a flow checker on a flakyStore, an add_note tool (counting its runs), a
// read-only list tool, and clients by subject.
type writeFixture struct {
	f     *fixture
	db    *guardedsql.DB
	store *flakyStore
	runs  atomic.Int64
	path  string
	url   string
}

func newWriteFixture(t *testing.T, enable bool) *writeFixture {
	t.Helper()
	w := &writeFixture{path: filepath.Join(t.TempDir(), "notes.db"), store: &flakyStore{Store: flow.NewMemoryStore()}}
	raw, err := sql.Open("sqlite", "file:"+w.path)
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := guardedsql.IdempotencyDDL("sqlite", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append([]string{`CREATE TABLE notes (id INTEGER PRIMARY KEY, org_id TEXT NOT NULL, body TEXT NOT NULL)`}, ddl...) {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	w.db, err = guardedsql.Open(context.Background(), "sqlite:"+w.path, testSchema, guardedsql.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.db.Close() })
	pol, err := flow.ParsePolicy("policy.json", []byte(`{"version": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	fc, err := flow.New(pol, flow.Options{Store: w.store})
	if err != nil {
		t.Fatal(err)
	}
	w.f = newFixture(t, func(o *server.Options) { o.DB, o.Flow = w.db, fc })
	if enable {
		if err := w.f.srv.EnableIdempotencyKeys(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	notes := testSchema.Table("notes")
	if err := server.AddTool(w.f.srv, server.Tool{Name: "add_note"}, func(ctx context.Context, db *guardedsql.DB, in noteIn) (noteOut, error) {
		w.runs.Add(1)
		res, err := db.Exec(ctx, builder.Must(builder.InsertInto(notes).Columns("org_id", "body").Values("north", in.Body).Build()))
		return noteOut{ID: res.LastInsertID, Body: in.Body}, err
	}); err != nil {
		t.Fatal(err)
	}
	if err := server.AddTool(w.f.srv, server.Tool{Name: "add_then_fail"}, func(ctx context.Context, db *guardedsql.DB, in noteIn) (noteOut, error) {
		if _, err := db.Exec(ctx, builder.Must(builder.InsertInto(notes).Columns("org_id", "body").Values("north", in.Body).Build())); err != nil {
			return noteOut{}, err
		}
		return noteOut{}, errors.New("the step after the write failed")
	}); err != nil {
		t.Fatal(err)
	}
	if err := server.AddTool(w.f.srv, server.Tool{Name: "list_notes"}, func(ctx context.Context, db *guardedsql.DB, _ empty) (struct{ Bodies []string }, error) {
		bs, err := bodies(ctx, db)
		return struct{ Bodies []string }{bs}, err
	}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *writeFixture) client(t *testing.T, sub string) *mcp.ClientSession {
	return w.clientWith(t, sub, "")
}

// clientWith connects sub over streamable HTTP; header, if set, is sent
// as the Idempotency-Key header of every request.
func (w *writeFixture) clientWith(t *testing.T, sub, header string) *mcp.ClientSession {
	t.Helper()
	if w.url == "" {
		w.url = serveHTTP(t, w.f.srv, server.HTTPOptions{})
	}
	tok, _ := w.f.issuer.Mint(devtoken.Token{Subject: sub, Groups: []string{"org:north"}})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: w.url + "/mcp", HTTPClient: &http.Client{Transport: keyHeader{tok, header}}}, legacy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type keyHeader struct{ tok, key string }

func (b keyHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	if b.key != "" {
		r.Header.Set(server.HeaderIdempotencyKey, b.key)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// count is the number of notes with body, read raw.
func (w *writeFixture) count(t *testing.T, body string) int {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+w.path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var n int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM notes WHERE body = ?`, body).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func addNote(cs *mcp.ClientSession, body, key string) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: "add_note", Arguments: map[string]any{"body": body}}
	if key != "" {
		p.Meta = mcp.Meta{server.MetaIdempotencyKey: key}
	}
	return cs.CallTool(context.Background(), p)
}

// unconfirmed checks err is write.unconfirmed and returns retry_safe.
func unconfirmed(t *testing.T, what string, res *mcp.CallToolResult, err error) bool {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != server.CodeWriteUnconfirmed {
		t.Fatalf("%s: %+v %v, want the write.unconfirmed error (code %d)", what, res, err, server.CodeWriteUnconfirmed)
	}
	var d struct {
		Rule         string `json:"rule"`
		WriteApplied bool   `json:"write_applied"`
		RetrySafe    bool   `json:"retry_safe"`
		CallID       string `json:"call_id"`
	}
	if err := json.Unmarshal(je.Data, &d); err != nil || d.Rule != server.RuleWriteUnconfirmed || !d.WriteApplied || d.CallID == "" {
		t.Fatalf("%s: data %s (%v), want rule write.unconfirmed, write_applied, a call id", what, je.Data, err)
	}
	return d.RetrySafe
}

func invalidParams(t *testing.T, what string, res *mcp.CallToolResult, err error) {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("%s: %+v %v, want invalid params", what, res, err)
	}
}

// TestWriteUnconfirmedWhenTaintFails: a call that committed a write and
// then could not record its result's taint is answered write.unconfirmed
// (write_applied, not retry-safe without a key), not "internal error";
// the write stands. A call that wrote nothing keeps the internal error:
// the rule is tied to a committed write, counted by guardedsql.
func TestWriteUnconfirmedWhenTaintFails(t *testing.T) {
	w := newWriteFixture(t, false)
	cs := w.client(t, "ann")
	w.store.fail.Store(true)
	res, err := addNote(cs, "no key", "")
	if unconfirmed(t, "add_note with the taint store down", res, err) {
		t.Error("retry_safe without an idempotency key")
	}
	if n := w.count(t, "no key"); n != 1 {
		t.Fatalf("%d notes after the unconfirmed write, want 1 (the write stands)", n)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Fatalf("list_notes with the taint store down: %+v %v, want a withheld result (internal error)", res, err)
	}
	// A handler that committed its write and then failed: the same rule.
	w.store.fail.Store(false)
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add_then_fail", Arguments: map[string]any{"body": "then fail"}})
	if unconfirmed(t, "add_then_fail", res, err) {
		t.Error("retry_safe without an idempotency key")
	}
	if n := w.count(t, "then fail"); n != 1 {
		t.Fatalf("%d notes after add_then_fail, want 1", n)
	}
	// The server without EnableIdempotencyKeys refuses a key rather than
	// let the client believe its retry safe.
	res, err = addNote(cs, "keyed", "0123456789abcdef-refused")
	invalidParams(t, "a key on a server without idempotency keys", res, err)
	if n := w.count(t, "keyed"); n != 0 {
		t.Fatalf("the refused keyed call wrote %d notes", n)
	}
}

// TestIdempotencyKeyRetryNeverWritesTwice: with an idempotency key, a
// retry never runs the handler again. While the taint store is down the
// retry gets write.unconfirmed (retry_safe); once it is back, the first
// call's result, labelled into the taint again. The same key with other
// arguments is invalid params; another subject's same key is its own.
func TestIdempotencyKeyRetryNeverWritesTwice(t *testing.T) {
	w := newWriteFixture(t, true)
	cs := w.client(t, "ann")
	const key = "6f1c2d8e-0b7a-4d55-9e1f-aa00bb11cc22"
	w.store.fail.Store(true)
	res, err := addNote(cs, "once", key)
	if !unconfirmed(t, "first call, taint store down", res, err) {
		t.Fatal("write.unconfirmed with a key: retry_safe = false")
	}
	for i := range 3 {
		res, err := addNote(cs, "once", key)
		if !unconfirmed(t, fmt.Sprintf("retry %d, taint store down", i), res, err) {
			t.Fatal("retry: retry_safe = false")
		}
	}
	w.store.fail.Store(false)
	joins := w.store.joins.Load()
	res, err = addNote(cs, "once", key)
	if err != nil || res.IsError {
		t.Fatalf("retry with the taint store back: %+v %v", res, err)
	}
	var got noteOut
	if b, _ := json.Marshal(res.StructuredContent); json.Unmarshal(b, &got) != nil || got.ID == 0 || got.Body != "once" {
		t.Fatalf("replayed result %+v, want the first call's note", res.StructuredContent)
	}
	if w.store.joins.Load() != joins+1 {
		t.Errorf("the replayed result was released without its taint recorded (%d joins)", w.store.joins.Load()-joins)
	}
	// Again: the same stored answer.
	res2, err := addNote(cs, "once", key)
	var again noteOut
	if b, _ := json.Marshal(res2.StructuredContent); err != nil || json.Unmarshal(b, &again) != nil || again != got {
		t.Fatalf("second replay %+v %v, want %+v", res2, err, got)
	}
	if n, runs := w.count(t, "once"), w.runs.Load(); n != 1 || runs != 1 {
		t.Fatalf("%d notes, handler ran %d times after 6 calls with one key: want 1 and 1", n, runs)
	}
	res, err = addNote(cs, "other", key)
	invalidParams(t, "the same key with other arguments", res, err)
	// Another subject's key is bound to that subject: its own write.
	res, err = addNote(w.client(t, "bea"), "once", key)
	if err != nil || res.IsError {
		t.Fatalf("bea with ann's key: %+v %v", res, err)
	}
	if n := w.count(t, "once"); n != 2 {
		t.Fatalf("%d notes after bea's call, want 2", n)
	}
	// The key may come as the Idempotency-Key header instead.
	hc := w.clientWith(t, "ann", key)
	if res, err := addNote(hc, "once", ""); err != nil || res.IsError {
		t.Fatalf("retry with the key in the header: %+v %v", res, err)
	}
	if n, runs := w.count(t, "once"), w.runs.Load(); n != 2 || runs != 2 {
		t.Fatalf("%d notes, %d runs after the header retry: want 2 and 2", n, runs)
	}
	// Malformed keys are refused.
	res, err = addNote(cs, "short", "short")
	invalidParams(t, "a short key", res, err)
}

// TestIdempotencyKeyConcurrentCalls: calls with one key racing each
// other write once; every answer is the one result or write.unconfirmed
// (retry-safe) or a retryable conflict, and a final retry gets the result.
func TestIdempotencyKeyConcurrentCalls(t *testing.T) {
	w := newWriteFixture(t, true)
	cs := w.client(t, "ann")
	const key = "race-key-0123456789"
	var wg sync.WaitGroup
	var ok, unconf, other atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := addNote(cs, "raced", key)
			var je *jsonrpc.Error
			switch {
			case err == nil && !res.IsError:
				ok.Add(1)
			case errors.As(err, &je) && je.Code == server.CodeWriteUnconfirmed:
				unconf.Add(1)
			default:
				other.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("8 racing calls: %d results, %d write.unconfirmed, %d other (busy/retryable)", ok.Load(), unconf.Load(), other.Load())
	if n := w.count(t, "raced"); n != 1 {
		t.Fatalf("%d notes after 8 racing calls with one key, want 1", n)
	}
	if res, err := addNote(cs, "raced", key); err != nil || res.IsError {
		t.Fatalf("final retry: %+v %v", res, err)
	}
	if n := w.count(t, "raced"); n != 1 {
		t.Fatalf("%d notes after the final retry, want 1", n)
	}
}

// TestIdempotencyKeyStateless2026: the same guarantees on the stateless
// 2026-07-28 protocol, where no session carries anything between requests:
// the key travels in the request's _meta (or the Idempotency-Key header),
// a write whose taint could not be recorded is answered write.unconfirmed
// with retry_safe, retries never run the handler again, and the retry
// after the store is back gets the first call's note. Two subjects'
// same key stay two writes.
func TestIdempotencyKeyStateless2026(t *testing.T) {
	w := newWriteFixture(t, true)
	w.url = serveHTTP(t, w.f.srv, server.HTTPOptions{})
	mint := func(sub string) string {
		tok, err := w.f.issuer.Mint(devtoken.Token{Subject: sub, Groups: []string{"org:north"}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ann, bea := mint("ann"), mint("bea")
	const key = "2026-stateless-key-0001"
	call := func(tok, body string, meta bool, hdr ...string) wire {
		t.Helper()
		params := `"name":"add_note","arguments":{"body":` + jsonString(body) + `}`
		req := req2026("tools/call", params)
		if meta {
			req = strings.Replace(req, `"_meta":{`, `"_meta":{"`+server.MetaIdempotencyKey+`":"`+key+`",`, 1)
		}
		return post(t, w.url+"/mcp", tok, req, append(hdr2026("tools/call", "add_note"), hdr...)...)
	}
	w.store.fail.Store(true)
	for i := range 3 {
		r := call(ann, "stateless", true)
		if r.status != http.StatusOK || r.msg.Error == nil || r.msg.Error.Code != server.CodeWriteUnconfirmed {
			t.Fatalf("call %d with the taint store down: %d %s, want write.unconfirmed", i, r.status, r.raw)
		}
		var d struct {
			WriteApplied bool `json:"write_applied"`
			RetrySafe    bool `json:"retry_safe"`
		}
		if err := json.Unmarshal(r.msg.Error.Data, &d); err != nil || !d.WriteApplied || !d.RetrySafe {
			t.Fatalf("call %d: data %s (%v), want write_applied and retry_safe", i, r.msg.Error.Data, err)
		}
	}
	w.store.fail.Store(false)
	r := call(ann, "stateless", true)
	var res struct {
		IsError           bool    `json:"isError"`
		StructuredContent noteOut `json:"structuredContent"`
	}
	if r.status != http.StatusOK || r.msg.Error != nil || json.Unmarshal(r.msg.Result, &res) != nil || res.IsError ||
		res.StructuredContent.ID == 0 || res.StructuredContent.Body != "stateless" {
		t.Fatalf("retry with the store back: %d %s", r.status, r.raw)
	}
	// The key in the header instead of _meta: the same stored answer.
	r = call(ann, "stateless", false, server.HeaderIdempotencyKey, key)
	var again struct {
		StructuredContent noteOut `json:"structuredContent"`
	}
	if r.msg.Error != nil || json.Unmarshal(r.msg.Result, &again) != nil || again.StructuredContent != res.StructuredContent {
		t.Fatalf("header retry: %s, want %+v", r.raw, res.StructuredContent)
	}
	if n, runs := w.count(t, "stateless"), w.runs.Load(); n != 1 || runs != 1 {
		t.Fatalf("%d notes, handler ran %d times after 5 keyed calls: want 1 and 1", n, runs)
	}
	// Another subject's same key is its own write, not ann's answer.
	r = call(bea, "stateless", true)
	var beas struct {
		StructuredContent noteOut `json:"structuredContent"`
	}
	if r.msg.Error != nil || json.Unmarshal(r.msg.Result, &beas) != nil || beas.StructuredContent.ID == 0 || beas.StructuredContent.ID == res.StructuredContent.ID {
		t.Fatalf("bea with ann's key: %s", r.raw)
	}
	if n := w.count(t, "stateless"); n != 2 {
		t.Fatalf("%d notes after bea's call, want 2", n)
	}
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }
