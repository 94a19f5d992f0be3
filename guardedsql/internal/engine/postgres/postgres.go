// Package postgres is the PostgreSQL dialect of guardedsql, for
// github.com/jackc/pgx/v5 (pgxpool), with row-level security as a second,
// independent boundary.
//
// # Two boundaries
//
// Every guarded statement runs in a transaction whose first statement is
//
//	SELECT "<namespace>_scope_set"($1)
//
// with the typed scope document ({"chain":["acme"],"hotel":[12]}, see
// engine.EncodeScope) signed for the backend's next exchange counter
// (signed.go), sent in the same pipelined batch as the statement: one
// round trip. The function verifies it, consumes the counter, and sets
//
//	set_config('<namespace>.scope', <the document signed for this transaction>, true)
//
// (where the pgx driver cannot batch, the transaction's nonce is read
// first and the setting signed by the client, in two round trips). The
// third argument makes the setting transaction-local: it ends with the
// transaction, so a pooled connection never carries one request's scope
// into the next, and after commit current_setting returns the empty
// string on that connection (not NULL). The policies read the document
// only through the verifying function "<namespace>_scope_doc()", so a
// setting the application role writes itself admits nothing.
//
// RLSDDL generates, from the schema graph, ENABLE and FORCE ROW LEVEL
// SECURITY for every tenant-bound table and one permissive policy per table
// whose USING and WITH CHECK expressions follow the table's foreign-key path
// to the columns carrying the scope levels, reading the scope from that
// setting. Check reads back what is installed (pg_roles, pg_class,
// pg_policy) and refuses to run on a connection for which the policies are
// not in force. The guard's own predicates are added as well (defence in
// depth) unless the dialect is configured RLS-only; they do not read the
// setting but bind the granted ids as typed array parameters, so the two
// boundaries share no mechanism.
//
// # Policy shape
//
// The context is read once per statement: each level's id set is an
// uncorrelated ARRAY(...) sublink, which PostgreSQL runs once as an
// InitPlan, and the verifying function returns NULL for a missing, empty,
// unsigned or replayed setting, so no verified context means an empty id
// set and no rows — never an error, never every row. The verifying
// function is STABLE: nothing can be constant-folded into a cached plan. Each hop of the
// foreign-key path is an "= ANY (ARRAY(SELECT key FROM parent WHERE ...))"
// test, again an InitPlan, so the policy of a child table can drive an index
// on its foreign-key column instead of filtering every row with a per-row
// SubPlan (what an EXISTS policy does). For bookings of the hotel schema:
//
//	room_id = ANY (ARRAY(SELECT _p1.id FROM rooms AS _p1 WHERE
//	    _p1.hotel_id = ANY (<hotel ids>) OR
//	    _p1.hotel_id = ANY (ARRAY(SELECT _p2.id FROM hotels AS _p2 WHERE _p2.chain_id = ANY (<chain ids>)))))
//
// Policies are self-contained (they do not rely on the parent table's
// policy) and use only leakproof equality, so PostgreSQL may use them as
// index conditions.
//
// Grants confined to ancestors ("hotel 12 within chain acme") sit in the
// document as tuples under a shape key ({"chain/hotel":[["acme",12]]}).
// Since the policies are generated before any scope is known, each table's
// policy has one more term per set of two or more levels the table reaches
// (up to MaxShapeLevels levels): the row's anchors of those levels, read
// together along the same foreign-key path, must equal one of the tuples
// (a row IN over jsonb_array_elements of the shape, again uncorrelated
// unless the table itself carries one of the levels). A shape the caller
// has no grants of is an empty set. The guard binds the same tuples as one
// typed array per level, zipped by unnest.
//
// # Limits
//
// Level columns must be of an integer type (integer levels, compared as
// bigint) or a text type (text levels); foreign keys on a scope path may be
// composite (they are then tested with a row IN (SELECT ...)). The id sets
// are materialised per statement: a scope whose grants reach hundreds of
// thousands of rows of an intermediate table makes that array large.
package postgres

import (
	"context"
	"encoding/json"
	"strings"

	sq "github.com/Masterminds/squirrel"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
	"github.com/tenantmcp/tenantmcp/scope"
)

// DefaultNamespace is the namespace of the scope setting and the prefix of
// the policy names when none is configured: the setting is
// "tenantmcp.scope" and the policies are called "tenantmcp_scope".
const DefaultNamespace = "tenantmcp"

// Dialect is the PostgreSQL dialect. The zero value uses DefaultNamespace
// and adds the guard's predicates.
type Dialect struct {
	// Namespace names the setting "<Namespace>.scope"; a lower-case
	// identifier (see ValidNamespace).
	Namespace string
	// RLSOnly leaves the read predicates to the row-level security
	// policies alone (the guard still checks writes).
	RLSOnly bool
	// Style overrides the path predicate shape (benchmarks compare both).
	Style engine.PathStyle
	// Timeouts, if set, are made transaction-local alongside the scope.
	Timeouts Timeouts
	// Key signs the scope setting (see signed.go); Session fails without
	// one.
	Key *Key
	// (h5-catalog) SearchPath, if set, is made the transaction-local
	// search_path of every guarded transaction (see searchpath.go).
	SearchPath string
}

var (
	_ engine.Dialect      = Dialect{}
	_ engine.ReadEnforcer = Dialect{}
	_ engine.Returner     = Dialect{}
)

// ns returns the configured namespace or the default.
func (d Dialect) ns() string {
	if d.Namespace == "" {
		return DefaultNamespace
	}
	return d.Namespace
}

// Setting is the name of the transaction-local setting holding the scope.
func (d Dialect) Setting() string { return d.ns() + ".scope" }

// PolicyName is the name of the policy RLSDDL creates on every table.
func (d Dialect) PolicyName() string { return d.ns() + "_scope" }

// ValidNamespace reports whether ns can name the setting and prefix the
// policies: a level name (scope.ValidLevel's alphabet) of at most 40 bytes.
func ValidNamespace(ns string) bool { return len(ns) <= 40 && scope.ValidLevel(ns) }

// Name implements engine.Dialect.
func (Dialect) Name() string { return "postgres" }

// Quote implements engine.Dialect.
func (Dialect) Quote(id string) string { return `"` + strings.ReplaceAll(id, `"`, `""`) + `"` }

// Placeholders implements engine.Dialect.
func (Dialect) Placeholders() sq.PlaceholderFormat { return sq.Dollar }

// LikeEscape implements engine.Dialect (standard_conforming_strings is on
// by default since PostgreSQL 9.1).
func (Dialect) LikeEscape() string { return `'\'` }

// DualTable implements engine.Dialect.
func (Dialect) DualTable() string { return "" }

// PathStyle implements engine.Dialect. The uncorrelated IN form is pulled
// up into a semi-join that drives the foreign-key index.
func (d Dialect) PathStyle() engine.PathStyle { return d.Style }

// Prelude implements engine.Dialect: the guard binds its ids in InScope.
func (Dialect) Prelude(string) engine.Frag { return engine.Frag{} }

// EngineEnforcesReads reports whether the guard may leave read predicates
// to the engine (RLS-only configuration).
func (d Dialect) EngineEnforcesReads() bool { return d.RLSOnly }

// InScope implements engine.Dialect. The ids granted at lvl are bound as
// one typed array parameter (bigint[] or text[]), independent of the
// session setting the policies read.
func (Dialect) InScope(x engine.Frag, lvl *sqlast.Level, doc string) engine.Frag {
	ids := levelIDs(doc, lvl)
	cast := "text[]"
	if lvl.Key == sqlast.IntKey {
		cast = "bigint[]"
	}
	args := append(append([]any(nil), x.Args...), ids)
	return engine.Frag{SQL: x.SQL + " = ANY (?::" + cast + ")", Args: args}
}

// InTuples implements engine.Dialect. The shape's tuples are bound as one
// typed array per level and zipped by unnest, again independent of the
// session setting.
func (Dialect) InTuples(xs []engine.Frag, sh engine.Shape, doc string) engine.Frag {
	row := engine.Row(xs)
	casts := make([]string, len(sh.Levels))
	for i, l := range sh.Levels {
		casts[i] = "?::text[]"
		if l.Key == sqlast.IntKey {
			casts[i] = "?::bigint[]"
		}
	}
	return engine.Frag{
		SQL:  row.SQL + " IN (SELECT * FROM unnest(" + strings.Join(casts, ", ") + "))",
		Args: append(row.Args, engine.ShapeTuples(doc, sh)...),
	}
}

// levelIDs extracts the ids of one level from the scope document as the
// Go slice pgx encodes as the matching array type. A document that does
// not parse (it always does: EncodeScope writes it) yields no ids.
func levelIDs(doc string, lvl *sqlast.Level) any {
	var m map[string]json.RawMessage
	_ = json.Unmarshal([]byte(doc), &m)
	if lvl.Key == sqlast.IntKey {
		ids := []int64{}
		if raw, ok := m[lvl.Name]; ok {
			_ = json.Unmarshal(raw, &ids)
		}
		return ids
	}
	ids := []string{}
	if raw, ok := m[lvl.Name]; ok {
		_ = json.Unmarshal(raw, &ids)
	}
	return ids
}

// Returning implements engine.Returner: pgx reports no last-insert id.
func (Dialect) Returning() bool { return true }

// NeedsTx implements engine.Dialect: the scope lives in the transaction.
func (Dialect) NeedsTx() bool { return true }

// SessionSQL is the statement Session runs; $1 is the setting name and $2
// the scope document. It also sets the transaction's time zone to UTC, in
// the same round trip: the guard's time expressions (builder.Now,
// DiffDays, DateTrunc...) turn timestamptz values into dates and add
// calendar intervals in the session time zone, and must give the same
// answers as on the other engines whatever the pool's or the server's
// default (a pool guardedsql did not open may set another).
const SessionSQL = `SELECT set_config($1, $2, true), set_config('TimeZone', 'UTC', true)`

// Session implements engine.Dialect: it sets the scope document, signed
// for this transaction (see signed.go), as the transaction-local setting.
func (d Dialect) Session(ctx context.Context, tx engine.Querier, _ scope.Scope, doc string) error {
	if err := d.Timeouts.session(ctx, tx); err != nil {
		return err
	}
	if err := d.pinSearchPath(ctx, tx); err != nil {
		return err
	}
	return d.session(ctx, tx, doc)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
