package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/flow"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// leak is the personal data every string of the content tests carries.
const leak = "jane.doe@example.com"

// contentFixture is a server whose notes table holds one note of org
// north (its body carries leak) and one of org south, with a flow checker,
// and a client of ann (org north) over stdio.
func contentFixture(t *testing.T) (*fixture, *flow.Checker, func() *mcp.ClientSession) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notes.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`CREATE TABLE notes (id INTEGER PRIMARY KEY, org_id TEXT NOT NULL, body TEXT NOT NULL)`,
		`INSERT INTO notes VALUES (1, 'north', 'write to ` + leak + `'), (2, 'south', 'not yours')`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	db, err := guardedsql.Open(context.Background(), "sqlite:"+path, testSchema, guardedsql.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pol, err := flow.ParsePolicy("policy.json", []byte(`{"version": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	fc, err := flow.New(pol, flow.Options{Store: flow.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(o *server.Options) { o.DB, o.Flow = db, fc })
	return f, fc, func() *mcp.ClientSession {
		tok, _ := f.issuer.Mint(devtoken.Token{Subject: "ann", Groups: []string{"org:north"}})
		cs, err := connectStdio(t, f, staticToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
}

// bodies reads the caller's notes through the guard.
func bodies(ctx context.Context, db *guardedsql.DB) ([]string, error) {
	n := testSchema.Table("notes")
	rows, err := db.Query(ctx, builder.Must(builder.Select(n.Col("body")).From(n).Build()))
	if err != nil {
		return nil, err
	}
	return guardedsql.CollectRows(rows, func(r *guardedsql.Rows) (s string, err error) { err = r.Scan(&s); return })
}

// everyBlock puts s into every string of every kind of block.
func everyBlock(s string, data []byte) server.Content {
	return server.Content{
		server.TextBlock{Text: s},
		server.ImageBlock{MIMEType: "image/png", Data: data},
		server.AudioBlock{MIMEType: "audio/wav", Data: data},
		server.ResourceBlock{URI: "note://" + s, MIMEType: "text/plain", Text: s},
		server.ResourceBlock{URI: "note://blob/" + s, MIMEType: "application/octet-stream", Blob: data},
		server.LinkBlock{URI: "note://" + s, Name: s, Title: s, Description: s, MIMEType: "text/plain"},
	}
}

// TestContentRedactsEveryText: a tool whose result is Content answers
// with its blocks (no structured content, no output schema), every string
// of every kind of block redacted, binary data as the handler gave it;
// the tenant's row read into it labels the caller for flow as a JSON
// result does (the e-mail the redactor found: category pii); a prompt
// renders several messages, redacted alike.
func TestContentRedactsEveryText(t *testing.T) {
	f, fc, connect := contentFixture(t)
	data := []byte{0x89, 'P', 'N', 'G', 0}
	if err := server.AddTool(f.srv, server.Tool{Name: "notes"}, func(ctx context.Context, db *guardedsql.DB, _ empty) (server.Content, error) {
		bs, err := bodies(ctx, db)
		if err != nil || len(bs) != 1 {
			return nil, err
		}
		return everyBlock(bs[0], data), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := server.AddPrompt(f.srv, server.Prompt{Name: "review"}, func(ctx context.Context, db *guardedsql.DB, _ map[string]string) (string, server.Content, error) {
		bs, err := bodies(ctx, db)
		return "review " + strings.Join(bs, ", "), everyBlock(strings.Join(bs, ", "), data), err
	}); err != nil {
		t.Fatal(err)
	}
	cs := connect()
	ctx := context.Background()
	key := fc.KeyOf(flow.CallInfo{Subject: "ann"})
	if l, err := fc.Taint(ctx, key); err != nil || slices.Contains(l.Categories, "pii") {
		t.Fatalf("taint before the call = %+v %v", l, err)
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].OutputSchema != nil {
		t.Fatalf("tools/list: %v %+v: a Content tool declares no output schema", err, tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "notes", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("notes: %v %+v", err, res)
	}
	if res.StructuredContent != nil {
		t.Errorf("structured content %v, want none", res.StructuredContent)
	}
	checkBlocks(t, "tools/call", res.Content, data)
	l, err := fc.Taint(ctx, key)
	if err != nil || !slices.Contains(l.Categories, "pii") || l.Level != flow.Confidential {
		t.Fatalf("taint after the call = %+v %v, want the e-mail's category pii at confidential", l, err)
	}

	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "review"})
	if err != nil {
		t.Fatal(err)
	}
	var got []mcp.Content
	for _, m := range pr.Messages {
		if m.Role != "user" {
			t.Errorf("role %q, want user", m.Role)
		}
		got = append(got, m.Content)
	}
	if len(got) == 0 {
		t.Fatal("no messages")
	}
	first, ok := got[0].(*mcp.TextContent)
	if !ok || !strings.HasPrefix(first.Text, "review write to ") || strings.Contains(first.Text, leak) {
		t.Fatalf("first message %#v, want the prompt's text", got[0])
	}
	checkBlocks(t, "prompts/get", got[1:], data)
	if strings.Contains(f.audit.String(), leak) {
		t.Fatalf("audit log leaks the e-mail:\n%s", f.audit.String())
	}
}

// checkBlocks: the blocks of everyBlock, in order, with no trace of leak
// and the binary data intact.
func checkBlocks(t *testing.T, what string, cs []mcp.Content, data []byte) {
	t.Helper()
	js, _ := json.Marshal(cs)
	if bytes.Contains(js, []byte(leak)) || !bytes.Contains(js, []byte("write to ")) {
		t.Fatalf("%s: %s: want every text redacted, the rest kept", what, js)
	}
	if len(cs) != 6 {
		t.Fatalf("%s: %d blocks, want 6: %s", what, len(cs), js)
	}
	img, ok1 := cs[1].(*mcp.ImageContent)
	aud, ok2 := cs[2].(*mcp.AudioContent)
	txt, ok3 := cs[3].(*mcp.EmbeddedResource)
	blob, ok4 := cs[4].(*mcp.EmbeddedResource)
	link, ok5 := cs[5].(*mcp.ResourceLink)
	if _, ok := cs[0].(*mcp.TextContent); !ok || !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		t.Fatalf("%s: block kinds %s", what, js)
	}
	if !bytes.Equal(img.Data, data) || img.MIMEType != "image/png" || !bytes.Equal(aud.Data, data) || aud.MIMEType != "audio/wav" ||
		!bytes.Equal(blob.Resource.Blob, data) || txt.Resource.Text == "" || txt.Resource.MIMEType != "text/plain" || link.Name == "" {
		t.Fatalf("%s: blocks %s", what, js)
	}
}

// TestContentRefusesBadBlocks: a nil block, or an embedded resource with
// both text and blob, is the handler's bug: an internal error, nothing of
// the result sent.
func TestContentRefusesBadBlocks(t *testing.T) {
	f, _, connect := contentFixture(t)
	for name, c := range map[string]server.Content{
		"nil":  {server.TextBlock{Text: leak}, nil},
		"both": {server.TextBlock{Text: leak}, server.ResourceBlock{URI: "x://y", Text: leak, Blob: []byte{1}}},
		"ptr":  {server.TextBlock{Text: leak}, (*server.TextBlock)(nil)},
	} {
		if err := server.AddTool(f.srv, server.Tool{Name: name}, func(context.Context, *guardedsql.DB, empty) (server.Content, error) {
			return c, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	cs := connect()
	for _, name := range []string{"nil", "both", "ptr"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(res.Content)
		if !res.IsError || len(res.Content) != 1 || !strings.Contains(string(js), "internal error (correlation id ") {
			t.Errorf("%s: %s (isError %v), want an internal error only", name, js, res.IsError)
		}
	}
}

// TestBlobResource: a resource whose handler returns a Blob is read as
// that blob (bytes intact, the handler's MIME type, the default when it
// names none) and lists no MIME type; a JSON resource still lists and
// reads as application/json.
func TestBlobResource(t *testing.T) {
	f, _, connect := contentFixture(t)
	png := []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}
	for uri, b := range map[string]server.Blob{"img://logo": {MIMEType: "image/png", Data: png}, "img://raw": {Data: nil}} {
		if err := server.AddResource(f.srv, server.Resource{URI: uri, Name: uri}, func(context.Context, *guardedsql.DB, map[string]string) (server.Blob, error) {
			return b, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := server.AddResource(f.srv, server.Resource{URI: "note://all", Name: "all"}, func(ctx context.Context, db *guardedsql.DB, _ map[string]string) ([]string, error) {
		return bodies(ctx, db)
	}); err != nil {
		t.Fatal(err)
	}
	cs := connect()
	ctx := context.Background()
	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Resources {
		if want := map[bool]string{true: "", false: server.MIMEJSON}[strings.HasPrefix(r.URI, "img:")]; r.MIMEType != want {
			t.Errorf("%s lists MIME type %q, want %q", r.URI, r.MIMEType, want)
		}
	}
	for uri, want := range map[string]*mcp.ResourceContents{
		"img://logo": {URI: "img://logo", MIMEType: "image/png", Blob: png},
		"img://raw":  {URI: "img://raw", MIMEType: "application/octet-stream", Blob: []byte{}},
	} {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(res.Contents) != 1 {
			t.Fatalf("%s: %v %+v", uri, err, res)
		}
		got := res.Contents[0]
		if got.URI != want.URI || got.MIMEType != want.MIMEType || got.Text != "" || !bytes.Equal(got.Blob, want.Blob) {
			t.Errorf("%s = %+v, want %+v", uri, got, want)
		}
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "note://all"})
	if err != nil || len(res.Contents) != 1 || res.Contents[0].MIMEType != server.MIMEJSON || strings.Contains(res.Contents[0].Text, leak) ||
		!strings.Contains(res.Contents[0].Text, "write to ") {
		t.Fatalf("JSON resource: %v %+v", err, res)
	}
}
