package guardedsql

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/sqlite"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// fakePg, fakeMy and fakeLite stand for the drivers' errors; their text
// carries a value of another tenant, which must never come out.
type fakePg struct{ code string }

func (e fakePg) Error() string { return "ERROR: deadlock on 'other-tenant@example.com'" }

type fakeMy struct{ n uint16 }

func (e fakeMy) Error() string { return "Error: lock wait on 'other-tenant@example.com'" }

type fakeLite struct{ code int }

func (e fakeLite) Error() string { return "database is locked near 'other-tenant@example.com'" }
func (e fakeLite) Code() int     { return e.code }

// TestRetryableClassified: per engine, the errors the engine says may
// succeed on retry match ErrRetryable, the others do not; a retryable
// error that is not a timeout carries only the sentinel and the code, and
// a lock timeout stays IsTimeout as well.
func TestRetryableClassified(t *testing.T) {
	prevPg, prevMy := postgres.AsPgError, mysql.AsServerError
	t.Cleanup(func() { postgres.AsPgError, mysql.AsServerError = prevPg, prevMy })
	postgres.AsPgError = func(err error) (*postgres.PgError, bool) {
		var f fakePg
		if !errors.As(err, &f) {
			return nil, false
		}
		return &postgres.PgError{Code: f.code, Severity: "ERROR", Message: f.Error(), Detail: "Process 1 waits for 'other-tenant@example.com'"}, true
	}
	mysql.AsServerError = func(err error) (mysql.ServerError, bool) {
		var f fakeMy
		if !errors.As(err, &f) {
			return mysql.ServerError{}, false
		}
		return mysql.ServerError{Number: f.n, Message: f.Error(), Text: f.Error()}, true
	}
	g, _ := sqlast.SchemaOf(builder.MustSchema(builder.SchemaDef{
		Levels: []builder.Level{{Name: "org", Key: builder.TextKey}},
		Tables: []builder.TableDef{{Name: "notes", Columns: []string{"id", "org_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"org_id": "org"}}},
	}))
	for _, c := range []struct {
		name      string
		c         engine.ErrorClassifier
		err       error
		retryable bool
	}{
		{"pg serialization", postgres.Dialect{}, fakePg{"40001"}, true},
		{"pg deadlock", postgres.Dialect{}, fakePg{"40P01"}, true},
		{"pg unique", postgres.Dialect{}, fakePg{"23505"}, false},
		{"pg data", postgres.Dialect{}, fakePg{"22P02"}, false},
		{"mysql deadlock", mysql.Dialect{}, fakeMy{1213}, true},
		{"mysql autoinc deadlock", mysql.Dialect{}, fakeMy{1467}, true},
		{"mariadb snapshot", mysql.Dialect{}, fakeMy{1020}, true},
		{"mysql duplicate", mysql.Dialect{}, fakeMy{1062}, false},
		{"sqlite locked", sqlite.Dialect{}, fakeLite{6}, true},
		{"sqlite unique", sqlite.Dialect{}, fakeLite{2067}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := (&engineErrors{c: c.c, g: g}).translate(context.Background(), c.err, "UPDATE notes SET id = 1")
			if IsRetryable(out) != c.retryable {
				t.Fatalf("IsRetryable(%v) = %v, want %v", out, IsRetryable(out), c.retryable)
			}
			if strings.Contains(out.Error(), "other-tenant") {
				t.Errorf("engine text came out: %q", out.Error())
			}
			if c.retryable && !strings.HasPrefix(out.Error(), ErrRetryable.Error()+" (code ") {
				t.Errorf("text %q: want the sentinel and the code", out.Error())
			}
		})
	}
	// Lock timeouts: retryable, and still IsTimeout (the driver's error
	// as it was, which carries no row data: here SQLite's busy timeout).
	for _, code := range []int{5, 517} { // SQLITE_BUSY, SQLITE_BUSY_SNAPSHOT
		out := (&engineErrors{c: sqlite.Dialect{}, g: g}).translate(context.Background(), fakeLite{code}, "UPDATE notes SET id = 1")
		if !IsRetryable(out) || !IsTimeout(out) {
			t.Errorf("SQLite %d: IsRetryable %v, IsTimeout %v; want both", code, IsRetryable(out), IsTimeout(out))
		}
	}
}

// TestBackoffBounds: each wait lies between half and one and a half times
// base·2ⁿ, capped at MaxRetryBackoff, and never overflows.
func TestBackoffBounds(t *testing.T) {
	base := 10 * time.Millisecond
	for n := range 80 {
		want := base << min(n, 20)
		if want > MaxRetryBackoff || want <= 0 {
			want = MaxRetryBackoff
		}
		for range 50 {
			d := backoff(base, n)
			if d < want/2 || d >= want*3/2 {
				t.Fatalf("retry %d: waited %s, want in [%s, %s)", n, d, want/2, want*3/2)
			}
		}
	}
	if d := backoff(5*time.Second, 3); d < 5*time.Second/2 || d >= 15*time.Second/2 {
		t.Errorf("a base above the cap is kept: %s", d)
	}
}
