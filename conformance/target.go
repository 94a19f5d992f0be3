package conformance

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/server"
)

// Engine names a database engine the suite can run on.
type Engine string

// Engines.
const (
	SQLite   Engine = "sqlite"
	Postgres Engine = "postgres"
	MySQL    Engine = "mysql"
)

// Target is what Run checks: a schema graph on one database engine, the
// function that seeds it, and the tenants to look through.
type Target struct {
	// Name labels the target in test names and the summary ("hotel").
	Name string

	// DSN selects the engine and the server to run on:
	//
	//	""                      embedded SQLite (a temporary file)
	//	sqlite:…                SQLite; the suite still makes its own file
	//	postgres://u@h:p/db?…   PostgreSQL; the suite creates its own database and role
	//	mysql://u@tcp(h:p)/db   MySQL/MariaDB; the suite creates its own database and user
	//
	// The account of a server DSN must be able to create and drop
	// databases and roles (users). The suite never reads or writes the
	// database the DSN names beyond connecting to it. One DSN: a list
	// (TENANTMCP_DSN's) is refused; split it with [FromEnv].
	DSN string

	// Graph is the schema graph. Run builds the Schema from it unless
	// Schema is set.
	Graph builder.SchemaDef
	// Schema, if set, is the Schema the guarded database is opened with
	// (for tools that hold references to it); it must have been built
	// from Graph, which Run checks by comparing their scope paths.
	Schema *builder.Schema

	// Seed creates the tables in the empty scratch database db (connected
	// as the owner, not through the guard) and inserts rows, returning
	// exactly the rows it inserted. The expected results of every property
	// are computed from that Dataset, in Go, never from the guard's
	// output; Run checks that the database holds what the Dataset says.
	// Seed must give at least two tenants rows in every tenant-bound table,
	// and the same rows on every call: the suite rebuilds the database
	// after a property that changed rows and keeps what it derived from
	// the first call (a rebuild with other keys fails the run).
	// Nil means SyntheticSeed(Graph, 1).
	Seed func(ctx context.Context, db *sql.DB, engine Engine) (*Dataset, error)

	// Tenants are the scopes the properties run under. Nil derives them
	// from the Dataset: up to four ids of the root level, two sibling ids
	// of every lower level, and one scope that unites grants of two
	// different tenants (a root id and another root's lower id; on a
	// one-level schema two root ids, when the data has a third).
	Tenants []Tenant

	// Mutable names, per table, a column that the write properties may
	// assign (a column that is not a key, foreign key or level column and
	// that is not UNIQUE). Tables not listed get one chosen from the data.
	Mutable map[string]string

	// Tools, if set, is a tool server to check (properties 19 and 20).
	Tools *Tools

	// Shared acknowledges, per table, that rows the live catalog attributes
	// to tenants may be read by every tenant, with the reason (reference
	// data such as countries or a film catalogue, which tenant rows point
	// at). Property 58 attributes every row from the catalog alone —
	// level columns and every enforced foreign key, in both directions —
	// and fails on any row a guarded query returns that belongs to
	// another tenant, in every table not acknowledged here, whatever the
	// graph declares: a tenant table declared global fails the run,
	// GlobalReason or not. A shared table's rows give no tenant to the
	// rows that reference them (nor to those they reference): an address
	// that points at an acknowledged state is owned by the rows that point
	// at the address, not by the state's tenant. The acknowledgement is the
	// run's, not the schema's, and the summary prints each one with its
	// reason.
	Shared map[string]string

	// Unchecked acknowledges, per foreign key declared
	// builder.ForeignKey.Unchecked ("rental.staff_id", the table and one of
	// the key's columns), that a tenant's row may reference another
	// tenant's row there, with the reason. Property 9 writes such a
	// reference through every Unchecked key into a tenant-bound table (in
	// a transaction it rolls back) and fails the run on each key not
	// acknowledged here: the guard accepts another tenant's key where a
	// missing one fails, which also reveals which keys other tenants hold.
	// Like Shared, the acknowledgement is the run's, not the schema's, and
	// the summary prints each key with both reasons.
	Unchecked map[string]string

	// LevelColumns names the catalog columns that carry a level id
	// ("stores.store_id": "store"), for the catalog oracle of property 58.
	// Nil derives them: every level column the graph declares, plus every
	// column of the database, in any table, named like a declared level
	// column that is not the whole primary key of its own table (so a
	// store_id column carries "store" wherever it is, declared or not),
	// plus the primary key of each table such a column is named like a
	// reference to (tenant_record_id makes tenants.record_id carry
	// "tenant", with no foreign key to say so, whatever the graph declares
	// tenants to be). Foreign keys carry levels on from those columns regardless of the
	// graph. Name them here when a level column of some table has a name
	// no declared table uses and no foreign key into an owned row.
	LevelColumns map[string]string

	// Repetitions runs the property table this many times, each time in a
	// new random order. Zero means 1.
	Repetitions int
	// OrderSeed seeds the random order; zero picks one from the clock. The
	// seed is logged and printed in the summary so that an order can be
	// replayed.
	OrderSeed uint64
}

// Tenant is a scope the properties run under.
type Tenant struct {
	// Name labels the tenant in messages ("chain acme").
	Name   string
	Grants []scope.Grant
	Roles  []string
}

// Tools describes a tool server for properties 19 (tool inputs are
// tenant-free) and 20 (PII canaries never reach tool output). The suite
// builds a real server.Server on the guarded database, registers the tools
// with Register, serves it on a loopback port and calls it with real
// signed tokens from a development issuer it runs for the purpose.
type Tools struct {
	// Register adds the tools to a server, as the application does.
	Register func(*server.Server) error
	// Levels and ScopeKeys are passed to server.Options.
	Levels    []string
	ScopeKeys []string
	// Redaction is the application's redaction policy.
	Redaction redact.Options
	// Calls returns the tool calls to make as tenant tn with role. The
	// calls should read as much of the tenant's data as the tools allow,
	// and should also aim at other tenants' rows (ids, e-mails) on purpose.
	Calls func(d *Dataset, tn Tenant) []ToolCall
	// Canaries returns the PII values planted in the data, each with the
	// rows it belongs to. A canary must appear in the data of one tenant
	// only and be specific enough never to occur by accident.
	Canaries func(d *Dataset) []Canary
	// Callers are the role sets to call with; each is combined with every
	// tenant. For every canary of a category a role set may not see, and
	// for every canary of another tenant, the output must not contain it.
	// At least one call must show a canary the caller may see (a control
	// that the calls returned data at all).
	Callers [][]string
}

// ToolCall is one call of a tool with JSON arguments.
type ToolCall struct {
	Tool string
	Args map[string]any
}

// Canary is a planted PII value and where it lives.
type Canary struct {
	Value    string
	Category redact.Category
	// Table and Key identify the row holding it (Key as Dataset.Key
	// renders it), so the suite knows which tenants may see it.
	Table string
	Key   string
	// Column, if set, names the column holding it, for messages: a
	// canary shown to a caller who may not see it names the column whose
	// PII tag is missing.
	Column string
}

// Row is one row: column name to value. Values are nil, bool, integers,
// floats, strings, []byte or time.Time. A DATE, DATETIME or TIMESTAMP
// column's value is a time.Time on every engine (the suite's own
// connection reads them so, MySQL/MariaDB included): a date at midnight
// UTC.
type Row map[string]any

// Dataset is the data a Seed function inserted, table by table.
type Dataset struct {
	Tables map[string][]Row
}

// Add appends a row to table.
func (d *Dataset) Add(table string, r Row) {
	if d.Tables == nil {
		d.Tables = map[string][]Row{}
	}
	d.Tables[table] = append(d.Tables[table], r)
}

// Key renders the values of cols of r as the suite identifies rows: the
// canonical text of each value, joined by a unit separator.
func Key(r Row, cols []string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = canon(r[c])
	}
	return strings.Join(parts, "\x1f")
}

// canon is the canonical text of a value as drivers and Go seed data
// present it: integers in decimal, []byte as text, times in RFC 3339 UTC.
// Two values the database compares equal by key have equal canon text.
func canon(v any) string {
	switch x := v.(type) {
	case nil:
		return "\x00NULL"
	case string:
		return canonText(x)
	case []byte:
		return canonText(string(x))
	case map[string]any, []any: // a json or jsonb value as pgx scans it
		return canonJSON(x)
	case int:
		return strconv.FormatInt(int64(x), 10)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint:
		return strconv.FormatUint(uint64(x), 10)
	case uint8:
		return strconv.FormatUint(uint64(x), 10)
	case uint16:
		return strconv.FormatUint(uint64(x), 10)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float32:
		return canonFloat(float64(x))
	case float64:
		return canonFloat(x)
	case bool:
		if x {
			return "1"
		}
		return "0"
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case [16]byte: // a UUID as pgx scans it natively
		return fmt.Sprintf("%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:16])
	case driver.Valuer:
		if dv, err := x.Value(); err == nil {
			if _, again := dv.(driver.Valuer); !again {
				return canon(dv)
			}
		}
	}
	return fmt.Sprint(v)
}

// canonText is the canonical text of a text value: a JSON object or
// array in compact form with sorted keys (PostgreSQL's jsonb reorders and
// respaces what was written, pgx scans it as a map, MySQL returns it
// respaced), a decimal zero as canonZero's, anything else as it is.
func canonText(s string) string {
	if t := strings.TrimSpace(s); len(t) > 1 && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		var v any
		if err := json.Unmarshal([]byte(t), &v); err == nil {
			return canonJSON(v)
		}
	}
	return canonZero(s)
}

// canonJSON is the compact JSON text of a decoded JSON value, keys sorted.
func canonJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// canonZero returns "0" for a decimal zero written with a scale ("0.00",
// "-0.0"), which pgx scans from PostgreSQL as a numeric zero without one,
// and s otherwise.
func canonZero(s string) string {
	if s == "" || s == "0" {
		return s
	}
	t := strings.TrimLeft(s, "+-")
	digits := 0
	for i, c := range t {
		switch {
		case c == '0':
			digits++
		case c == '.' && !strings.Contains(t[i+1:], "."):
		default:
			return s
		}
	}
	if digits == 0 {
		return s
	}
	return "0"
}

func canonFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
