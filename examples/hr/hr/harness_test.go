package hr_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/examples/hr/hr"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

// served is the HR server on one engine, with the owner's unguarded handle
// on its database (to check what writes did) and the data it was seeded
// with (the oracle).
type served struct {
	engine string
	app    *hr.App
	owner  *sql.DB
	data   *hr.Data
}

func randName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// serve seeds hr.Generate(3) into a database of its own on engine (dsn is
// the administrator's DSN of a live server, "" for SQLite) and serves the
// tools on it through the guard, as a deployment would: on PostgreSQL as a
// login role with forced row-level security, on MariaDB in a scratch
// database. Everything it creates is dropped when the test ends.
func serve(t testing.TB, engine, dsn string) *served {
	t.Helper()
	ctx := context.Background()
	s := &served{engine: engine, data: hr.Generate(3)}
	// Each company's employees get first names of their own ("Mk" and a
	// random tag), so a value of one company found in another's output is
	// a leak, not a coincidence.
	for i := range s.data.Employees {
		e := &s.data.Employees[i]
		e.FirstName = "Mk" + randName("")[:6] + e.CompanyID[:2]
	}
	var appDSN string
	var key postgres.Key
	switch engine {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "hr.db")
		owner, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { owner.Close() })
		if err := hr.Create(ctx, owner, hr.SQLite, s.data); err != nil {
			t.Fatal(err)
		}
		s.owner, appDSN = owner, "sqlite:"+path
	case "postgres":
		root, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { root.Close() })
		dbName, role := randName("tm_hr_"), randName("tm_hr_app_")
		if _, err := root.ExecContext(ctx, "CREATE DATABASE "+dbName); err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(dsn)
		u.Path = "/" + dbName
		t.Cleanup(func() {
			if _, err := root.ExecContext(ctx, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)"); err != nil {
				t.Errorf("dropping %s: %v", dbName, err)
			}
			if _, err := root.ExecContext(ctx, "DROP ROLE IF EXISTS "+role); err != nil {
				t.Errorf("dropping role %s: %v", role, err)
			}
		})
		if key, err = postgres.NewKey("hr-test"); err != nil {
			t.Fatal(err)
		}
		if err := hr.SetupDemo(ctx, u.String(), role, key, s.data); err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.New(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		s.owner = stdlib.OpenDBFromPool(pool)
		t.Cleanup(func() { s.owner.Close(); pool.Close() })
		app := *u
		app.User = url.User(role)
		appDSN = app.String()
	case "mysql":
		native := strings.TrimPrefix(dsn, "mysql://")
		root, err := sql.Open("mysql", native)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { root.Close() })
		dbName := randName("tm_hr_")
		if _, err := root.ExecContext(ctx, "CREATE DATABASE "+dbName); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := root.ExecContext(ctx, "DROP DATABASE IF EXISTS "+dbName); err != nil {
				t.Errorf("dropping %s: %v", dbName, err)
			}
		})
		slash := strings.LastIndex(dsn, "/")
		appDSN = dsn[:slash+1] + dbName
		if err := hr.SetupDemo(ctx, appDSN, "", key, s.data); err != nil {
			t.Fatal(err)
		}
		owner, err := sql.Open("mysql", strings.TrimPrefix(appDSN, "mysql://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { owner.Close() })
		s.owner = owner
	default:
		t.Fatalf("engine %q", engine)
	}
	sctx, cancel := context.WithCancel(ctx)
	app, err := hr.New(sctx, hr.Options{Addr: "127.0.0.1:0", DB: appDSN, RLSKey: key,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AuditLogger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s.app = app
	done := make(chan error, 1)
	go func() { done <- app.Serve(sctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		app.Close()
	})
	return s
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// as connects a client whose token carries groups (/companies/acme/hr…).
func (s *served) as(t testing.TB, subject string, groups ...string) *client {
	t.Helper()
	tok, err := s.app.Issuer.Mint(devtoken.Token{Subject: subject, Groups: groups, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "hr-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             s.app.HTTP.ResourceURL,
		HTTPClient:           &http.Client{Transport: bearer{tok, http.DefaultTransport}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
	if err != nil {
		t.Fatalf("connect as %s: %v", subject, err)
	}
	t.Cleanup(func() { cs.Close() })
	return &client{name: subject, cs: cs}
}

// client is one MCP session; transcript collects every result's text, so
// a test can search everything a caller was shown.
type client struct {
	name       string
	cs         *mcp.ClientSession
	transcript strings.Builder
}

// call calls tool and returns its structured result decoded into out (when
// the call succeeded), whether it failed, and its text.
func (c *client) call(t testing.TB, tool string, args any, out any) (failed bool, text string) {
	t.Helper()
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		// Refused before the tool ran (a role-gated tool answers 403).
		return true, err.Error()
	}
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	c.transcript.WriteString(b.String() + "\n")
	raw, _ := json.Marshal(res.StructuredContent)
	c.transcript.Write(raw)
	if !res.IsError && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %s: decoding %s: %v", c.name, tool, raw, err)
		}
	}
	return res.IsError, b.String()
}

// ok calls tool and fails the test unless it succeeds.
func (c *client) ok(t testing.TB, tool string, args any, out any) {
	t.Helper()
	if failed, text := c.call(t, tool, args, out); failed {
		t.Fatalf("%s: %s(%v): %s", c.name, tool, args, text)
	}
}

// count runs a COUNT(*) query as the owner.
func (s *served) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	if s.engine == "postgres" {
		for i := 1; strings.Contains(query, "?"); i++ {
			query = strings.Replace(query, "?", "$"+string(rune('0'+i)), 1)
		}
	}
	var n int
	if err := s.owner.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
