package devserver

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

// Flags are the flags every example server has. Register names them.
type Flags struct {
	Addr, DB                  string
	JWKSURL, Issuer, Audience string
	RLSKeyFile, SetupDemo     string
	JSONLogs                  bool
}

// Register defines the flags on fs, each defaulting to the environment
// variable ENV_<NAME> (env "HOTEL": HOTEL_ADDR, HOTEL_DB, …); what names the
// example's tables in the help text.
func (f *Flags) Register(fs *flag.FlagSet, env, addr, what string) {
	get := func(name, def string) string {
		if v := os.Getenv(env + "_" + name); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&f.Addr, "addr", get("ADDR", addr), "listen address for streamable HTTP")
	fs.StringVar(&f.DB, "db", get("DB", ""), "database DSN: sqlite:PATH, postgres://…, mysql://… (default: fresh embedded SQLite with demo data)")
	fs.StringVar(&f.JWKSURL, "jwks-url", get("JWKS_URL", ""), "identity provider JWKS URL (default: development issuer on loopback)")
	fs.StringVar(&f.Issuer, "issuer", get("ISSUER", ""), "expected token issuer (with -jwks-url)")
	fs.StringVar(&f.Audience, "audience", get("AUDIENCE", ""), "expected token audience (default: the endpoint URL)")
	fs.StringVar(&f.RLSKeyFile, "rls-key-file", get("RLS_KEY_FILE", ""), "PostgreSQL: file holding the scope-signing key as <id>:<hex secret>; with -setup-demo and no file, an ephemeral key is generated for this run")
	fs.StringVar(&f.SetupDemo, "setup-demo", "", "before serving, (re)create the "+what+" tables and demo data in this database as its administrator (postgres:// or mysql:// DSN; on PostgreSQL also install row-level security and grant -db's user); DESTROYS the "+what+" tables there")
	fs.BoolVar(&f.JSONLogs, "json-logs", false, "write logs (and the audit log) as JSON")
}

// Logger is the server's logger on w, as -json-logs says.
func (f *Flags) Logger(w io.Writer) *slog.Logger {
	if f.JSONLogs {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// Key reads the scope-signing key of -rls-key-file (the zero key without
// one).
func (f *Flags) Key() (postgres.Key, error) {
	if f.RLSKeyFile == "" {
		return postgres.Key{}, nil
	}
	text, err := os.ReadFile(f.RLSKeyFile)
	if err != nil {
		return postgres.Key{}, err
	}
	k, err := postgres.ParseKey(strings.TrimSpace(string(text)))
	if err != nil {
		return postgres.Key{}, fmt.Errorf("-rls-key-file: %w", err)
	}
	return k, nil
}

// Setup runs d (with -setup-demo's DSN, -db's user and *key) when
// -setup-demo is given; with no key it first makes one named keyID for
// this run only (a restart without -setup-demo needs -rls-key-file).
func (f *Flags) Setup(ctx context.Context, key *postgres.Key, keyID string, d Demo) error {
	if f.SetupDemo == "" {
		return nil
	}
	if f.DB == "" {
		return fmt.Errorf("-setup-demo needs -db: the application's own connection")
	}
	if key.ID == "" {
		k, err := postgres.NewKey(keyID)
		if err != nil {
			return err
		}
		*key = k
	}
	d.AdminDSN, d.AppRole, d.Key = f.SetupDemo, UserOf(f.DB), *key
	if err := SetupDemo(ctx, d); err != nil {
		return fmt.Errorf("setting up the demo database: %w", err)
	}
	return nil
}

// TokenTTL is the lifetime of the demo tokens Announce writes.
const TokenTTL = 12 * time.Hour

// Announce logs that b serves its endpoint and, with the development
// issuer, writes a token for each user to a shell file (mode 0600, removed
// at Close) followed by hint as comments, and logs the file's path: the
// tokens never enter the log.
func (b *Base) Announce(log *slog.Logger, name string, users []DemoUser, hint string) error {
	log.Info("serving MCP over streamable HTTP (bearer token required)", "endpoint", b.HTTP.ResourceURL)
	if b.Issuer == nil {
		return nil
	}
	f, err := os.CreateTemp("", "tenantmcp-"+name+"-tokens-*.sh")
	if err != nil {
		return err
	}
	path := f.Name()
	b.OnClose(func() error { return os.Remove(path) })
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Development tokens for the tenantmcp %s server at %s, valid %s.\n# Load them into your shell with: . %s\n", name, b.HTTP.ResourceURL, TokenTTL, path)
	var names []string
	for _, u := range users {
		tok, err := b.Token(u, TokenTTL)
		if err != nil {
			f.Close()
			return err
		}
		fmt.Fprintf(&sb, "# %s: %s\nexport TOKEN_%s=%s\n", u.Subject, u.Description, u.Subject, tok)
		names = append(names, u.Subject)
	}
	for _, l := range strings.Split(strings.TrimRight(hint, "\n"), "\n") {
		if hint != "" {
			sb.WriteString(strings.TrimRight("# "+l, " ") + "\n")
		}
	}
	if _, err := f.WriteString(sb.String()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	msg := "demo tokens written: load them with . FILE (sets TOKEN_<user>)"
	if hint != "" {
		msg += ", then try the commands at its end"
	}
	log.Info(msg, "file", path, "users", strings.Join(names, ","), "ttl", TokenTTL)
	return nil
}
