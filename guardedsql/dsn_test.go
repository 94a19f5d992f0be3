package guardedsql_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// TestRedactDSN covers every DSN form the library accepts: the password
// never survives, the rest (user, host, database) does.
func TestRedactDSN(t *testing.T) {
	for _, c := range []struct {
		name, dsn, secret string
		keep              []string
	}{
		{"postgres URL userinfo", "postgres://app:S3cretPW@db.example:5432/hotel?sslmode=disable", "S3cretPW", []string{"app", "db.example:5432", "/hotel", "sslmode=disable"}},
		{"postgresql URL userinfo percent-encoded", "postgresql://app:S3cr%40t%2FPW@db.example/hotel", "S3cr%40t%2FPW", []string{"app", "db.example", "/hotel"}},
		{"postgres password query", "postgres://app@127.0.0.1:5432/hotel?sslmode=disable&password=S3cretPW", "S3cretPW", []string{"app@127.0.0.1:5432", "sslmode=disable"}},
		{"postgres sslpassword query", "postgres://app@h/hotel?sslpassword=S3cretPW&sslmode=verify-full", "S3cretPW", []string{"sslmode=verify-full"}},
		{"keyword/value", "host=127.0.0.1 port=5432 user=app password=S3cretPW dbname=hotel", "S3cretPW", []string{"host=127.0.0.1", "user=app", "dbname=hotel"}},
		{"keyword/value quoted", "host=h user=app password='S3cret PW' dbname=hotel", "S3cret PW", []string{"user=app", "dbname=hotel"}},
		{"keyword/value spaced", "host=h password = S3cretPW dbname=hotel", "S3cretPW", []string{"dbname=hotel"}},
		{"mysql driver DSN", "mysql://root:S3cretPW@tcp(127.0.0.1:3306)/hotel?parseTime=true", "S3cretPW", []string{"root", "tcp(127.0.0.1:3306)", "/hotel", "parseTime=true"}},
		{"mysql driver DSN with @ in password", "mysql://root:S3c@retPW@tcp(127.0.0.1:1)/x", "S3c@retPW", []string{"root", "tcp(127.0.0.1:1)"}},
		{"mysql unix socket", "mysql://root:S3cretPW@unix(/run/mysqld/mysqld.sock)/hotel", "S3cretPW", []string{"unix(/run/mysqld/mysqld.sock)"}},
		{"mysql URL form", "mysql://root:S3cretPW@127.0.0.1:3306/hotel", "S3cretPW", []string{"root", "127.0.0.1:3306"}},
		{"mysql schemeless driver DSN", "root:S3cretPW@tcp(127.0.0.1:3306)/hotel?parseTime=true", "S3cretPW", []string{"root:", "@tcp(127.0.0.1:3306)/hotel?parseTime=true"}},
		{"mysql schemeless, @ and / in password", "app:S3c@r/etPW@tcp(db:3306)/hotel", "S3c@r/etPW", []string{"app:", "@tcp(db:3306)/hotel"}},
		{"mysql schemeless unix socket", "app:S3cretPW@unix(/run/mysqld/mysqld.sock)/hotel", "S3cretPW", []string{"unix(/run/mysqld/mysqld.sock)/hotel"}},
		{"postgres multi-host URL", "postgres://app:S3cretPW@db1:5432,db2:5432/hotel?target_session_attrs=read-write", "S3cretPW", []string{"app:", "db1:5432,db2:5432/hotel", "target_session_attrs=read-write"}},
		{"keyword/value escaped quote", `host=h password='S3cret\'s PW' dbname=hotel`, "S3cret", []string{"host=h", "dbname=hotel"}},
		{"keyword/value sslpassword", "host=h sslpassword=S3cretPW sslmode=verify-full", "S3cretPW", []string{"host=h", "sslmode=verify-full"}},
		{"no password", "postgres://app@h/hotel", "", []string{"postgres://app@h/hotel"}},
		{"sqlite", "sqlite:/tmp/x.db?_pragma=foreign_keys(1)", "", []string{"sqlite:/tmp/x.db?_pragma=foreign_keys(1)"}},
		{"sqlite key pragma", "file:/tmp/x.db?_pragma=foreign_keys(1)&_pragma=key('S3cretPW')&mode=rwc", "S3cretPW", []string{"file:/tmp/x.db?", "_pragma=foreign_keys(1)", "mode=rwc"}},
		{"sqlite auth password", "sqlite:/tmp/x.db?_auth_user=app&_auth_pass=S3cretPW", "S3cretPW", []string{"sqlite:/tmp/x.db?", "_auth_pass="}},
		{"sqlite unknown parameter", "sqlite:///tmp/x.db?_pragma=Sup3rS3cretPW&cache=shared", "Sup3rS3cretPW", []string{"cache=shared"}},
		{"sqlite encoded key pragma", "file:x.db?_pragma=hexkey%28%27S3cretPW%27%29", "S3cretPW", []string{"file:x.db?_pragma="}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := guardedsql.RedactDSN(c.dsn)
			if c.secret == "" {
				if got != c.dsn {
					t.Fatalf("RedactDSN(%q) = %q, want it unchanged", c.dsn, got)
				}
				return
			}
			for _, s := range []string{c.secret, "S3cret", "retPW"} {
				if strings.Contains(got, s) {
					t.Errorf("RedactDSN(%q) = %q still holds %q", c.dsn, got, s)
				}
			}
			if !strings.Contains(got, "xxxxx") {
				t.Errorf("RedactDSN(%q) = %q marks no redaction", c.dsn, got)
			}
			for _, k := range c.keep {
				if !strings.Contains(got, k) {
					t.Errorf("RedactDSN(%q) = %q lost %q", c.dsn, got, k)
				}
			}
		})
	}
}

// TestRedactDSNNeverEchoesUnparseable: a DSN that no parser accepts is
// replaced whole, so neither its password nor any fragment of it shows.
func TestRedactDSNNeverEchoesUnparseable(t *testing.T) {
	for _, dsn := range []string{
		"postgres://app:S3cretPW@[::1/hotel",
		"S3cretPW",
		"root:S3cretPW@tcp(127.0.0.1:3306",
		"host=h password='S3cretPW",
		"app:S3cretPW@bogusnet/hotel",
	} {
		if got := guardedsql.RedactDSN(dsn); got != guardedsql.UnparseableDSN {
			t.Errorf("RedactDSN(unparseable %q) = %q, want %q", dsn, got, guardedsql.UnparseableDSN)
		}
	}
}

// TestRedactDSNError: an error quoting a schemeless go-sql-driver DSN, or a
// DSN that does not parse, carries neither the password nor the DSN.
func TestRedactDSNErrorEveryForm(t *testing.T) {
	for _, dsn := range []string{
		"root:S3cretPW@tcp(127.0.0.1:3306)/hotel",
		"host=h password='S3cretPW' dbname=x",
		"postgres://app:S3cretPW@[::1/hotel",
		"root:S3cretPW@tcp(127.0.0.1:3306",
	} {
		err := guardedsql.RedactDSNError(errors.New("opening "+dsn+": refused (password S3cretPW)"), dsn)
		if strings.Contains(err.Error(), "S3cretPW") {
			t.Errorf("RedactDSNError kept the password: %v", err)
		}
	}
}

// TestSchemelessMySQLOpenError: opening go-sql-driver's schemeless DSN (an
// engine no scheme names) fails without echoing the password, in the
// error and in the DSN the caller prints with RedactDSN.
func TestSchemelessMySQLOpenError(t *testing.T) {
	dsn := "root:S3cretPW@tcp(127.0.0.1:1)/hotel"
	_, err := guardedsql.Open(context.Background(), dsn, builder.MustSchema(hotelDef), guardedsql.Options{})
	if err == nil || strings.Contains(err.Error(), "S3cretPW") {
		t.Fatalf("Open(schemeless mysql DSN) = %v", err)
	}
	if got := guardedsql.RedactDSN(dsn); strings.Contains(got, "S3cretPW") || got != "root:xxxxx@tcp(127.0.0.1:1)/hotel" {
		t.Fatalf("RedactDSN(%q) = %q", dsn, got)
	}
}

// TestOpenErrorsHidePassword opens DSNs that fail (nothing listens on port
// 1, or the DSN does not parse) and checks that no error text carries the
// password, in every form Open and Introspect accept.
func TestOpenErrorsHidePassword(t *testing.T) {
	sch := builder.MustSchema(builder.SchemaDef{Tables: []builder.TableDef{{Name: "t", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Global: true}}})
	for _, dsn := range []string{
		"mysql://root:S3cretPW@tcp(127.0.0.1:1)/x",
		"mysql://root:S3cretPW@127.0.0.1:1/x",
		"mysql://root:S3cretPW@tcp(127.0.0.1:1)/x?badparam=%zz",
		"postgres://app:S3cretPW@127.0.0.1:1/x?sslmode=disable&connect_timeout=2",
		"postgres://app@127.0.0.1:1/x?sslmode=disable&connect_timeout=2&password=S3cretPW",
		"postgres://app@127.0.0.1:1/x?sslmode=bogus&password=S3cretPW",
		"postgres://app:S3cretPW@127.0.0.1:1/x?sslmode=bogus",
		"host=127.0.0.1 port=1 password=S3cretPW dbname=x",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := guardedsql.Open(ctx, dsn, sch, guardedsql.Options{})
		_, ierr := guardedsql.Introspect(ctx, dsn, builder.Tenancy{})
		cancel()
		for _, e := range []error{err, ierr} {
			if e == nil {
				t.Errorf("%s: no error", guardedsql.RedactDSN(dsn))
				continue
			}
			if strings.Contains(e.Error(), "S3cretPW") {
				t.Errorf("error carries the password: %v", e)
			}
		}
	}
	// The wrapper keeps what the error matched.
	err := guardedsql.RedactDSNError(context.Canceled, "postgres://a:S3cretPW@h/x")
	if !errors.Is(err, context.Canceled) {
		t.Fatal("RedactDSNError lost errors.Is")
	}
}

// TestRegisterPanics: Register refuses a nil engine and a scheme already
// taken (here by guardedsql/sqlite), as sql.Register does.
func TestRegisterPanics(t *testing.T) {
	for name, fn := range map[string]func(){
		"nil engine": func() { guardedsql.Register("tenantmcp-test-nil", nil) },
		"duplicate":  func() { guardedsql.Register("sqlite", dupEngine{}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register with a %s did not panic", name)
				}
			}()
			fn()
		}()
	}
}

// dupEngine is an engine for TestRegisterPanics; it is never used.
type dupEngine struct{ guardedsql.Engine }

// TestUnknownScheme: a DSN of no registered engine is refused with
// ErrNoEngine (which matches ErrInvalid), naming the scheme.
func TestUnknownScheme(t *testing.T) {
	_, err := guardedsql.Open(context.Background(), "oracle://u:secret@h/db", builder.MustSchema(hotelDef), guardedsql.Options{})
	if !errors.Is(err, guardedsql.ErrNoEngine) || !errors.Is(err, guardedsql.ErrInvalid) || !strings.Contains(err.Error(), `"oracle"`) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Open(oracle://...) = %v, want ErrNoEngine naming the scheme", err)
	}
}

// TestDSNScheme: the scheme of a DSN for error messages, never a string
// that could be the secret itself.
func TestDSNScheme(t *testing.T) {
	for dsn, want := range map[string]string{
		"oracle://u:S3cretPW@h/db":  "oracle",
		"postgres://h/db":           "postgres",
		"S3cretPW":                  "",
		"p@ss:word@tcp(h)/db":       "",
		"root:S3cretPW@tcp(h:1)/db": "root",
	} {
		if got := guardedsql.DSNScheme(dsn); got != want {
			t.Errorf("DSNScheme(%q) = %q, want %q", dsn, got, want)
		}
	}
}
