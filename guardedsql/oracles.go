package guardedsql

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// UniqueOracle is a unique key (primary key, unique constraint or unique
// index) of a tenant-bound table that does not include the table's tenant
// path column (its own level column, or the foreign key to its scope
// parent). Such a key is shared by all tenants, so an insert that
// collides with another tenant's row fails with ErrConflict: it reveals
// that the value exists elsewhere. Make the key per tenant by adding the
// tenant path column, or let the database generate the values and
// acknowledge the key in TableDef.SharedUnique (a generated id reveals
// only that it was drawn, which every tenant that inserts learns anyway).
// Open refuses unacknowledged keys other than primary keys
// (ErrSharedUnique).
type UniqueOracle struct {
	Table, Name string
	Columns     []string
	// Primary is true for the primary key.
	Primary bool
	// Reason is the acknowledgement of TableDef.SharedUnique for the key
	// (what a conflict reveals), or empty.
	Reason string
}

// UniqueOracles returns the unique keys that are existence oracles, as
// read from the catalog when the DB was opened (nil where the engine's
// catalog could not be read). Open and the engine packages' New functions
// also log each of them at warning level (Options.Logger), primary keys at
// info level.
func (db *DB) UniqueOracles() []UniqueOracle { return slices.Clone(db.oracles) }

// findUniqueOracles lists the unique keys of q's catalog and keeps those
// of tenant-bound tables of g that lack the tenant path column.
func findUniqueOracles(ctx context.Context, d engine.Dialect, q engine.Querier, g *sqlast.Schema, log *slog.Logger) []UniqueOracle {
	ul, ok := d.(engine.UniqueLister)
	if !ok {
		return nil
	}
	keys, err := ul.UniqueKeys(ctx, q)
	if err != nil {
		if log != nil {
			log.LogAttrs(ctx, slog.LevelWarn, "guardedsql: could not list unique keys", slog.String("err", logText(err.Error())))
		}
		return nil
	}
	// The declared primary key, for engines that list none for it
	// (SQLite's INTEGER PRIMARY KEY is the rowid, not an index).
	for _, name := range g.Names {
		t := g.Tables[name]
		if len(t.PK) > 0 && !slices.ContainsFunc(keys, func(k engine.UniqueKey) bool { return k.Table == name && slices.Equal(k.Columns, t.PK) }) {
			keys = append(keys, engine.UniqueKey{Table: name, Name: "PRIMARY KEY", Columns: t.PK, Primary: true})
		}
	}
	var out []UniqueOracle
	var primaries []string // unacknowledged primary keys, logged together
	for _, k := range keys {
		t := g.Tables[k.Table]
		if t == nil || t.Global {
			continue
		}
		path := tenantPathColumns(t)
		if slices.ContainsFunc(k.Columns, func(c string) bool { return slices.Contains(path, c) }) {
			continue
		}
		o := UniqueOracle{Table: k.Table, Name: k.Name, Columns: k.Columns, Primary: k.Primary}
		o.Reason, _ = sharedAck(t, k.Columns)
		out = append(out, o)
		if log == nil {
			continue
		}
		// An acknowledged key is the schema's stated decision: logged at
		// debug level with its reason. Unacknowledged primary keys (most
		// tables have one: a generated id) share one info line; any other
		// key (Open refuses those) is a warning of its own.
		lvl := slog.LevelWarn
		switch {
		case o.Reason != "":
			lvl = slog.LevelDebug
		case o.Primary:
			primaries = append(primaries, o.Table+"("+strings.Join(o.Columns, ",")+")")
			continue
		}
		log.LogAttrs(ctx, lvl, "guardedsql: unique key without the tenant column reveals other tenants' values (ErrConflict)",
			slog.String("table", o.Table), slog.String("key", o.Name), slog.String("columns", strings.Join(o.Columns, ",")), slog.Bool("primary", o.Primary),
			slog.String("acknowledged", o.Reason))
	}
	if len(primaries) > 0 {
		log.LogAttrs(ctx, slog.LevelInfo, "guardedsql: primary keys without the tenant column tell an insert whether another tenant holds the id (ErrConflict); "+
			"acknowledge each in its table's SharedUnique to log it at debug level", slog.Any("keys", primaries))
	}
	return out
}

// tenantPathColumns are the columns of t that decide which tenant a row
// belongs to: its own level columns, and its scope-parent foreign key
// where the parent reaches a level t carries no column of. For a level t
// carries, its column alone decides; the Parent's path to that level is a
// consistency path a row may disagree with (Cal.com: team 2's event type
// naming a user of org 1), so a unique key through it collides with other
// tenants' rows.
func tenantPathColumns(t *sqlast.Table) []string {
	var cols []string
	for _, lc := range t.LevelCols {
		cols = append(cols, lc.Col)
	}
	if t.Parent != nil && slices.ContainsFunc(t.Anchors, func(a sqlast.Anchor) bool { return t.LevelOf(a.Col) == nil || len(a.Hops) > 0 }) {
		cols = append(cols, t.Parent.Cols...)
	}
	return cols
}
