// Package mcpfixture is a tenantmcp server that implements the fixture
// tools, resources and prompts the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in interop/package.json)
// calls, written only through the library's public API: a verified token
// (the development issuer), a guarded SQLite database, server.AddTool and
// friends. Its test runs the suite's server scenarios against it, so the
// suite measures the library as a tool author uses it, auth and guard in
// front, not a raw go-sdk server.
//
// Nothing reaches around server.AddTool to the go-sdk: such a fixture
// would measure the go-sdk, not tenantmcp.
package mcpfixture

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/internal/devserver"
	"github.com/tenantmcp/tenantmcp/server"
)

// Level is the fixture's one scope level; Tenant is the tenant its token
// grants, Other a tenant it does not (its rows must never show).
const (
	Level  = "org"
	Tenant = "conformance"
	Other  = "elsewhere"
)

// Schema is one tenant-scoped table of notes.
var Schema = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: Level, Key: builder.TextKey}},
	Tables: []builder.TableDef{{Name: "notes", Columns: []string{"id", "org_id", "body"}, PrimaryKey: []string{"id"},
		Levels: map[string]string{"org_id": Level}}},
})

// The texts the fixtures return. TemplateID is the note the suite reads
// through test://template/{id}/data; the other tenant's note has the id
// the suite never asks for, and the fixture's test checks it stays hidden.
const (
	SimpleText  = "This is a simple text response for testing."
	StaticText  = "This is the content of the static text resource."
	TemplateID  = 123
	OtherNoteID = 124
	ErrorText   = "This tool intentionally returns an error for testing"
)

var user = devserver.DemoUser{Subject: "conformance-suite", Groups: []string{"/orgs/" + Tenant}}

// Fixture is a running fixture server.
type Fixture struct {
	devserver.Base
}

// Options configures Start.
type Options struct {
	// HTTP is passed to server.Serve with ResourceURL and
	// AuthorizationServers filled in.
	HTTP   server.HTTPOptions
	Logger *slog.Logger
}

// Start builds the fixture server on a loopback port; Serve serves it.
func Start(ctx context.Context, o Options) (f *Fixture, err error) {
	f = &Fixture{}
	defer f.CloseOnError(&err)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	db, _, err := f.OpenDB(ctx, "mcpfixture", "", Schema, postgres.Key{}, guardedsql.Options{Logger: o.Logger}, seed)
	if err != nil {
		return nil, err
	}
	addr, err := f.Listen("127.0.0.1:0", false)
	if err != nil {
		return nil, err
	}
	f.HTTP = o.HTTP
	if err := f.Verify(ctx, "http://"+addr+"/mcp", devserver.Auth{Logger: o.Logger,
		Mapping: claims.Mapping{Patterns: []string{"/orgs/{" + Level + "}"}, Levels: []string{Level}}}); err != nil {
		return nil, err
	}
	srv, err := server.New(server.Options{Name: "tenantmcp-conformance-fixture", Version: "0.1.0",
		Verifier: f.Verifier, DB: db, Levels: []string{Level}, Logger: o.Logger, AuditLogger: o.Logger})
	if err != nil {
		return nil, err
	}
	if err := register(srv); err != nil {
		return nil, err
	}
	f.Server = srv
	return f, nil
}

// Token mints a token for the suite's user (tenant Tenant), valid for ttl.
func (f *Fixture) Token(ttl time.Duration) (string, error) { return f.Base.Token(user, ttl) }

func seed(ctx context.Context, raw *sql.DB) error {
	for _, q := range []string{
		`CREATE TABLE notes (id INTEGER PRIMARY KEY, org_id TEXT NOT NULL, body TEXT NOT NULL)`,
		fmt.Sprintf(`INSERT INTO notes VALUES (%d, '%s', 'template data'), (%d, '%s', 'not yours')`, TemplateID, Tenant, OtherNoteID, Other),
	} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// Text is the output of the text fixtures.
type Text struct {
	Text string `json:"text"`
}

// Note is what the template resource returns.
type Note struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

type none struct{}

// note reads one note through the guard: another tenant's reads as
// missing (guardedsql.ErrNotFound).
func note(ctx context.Context, db *guardedsql.DB, id int64) (Note, error) {
	n := Schema.Table("notes")
	q, err := builder.Select(n.Col("id"), n.Col("body")).From(n).Where(n.Col("id").Eq(id)).Build()
	if err != nil {
		return Note{}, err
	}
	var out Note
	err = db.QueryRow(ctx, q).Scan(&out.ID, &out.Body)
	return out, err
}

// bodies completes a prompt argument from the caller's notes.
func bodies(ctx context.Context, db *guardedsql.DB, prefix string, _ map[string]string) ([]string, error) {
	n := Schema.Table("notes")
	q, err := builder.Select(n.Col("body")).From(n).Build()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	all, err := guardedsql.CollectRows(rows, func(r *guardedsql.Rows) (s string, err error) { err = r.Scan(&s); return })
	var out []string
	for _, s := range all {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out, err
}

func register(s *server.Server) error {
	errs := []error{
		server.AddTool(s, server.Tool{Name: "test_simple_text", Description: "Returns simple text."},
			func(context.Context, *guardedsql.DB, none) (Text, error) { return Text{SimpleText}, nil }),
		server.AddTool(s, server.Tool{Name: "test_error_handling", Description: "Always fails with a tool error."},
			func(context.Context, *guardedsql.DB, none) (Text, error) {
				return Text{}, server.InvalidInput(ErrorText)
			}),
		server.AddResource(s, server.Resource{URI: "test://static-text", Name: "static-text", Description: "A static text resource."},
			func(context.Context, *guardedsql.DB, map[string]string) (Text, error) { return Text{StaticText}, nil }),
		server.AddResourceTemplate(s, server.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template",
			Description: "A note of the caller's tenant, by id."},
			func(ctx context.Context, db *guardedsql.DB, vars map[string]string) (Note, error) {
				id, err := strconv.ParseInt(vars["id"], 10, 64)
				if err != nil {
					return Note{}, guardedsql.ErrNotFound
				}
				return note(ctx, db, id)
			}),
		server.AddPrompt(s, server.Prompt{Name: "test_simple_prompt", Description: "A prompt without arguments."},
			func(context.Context, *guardedsql.DB, map[string]string) (string, any, error) {
				return "This is a simple prompt for testing.", nil, nil
			}),
		server.AddPrompt(s, server.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with two arguments.",
			Args: []server.PromptArg{
				{Name: "arg1", Description: "First test argument", Required: true, Complete: &server.Completion{Func: bodies}},
				{Name: "arg2", Description: "Second test argument", Required: true},
			}},
			func(_ context.Context, _ *guardedsql.DB, args map[string]string) (string, any, error) {
				return fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", args["arg1"], args["arg2"]), nil, nil
			}),
	}
	return errors.Join(append(errs, registerInput(s), registerNotify(s), registerContent(s))...)
}
