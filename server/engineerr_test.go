package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// TestEngineRefusalsReachClientsAsWords: the database's refusals, typed by
// guardedsql, reach the client as "conflict", "still referenced" and
// "invalid value", with none of the engine's text (which names the
// duplicate key's value).
func TestEngineRefusalsReachClientsAsWords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE notes (id INTEGER PRIMARY KEY, org_id TEXT NOT NULL, body TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, err := guardedsql.Open(context.Background(), "sqlite:"+path, testSchema, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := newFixture(t, func(o *server.Options) { o.DB = db })
	type In struct {
		Mode string `json:"mode"`
		Body string `json:"body"`
	}
	notes := testSchema.Table("notes")
	err = server.AddTool(f.srv, server.Tool{Name: "note"}, func(ctx context.Context, db *guardedsql.DB, in In) (empty, error) {
		switch in.Mode {
		case "referenced":
			return empty{}, &guardedsql.EngineError{Kind: guardedsql.ErrReferenced, Table: "notes"}
		case "null":
			_, err := db.Exec(ctx, builder.Must(builder.InsertInto(notes).Columns("id", "org_id", "body").Values(int64(8), "north", nil).Build()))
			return empty{}, err
		}
		_, err := db.Exec(ctx, builder.Must(builder.InsertInto(notes).Columns("id", "org_id", "body").Values(int64(7), "north", in.Body).Build()))
		return empty{}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}})
	cs, err := connectStdio(t, f, staticToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	call := func(args map[string]any) (string, bool) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "note", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	if txt, isErr := call(map[string]any{"mode": "insert", "body": "first"}); isErr {
		t.Fatalf("first insert: %s", txt)
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"mode": "insert", "body": "second"}, "conflict"},
		{map[string]any{"mode": "referenced", "body": ""}, "still referenced"},
		{map[string]any{"mode": "null", "body": ""}, "invalid value"},
	} {
		txt, isErr := call(c.args)
		if !isErr || txt != c.want {
			t.Errorf("%v: %q (isError %v), want %q", c.args, txt, isErr, c.want)
		}
	}
	for _, s := range []string{"UNIQUE", "notes.id", "constraint failed"} {
		if strings.Contains(f.audit.String(), s) {
			t.Errorf("engine text %q in the audit log", s)
		}
	}
	for _, o := range []string{`"outcome":"conflict"`, `"outcome":"still_referenced"`} {
		if !strings.Contains(f.audit.String(), o) {
			t.Errorf("audit log lacks %s:\n%s", o, f.audit.String())
		}
	}
}

// TestRetryableReachesClientAsRetryable: a transaction that keeps losing
// to concurrent ones (a deadlock, here on every attempt) is retried as the
// tool asked (TxOptions.MaxRetries), and then reaches the client as the
// retryable tool error, not as an internal error, with none of the
// error's text and a structured "retryable": true.
func TestRetryableReachesClientAsRetryable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE notes (id INTEGER PRIMARY KEY, org_id TEXT NOT NULL, body TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, err := guardedsql.Open(context.Background(), "sqlite:"+path, testSchema, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := newFixture(t, func(o *server.Options) { o.DB = db })
	type In struct {
		Mode string `json:"mode"`
	}
	attempts := 0
	const secret = "other-tenant-secret-4711"
	err = server.AddTool(f.srv, server.Tool{Name: "rent"}, func(ctx context.Context, db *guardedsql.DB, in In) (empty, error) {
		err := db.TxWith(ctx, guardedsql.TxOptions{Isolation: guardedsql.Serializable, MaxRetries: 2, RetryBackoff: time.Millisecond}, func(tx *guardedsql.Tx) error {
			attempts++
			if in.Mode == "bug" {
				return errors.New("a bug near " + secret)
			}
			return fmt.Errorf("renting near %s: %w", secret, &guardedsql.EngineError{Kind: guardedsql.ErrRetryable, Code: "40P01"})
		})
		return empty{}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := f.session(t, "ann", "org:north")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "rent", Arguments: map[string]any{"mode": "deadlock"}})
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 3 {
		t.Errorf("%d attempts, want 3 (MaxRetries 2)", attempts)
	}
	txt := res.Content[0].(*mcp.TextContent).Text
	if !res.IsError || txt != server.RetryableMessage {
		t.Fatalf("answer %q (isError %v), want the retryable tool error", txt, res.IsError)
	}
	js, _ := json.Marshal(res.StructuredContent)
	var data struct {
		Retryable bool   `json:"retryable"`
		CallID    string `json:"call_id"`
	}
	if err := json.Unmarshal(js, &data); err != nil || !data.Retryable || data.CallID == "" {
		t.Errorf("structured content %s: want retryable true and a call id", js)
	}
	for _, s := range []string{secret, "40P01"} {
		if strings.Contains(txt, s) || strings.Contains(string(js), s) || strings.Contains(f.audit.String(), s) {
			t.Errorf("%q reached the client or the audit log", s)
		}
	}
	if !strings.Contains(f.audit.String(), `"outcome":"retryable"`) {
		t.Errorf("audit log lacks the retryable outcome:\n%s", f.audit.String())
	}
	// Any other error is neither retried nor called retryable.
	attempts = 0
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "rent", Arguments: map[string]any{"mode": "bug"}})
	if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "internal error") || attempts != 1 {
		t.Fatalf("a bug: %v %+v after %d attempts, want the internal tool error after 1", err, res, attempts)
	}
}
