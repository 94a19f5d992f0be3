// Package devserver is what the example servers (examples/hotel and
// examples/hr) share around their tools: the verifier (a real identity
// provider's, or a [devtoken] issuer on loopback), the listener, the
// embedded SQLite demo database, the demo-database migration, the common
// flags and the start-up lines. Every line it writes is a log/slog record;
// demo tokens go to a file, never into the log.
package devserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	_ "github.com/tenantmcp/tenantmcp/guardedsql/sqlite" // the examples run on any engine, chosen by the DSN
	"github.com/tenantmcp/tenantmcp/server"
)

// DemoUser is a user the development issuer mints tokens for.
type DemoUser struct {
	Subject, Description string
	Groups, Roles        []string
}

// Auth says how tokens are verified: with JWKSURL empty a development
// issuer runs on loopback (never outside a laptop); otherwise the
// identity provider at JWKSURL, whose Issuer is required.
type Auth struct {
	JWKSURL, Issuer, Audience string
	Mapping                   claims.Mapping
	// Refresh and UnknownKIDInterval are claims.Options' RefreshInterval
	// and UnknownKIDInterval (zero: the defaults).
	Refresh, UnknownKIDInterval time.Duration
	Logger                      *slog.Logger
}

// Base is the part of an example's App this package builds; the example
// embeds it and sets Server.
type Base struct {
	Server   *server.Server
	Verifier *claims.Verifier
	// Issuer is the development issuer, nil with a real identity provider.
	Issuer   *devtoken.Issuer
	Listener net.Listener
	HTTP     server.HTTPOptions

	closers []func() error
}

// OnClose runs f at Close, before what was registered earlier.
func (b *Base) OnClose(f func() error) { b.closers = append(b.closers, f) }

// Close releases everything acquired, in reverse order.
func (b *Base) Close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		_ = b.closers[i]()
	}
	b.closers = nil
}

// CloseOnError, deferred by an example's New, closes b if *err is set
// when New returns.
func (b *Base) CloseOnError(err *error) {
	if *err != nil {
		b.Close()
	}
}

// Listen opens addr unless noListen (stdio: no port is bound, so any
// number of instances run side by side), and returns the address URLs
// should name.
func (b *Base) Listen(addr string, noListen bool) (string, error) {
	if noListen {
		return addr, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	b.Listener = ln
	b.OnClose(func() error { ln.Close(); return nil })
	return ln.Addr().String(), nil
}

// Verify builds the verifier for the MCP endpoint public (the audience
// unless a.Audience says otherwise), waits until it has its keys, and
// fills HTTP's ResourceURL and AuthorizationServers.
func (b *Base) Verify(ctx context.Context, public string, a Auth) error {
	audience := a.Audience
	if audience == "" {
		audience = public
	}
	var opts claims.Options
	if a.JWKSURL == "" {
		is, err := devtoken.Start(devtoken.Options{Audience: audience, Logger: a.Logger})
		if err != nil {
			return err
		}
		b.Issuer = is
		b.OnClose(is.Close)
		opts = is.ClaimsOptions(a.Mapping)
		// The keys inline: a sandboxed server may not connect to the
		// issuer's ephemeral port.
		opts.JWKSURL, opts.JWKS = "", is.JWKS()
	} else {
		if a.Issuer == "" {
			return errors.New("-issuer is required with -jwks-url")
		}
		opts = claims.Options{Issuer: a.Issuer, Audience: []string{audience}, JWKSURL: a.JWKSURL, Mapping: a.Mapping}
	}
	opts.Logger, opts.RefreshInterval, opts.UnknownKIDInterval = a.Logger, a.Refresh, a.UnknownKIDInterval
	v, err := claims.New(opts)
	if err != nil {
		return err
	}
	b.Verifier = v
	b.OnClose(v.Close)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := v.WaitReady(waitCtx); err != nil {
		return err
	}
	b.HTTP.ResourceURL, b.HTTP.AuthorizationServers = public, []string{opts.Issuer}
	return nil
}

// EmbeddedSQLite creates a fresh SQLite file name in a new temporary
// directory (removed at Close), fills it with create, and returns its
// guardedsql DSN.
func (b *Base) EmbeddedSQLite(ctx context.Context, name string, create func(context.Context, *sql.DB) error) (string, error) {
	dir, err := os.MkdirTemp("", "tenantmcp-"+name+"-")
	if err != nil {
		return "", err
	}
	b.OnClose(func() error { return os.RemoveAll(dir) })
	path := filepath.Join(dir, name+".db")
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		return "", err
	}
	defer raw.Close()
	if err := create(ctx, raw); err != nil {
		return "", err
	}
	return "sqlite:" + path, nil
}

// OpenDB opens dsn (with dsn "", the EmbeddedSQLite database name filled
// by create) guarded by schema, closing it at Close; on PostgreSQL key
// signs the scope. It returns the database and the DSN opened.
func (b *Base) OpenDB(ctx context.Context, name, dsn string, schema *builder.Schema, key postgres.Key, opts guardedsql.Options, create func(context.Context, *sql.DB) error) (*guardedsql.DB, string, error) {
	if dsn == "" {
		var err error
		if dsn, err = b.EmbeddedSQLite(ctx, name, create); err != nil {
			return nil, "", err
		}
	}
	if strings.HasPrefix(dsn, "postgres") { // the scope-signing key is PostgreSQL's
		opts.Engine = postgres.Options{Key: key}
	}
	db, err := guardedsql.Open(ctx, dsn, schema, opts)
	if err != nil {
		return nil, "", fmt.Errorf("%s: opening %s: %w", name, guardedsql.RedactDSN(dsn), err)
	}
	b.OnClose(db.Close)
	return db, dsn, nil
}

// Serve serves HTTP on the listener until ctx is done.
func (b *Base) Serve(ctx context.Context) error {
	if b.Listener == nil {
		return errors.New("built with NoListen: serve stdio instead")
	}
	return b.Server.Serve(ctx, b.Listener, b.HTTP)
}

// Token mints a development token for u (only with the dev issuer).
func (b *Base) Token(u DemoUser, ttl time.Duration) (string, error) {
	if b.Issuer == nil {
		return "", errors.New("no development issuer: tokens come from your identity provider")
	}
	return b.Issuer.Mint(devtoken.Token{Subject: u.Subject, Groups: u.Groups, Roles: u.Roles, TTL: ttl})
}

// TokenOf mints a token for the demo user named name.
func (b *Base) TokenOf(users []DemoUser, name string, ttl time.Duration) (string, error) {
	for _, u := range users {
		if u.Subject == name {
			return b.Token(u, ttl)
		}
	}
	return "", fmt.Errorf("no demo user %q", name)
}

// TextScanner scans a DATE or timestamp column into *Dst: NULL as "", a
// time.Time as Layout in UTC, text (string or bytes) as Text(text, Layout)
// gives it. Pkg and What name the value in the error for any other type.
type TextScanner struct {
	Dst       *string
	Layout    string
	Text      func(v, layout string) string
	Pkg, What string
}

// Scan implements sql.Scanner (which pgx honours too).
func (s *TextScanner) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*s.Dst = ""
	case time.Time:
		*s.Dst = v.UTC().Format(s.Layout)
	case string:
		*s.Dst = s.Text(v, s.Layout)
	case []byte:
		*s.Dst = s.Text(string(v), s.Layout)
	default:
		return fmt.Errorf("%s: cannot scan %T as a %s", s.Pkg, src, s.What)
	}
	return nil
}
