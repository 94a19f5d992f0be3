package guardedsql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/internal/refname"
	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// Errors of the start-up catalog check (see CheckCatalog). Each matches
// ErrCatalog with errors.Is.
var (
	// ErrCatalog: the schema graph disagrees with the live database.
	ErrCatalog = errors.New("guardedsql: schema graph disagrees with the database catalog")
	// ErrGlobalDrift: a table declared global has a foreign key into a
	// tenant-bound table or a column named like a scope level, and no
	// GlobalReason. Declared global by mistake, it would be read and
	// joined without any tenant predicate.
	ErrGlobalDrift = fmt.Errorf("%w: a global table looks tenant-bound", ErrCatalog)
	// ErrFKNotEnforced: a foreign key of the graph into a tenant-bound
	// table is not a constraint of the database, or the connection does
	// not enforce foreign keys (SQLite without PRAGMA foreign_keys,
	// MySQL foreign_key_checks=0, PostgreSQL session_replication_role
	// replica). The guard follows those keys as if every row obeyed them.
	ErrFKNotEnforced = fmt.Errorf("%w: foreign key not enforced by the database", ErrCatalog)
	// ErrPathKey: a foreign key into a tenant-bound table references
	// columns that are no primary or unique key in the database (the
	// graph may declare one that does not exist). Also matches
	// builder.ErrFKTarget.
	ErrPathKey = fmt.Errorf("%w: foreign key target is not a key in the database: %w", ErrCatalog, builder.ErrFKTarget)
	// ErrTypeDrift: a column whose kind the graph knows (a level column,
	// a declared type, a foreign key's referenced column) has a type of the
	// other kind in the database (text for integer or the reverse), so the
	// values builder converts for it would make the engine convert the
	// column's values instead.
	ErrTypeDrift = fmt.Errorf("%w: column type disagrees with the graph", ErrCatalog)
	// ErrScopeColumnMissing: a table of the graph exists in the database
	// but lacks one of the columns the guard's predicates read (a level
	// column, or a column of a foreign key into a tenant-bound table):
	// every statement on it would fail, so the declaration is wrong (a
	// misspelt tenant column), not a migration still to come.
	ErrScopeColumnMissing = fmt.Errorf("%w: a column the tenant predicates read is missing", ErrCatalog)
	// ErrCollation: a level column or a column of a foreign key into a
	// tenant-bound table compares case- or space-insensitively (SQLite
	// COLLATE NOCASE or RTRIM, a PostgreSQL nondeterministic collation),
	// so tenant "ACME" would match tenant "acme".
	ErrCollation = fmt.Errorf("%w: tenant key column does not compare byte-exactly", ErrCatalog)
	// ErrUndeclaredFK: the database has a foreign key from a tenant-bound
	// table of the graph to a tenant-bound table (or a table owned by
	// reference) that the graph does not declare. The guard checks only
	// declared foreign keys on writes, so a tenant could make its row
	// point at another tenant's row through this one. Declare it in
	// TableDef.ForeignKeys: as the Parent, as a consistency path, or with
	// ForeignKey.Unchecked set to why it need not be checked.
	ErrUndeclaredFK = fmt.Errorf("%w: foreign key between tenant-bound tables not declared", ErrCatalog)
	// ErrSharedUnique: a unique key (other than the primary key) of a
	// tenant-bound table lacks the table's tenant column, and
	// TableDef.SharedUnique does not acknowledge it. An insert answers
	// ErrConflict when another tenant holds the value and succeeds
	// otherwise: the key reveals other tenants' values.
	ErrSharedUnique = fmt.Errorf("%w: unique key shared across tenants", ErrCatalog)
	// ErrTrigger: a table of the graph has a trigger (on PostgreSQL also a
	// rewrite rule), or a foreign key whose ON UPDATE or ON DELETE action
	// writes its rows (CASCADE, SET NULL, SET DEFAULT) from another table
	// written for tenants, that TableDef.Triggers does not acknowledge.
	// Both run with no tenant predicate and can copy, change or delete
	// another tenant's rows behind the guard.
	ErrTrigger = fmt.Errorf("%w: trigger, rule or foreign key action on a table of the graph", ErrCatalog)
	// ErrLevelColumn: a column declared to carry a scope level holds, by
	// the database's own foreign keys or its names, something else: it
	// maps, in a foreign key, onto a column of another table that does
	// not carry that level (ads.campaign_id -> campaigns.id declared a
	// company column); it is a second column of the level in its table
	// that no foreign key anchors (campaigns.id beside
	// campaigns.company_id); it is a primary-key column while another
	// column's foreign key carries the level; or, anchored by nothing, it
	// sits beside an undeclared column named like the level
	// (tickets.project_id beside tickets.company_id). A row is in scope when any of its level
	// columns matches a grant, so such a column hands rows to the tenant
	// whose key happens to equal its value. The converse too: a checked
	// foreign key besides the Parent holds the keys of a level the table
	// reaches only through its Parent (tasks.project_id beside Parent
	// user_story_id) and is not declared a level column.
	ErrLevelColumn = fmt.Errorf("%w: a level column does not hold that level's keys, or a column that holds them is not declared one", ErrCatalog)
)

// CatalogReport is what CheckCatalog found that does not stop Open.
type CatalogReport struct {
	// Unlisted: tables of the database that the graph leaves out although
	// they look tenant-bound (a foreign key into a tenant-bound table, or a
	// column named like a level). The guard cannot reach them, but raw SQL
	// can, and they are usually a table the graph should list.
	Unlisted []string
	// Undeclarable: tables of the database that the graph leaves out and
	// whose only paths to a tenant lead through tables owned by reference
	// (a huddle that references a recipient, which the rows that reference
	// it own) or through references the database does not hold (a column
	// named like a reference to a tenant-bound table with no foreign key,
	// a polymorphic pair such as item_type and item_id). No declaration
	// fits them as the database stands: Global would show every tenant's
	// rows to every tenant, OwnedByReference needs rows that reference
	// them, and a Parent must be a foreign key to a tenant-bound table.
	// Left out, the guard cannot reach them; raw SQL can, so grant the
	// application role nothing on them.
	Undeclarable []string
	// Missing: tables ("t") and columns ("t.c") of the graph that the
	// database lacks (not migrated yet). Statements using them fail at
	// the database; their foreign keys and collations go unchecked.
	Missing []string
}

// Drift reports whether the report lists anything.
func (r CatalogReport) Drift() bool { return len(r.Unlisted)+len(r.Missing) > 0 }

// CheckCatalog compares db's schema graph with the live catalog, as the
// connected role sees it, and returns an error matching ErrCatalog (and
// one of ErrGlobalDrift, ErrFKNotEnforced, ErrPathKey, ErrTypeDrift,
// ErrScopeColumnMissing, ErrCollation) when the guard's assumptions about
// the database do not hold:
//
//   - every table and column of the graph exists (else it is reported as
//     Missing, and the checks below skip it), except that a table that
//     exists must have every column its tenant predicates read
//     ([ErrScopeColumnMissing]), and a column whose kind the graph knows
//     (integer or text) has a type of that kind;
//   - a global table has no foreign key into a tenant-bound table and no
//     column named like a level, unless its TableDef.GlobalReason says why;
//   - every foreign key of the graph into a tenant-bound table is a
//     constraint of the database, referencing the same columns, and the
//     connection enforces foreign keys;
//   - those foreign keys reference a primary or unique key of the database
//     (not only of the graph);
//   - level columns and the columns of those foreign keys compare byte for
//     byte (no NOCASE/RTRIM collation on SQLite, no nondeterministic
//     collation on PostgreSQL; MySQL compares level ids as binary strings
//     anyway);
//   - every foreign key of the database between two tenant-bound tables
//     of the graph is declared in the graph ([ErrUndeclaredFK]);
//   - every unique key of a tenant-bound table other than its primary key
//     includes its tenant column or is acknowledged in
//     TableDef.SharedUnique ([ErrSharedUnique]);
//   - no table of the graph has a trigger, rule or foreign key action
//     that TableDef.Triggers does not acknowledge ([ErrTrigger]).
//
// Open and the engine packages' New functions run it and refuse to start on
// an error, logging the report's unlisted tables as a warning (Options.Logger).
// The conformance suite runs it as a property.
func CheckCatalog(ctx context.Context, db *DB) (CatalogReport, error) {
	return checkCatalog(ctx, db.base, db.d, db.g)
}

// startupCatalog runs the catalog check for a DB being opened.
func startupCatalog(ctx context.Context, db *DB) error {
	rep, err := CheckCatalog(ctx, db)
	if err != nil {
		return err
	}
	db.oracles = findUniqueOracles(ctx, db.d, db.base, db.g, db.logger)
	if db.logger != nil && len(rep.Unlisted) > 0 {
		db.logger.WarnContext(ctx, "guardedsql: tables that look tenant-bound are not in the schema graph", "tables", rep.Unlisted)
	}
	if db.logger != nil && len(rep.Undeclarable) > 0 {
		db.logger.WarnContext(ctx, "guardedsql: tables reached only through tables owned by reference, or through references with no foreign key, cannot be declared; the guard cannot reach them, so grant the application role nothing on them", "tables", rep.Undeclarable)
	}
	if b, ok := db.d.(interface{ BlindShapes(*sqlast.Schema) []string }); ok && db.logger != nil {
		if blind := b.BlindShapes(db.g); len(blind) > 0 {
			db.logger.WarnContext(ctx, "guardedsql: on PostgreSQL a grant confined to ancestors (one id within another) reads no row of these tables or those below them: "+
				"the policy reads a table of the path that such a grant does not see", "tables", blind)
		}
	}
	if db.logger != nil && len(rep.Missing) > 0 {
		db.logger.WarnContext(ctx, "guardedsql: tables and columns of the schema graph are missing from the database", "missing", rep.Missing)
	}
	return nil
}

func checkCatalog(ctx context.Context, q engine.Querier, d engine.Dialect, g *sqlast.Schema) (CatalogReport, error) {
	cc, ok := d.(engine.CatalogChecker)
	if !ok {
		return CatalogReport{}, fmt.Errorf("%w: the %s dialect cannot read its catalog", ErrCatalog, d.Name())
	}
	defs, inexact, err := cc.Catalog(ctx, q, keyColumns(g))
	if err != nil {
		return CatalogReport{}, fmt.Errorf("guardedsql: reading the catalog: %w", err)
	}
	cat := map[string]*builder.TableDef{}
	for i := range defs {
		cat[strings.ToLower(defs[i].Name)] = &defs[i]
	}
	var (
		errs []error
		rep  CatalogReport
	)
	if !guardfault.Off(guardfault.Catalog) {
		var cerrs []error
		rep.Missing, cerrs = compareTables(g, cat, d.Name() == "sqlite")
		errs = append(errs, cerrs...)
		on, why, err := cc.FKEnforced(ctx, q)
		if err != nil {
			return CatalogReport{}, err
		}
		if !on {
			errs = append(errs, fmt.Errorf("%w: %s", ErrFKNotEnforced, why))
		}
	}
	if !guardfault.Off(guardfault.PathKey) {
		errs = append(errs, comparePathKeys(g, cat)...)
	}
	if !guardfault.Off(guardfault.Collation) {
		for _, c := range inexact {
			errs = append(errs, fmt.Errorf("%w: %s; give the column a binary collation", ErrCollation, c))
		}
	}
	if !guardfault.Off(guardfault.UndeclaredFK) {
		errs = append(errs, undeclaredFKs(g, defs, cat)...)
	}
	if !guardfault.Off(guardfault.SharedUnique) {
		uerrs, err := sharedUniques(ctx, q, d, g)
		if err != nil {
			return CatalogReport{}, err
		}
		errs = append(errs, uerrs...)
	}
	if !guardfault.Off(guardfault.Triggers) {
		terrs, err := unacknowledgedTriggers(ctx, q, d, g)
		if err != nil {
			return CatalogReport{}, err
		}
		errs = append(errs, terrs...)
	}
	if err := errors.Join(errs...); err != nil {
		return CatalogReport{}, err
	}
	rep.Unlisted, rep.Undeclarable = unlisted(g, defs)
	return rep, nil
}

// keyColumns lists the columns whose comparisons decide tenancy: level
// columns, and both sides of every foreign key into a tenant-bound table.
func keyColumns(g *sqlast.Schema) [][2]string {
	seen := map[[2]string]bool{}
	var out [][2]string
	add := func(t, c string) {
		k := [2]string{t, c}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, name := range g.Names {
		t := g.Tables[name]
		for _, lc := range t.LevelCols {
			add(t.Name, lc.Col)
		}
		for _, fk := range t.TenantFKs() {
			for i := range fk.Cols {
				add(t.Name, fk.Cols[i])
				add(fk.To.Name, fk.RefCols[i])
			}
		}
	}
	return out
}

// refLike returns the tenant-bound table (or one owned by reference) a
// column is named after the way frameworks name a reference without a
// database foreign key ("inbox_id" for inboxes, "company_id" for
// companies, "address_id" for address, "project_id" for Django's
// sentry_project), or "". Schemas whose framework keeps no foreign keys
// (Rails' by default) show their tenant rows only by such names, so a
// global table holding one is asked for a reason.
func refLike(g *sqlast.Schema, c string) string {
	base := refname.Base(c, "id")
	for _, name := range g.Names {
		// A prefix is an application's ("sentry_project"), a schema's
		// ("public.project") or a framework's.
		if t := g.Tables[name]; !t.Global && refname.Names(t.Name, base, true) {
			return t.Name
		}
	}
	return ""
}

// namedRoot refuses t, declared global without a reason, when a level
// column is named like a reference to its primary key with no foreign key
// saying so (Kill Bill's tenant_record_id beside tenants.record_id): its
// rows are then the tenants themselves, the case the foreign-key rule of
// compareTables reports when the key is there (so namedRoot does not
// report it twice).
func namedRoot(g *sqlast.Schema, t *sqlast.Table, cat map[string]*builder.TableDef) []error {
	ct := cat[strings.ToLower(t.Name)]
	if len(ct.PrimaryKey) != 1 {
		return nil
	}
	for _, name := range g.Names {
		u := g.Tables[name]
		if u.Global {
			continue
		}
		for _, lc := range u.LevelCols {
			if refname.Refers(lc.Col, t.Name, ct.PrimaryKey[0], true) && !hasFK(cat[strings.ToLower(u.Name)], lc.Col, g, t) {
				return []error{fmt.Errorf("%w: %s.%s, a column of level %s, is named like a reference to %s.%s, declared global: its rows are the tenants themselves; "+
					"declare %s tenant-bound (%s a column of level %s), or give a GlobalReason",
					ErrGlobalDrift, u.Name, lc.Col, lc.Level.Name, t.Name, ct.PrimaryKey[0], t.Name, ct.PrimaryKey[0], lc.Level.Name)}
			}
		}
	}
	return nil
}

// hasFK reports whether the catalog's table ct has a one-column foreign
// key from col to to.
func hasFK(ct *builder.TableDef, col string, g *sqlast.Schema, to *sqlast.Table) bool {
	if ct == nil {
		return false
	}
	return slices.ContainsFunc(ct.ForeignKeys, func(fk builder.ForeignKey) bool {
		return len(fk.Columns) == 1 && strings.EqualFold(fk.Columns[0], col) && g.Tables[graphName(g, fk.RefTable)] == to
	})
}

// levelLike reports whether column c is named like a scope level of g: a
// level's name, that name with "_id", or the name of a level column of a
// tenant-bound table other than the whole primary key of its table.
func levelLike(g *sqlast.Schema, c string) bool {
	c = strings.ToLower(c)
	for _, l := range g.Levels {
		if c == l.Name || c == l.Name+"_id" || c == l.Name+"id" {
			return true
		}
	}
	for _, name := range g.Names {
		t := g.Tables[name]
		for _, lc := range t.LevelCols {
			// The whole key of the level's own table (hotels.id, Kill
			// Bill's tenants.record_id, a name every table uses for its
			// own key) lends its name to nothing.
			if len(t.PK) == 1 && strings.EqualFold(t.PK[0], lc.Col) {
				continue
			}
			if strings.ToLower(lc.Col) == c {
				return true
			}
		}
	}
	return false
}

func compareTables(g *sqlast.Schema, cat map[string]*builder.TableDef, uuidIsText bool) (missing []string, errs []error) {
	for _, name := range g.Names {
		t := g.Tables[name]
		ct := cat[strings.ToLower(t.Name)]
		if ct == nil {
			missing = append(missing, t.Name)
			continue
		}
		scopeCols := map[string]bool{}
		for _, lc := range t.LevelCols {
			scopeCols[lc.Col] = true
		}
		for _, fk := range t.TenantFKs() {
			for _, c := range fk.Cols {
				scopeCols[c] = true
			}
		}
		for _, c := range t.Columns {
			i := slices.IndexFunc(ct.Columns, func(x string) bool { return strings.EqualFold(x, c) })
			if i < 0 && scopeCols[c] {
				errs = append(errs, fmt.Errorf("%w: %s.%s is not a column of the database's %s (a misspelt level or foreign-key column?)", ErrScopeColumnMissing, t.Name, c, ct.Name))
				continue
			}
			if i < 0 {
				missing = append(missing, t.Name+"."+c)
				continue
			}
			typ := ct.Types[ct.Columns[i]]
			if msg := t.ScopeTypeProblem(c, typ, uuidIsText); msg != "" {
				errs = append(errs, fmt.Errorf("%w: %s", ErrTypeDrift, msg))
			}
		}
		// A level column that references a table declared global names
		// that table's rows as the tenants themselves (Chatwoot's
		// conversations.account_id -> accounts): global, every tenant
		// reads every tenant's row.
		for _, fk := range ct.ForeignKeys {
			to := g.Tables[graphName(g, fk.RefTable)]
			if t.Global || to == nil || !to.Global || to.GlobalReason != "" || len(fk.Columns) != 1 || guardfault.Off(guardfault.GlobalRoot) {
				continue
			}
			for _, lc := range t.LevelCols {
				if strings.EqualFold(lc.Col, fk.Columns[0]) {
					errs = append(errs, fmt.Errorf("%w: %s.%s, a column of level %s, references %s, declared global: its rows are the tenants themselves; "+
						"declare %s tenant-bound (its key a column of level %s), or give a GlobalReason",
						ErrGlobalDrift, t.Name, lc.Col, lc.Level.Name, to.Name, to.Name, lc.Level.Name))
				}
			}
		}
		if t.Global && t.GlobalReason == "" && !guardfault.Off(guardfault.GlobalRoot) {
			errs = append(errs, namedRoot(g, t, cat)...)
		}
		if !guardfault.Off(guardfault.LevelAnchor) {
			errs = append(errs, levelAnchors(g, t, cat)...)
		}
		if t.Global && t.GlobalReason == "" {
			// Invariant: a table without tenant predicates is one the
			// database, not only the graph, shows to be tenant-free.
			for _, fk := range ct.ForeignKeys {
				if to := g.Tables[graphName(g, fk.RefTable)]; to != nil && !to.Global {
					errs = append(errs, fmt.Errorf("%w: %s(%s) references tenant-bound %s; declare %s tenant-bound, or give a GlobalReason",
						ErrGlobalDrift, t.Name, strings.Join(fk.Columns, ","), to.Name, t.Name))
				}
			}
			for _, c := range ct.Columns {
				if levelLike(g, c) {
					errs = append(errs, fmt.Errorf("%w: %s.%s is named like a scope level; declare %s tenant-bound, or give a GlobalReason",
						ErrGlobalDrift, t.Name, c, t.Name))
				} else if to := refLike(g, c); to != "" && !guardfault.Off(guardfault.GlobalNamedRef) && !slices.ContainsFunc(ct.ForeignKeys, func(fk builder.ForeignKey) bool {
					return len(fk.Columns) == 1 && strings.EqualFold(fk.Columns[0], c)
				}) {
					errs = append(errs, fmt.Errorf("%w: %s.%s is named like a reference to tenant-bound %s, with no foreign key in the database; "+
						"add the foreign key in a migration and declare %s tenant-bound (Parent or OwnedByReference), or give a GlobalReason",
						ErrGlobalDrift, t.Name, c, to, t.Name))
				}
			}
			if _, c := refname.Polymorphic(ct.Columns); c != "" && !guardfault.Off(guardfault.GlobalPolymorphic) && slices.ContainsFunc(g.Names, func(n string) bool { return !g.Tables[n].Global }) {
				errs = append(errs, fmt.Errorf("%w: %s.%s is a polymorphic reference (with its _type column) that may hold tenant-bound rows' ids; "+
					"declare %s tenant-bound (a level column of its own), or give a GlobalReason",
					ErrGlobalDrift, t.Name, c, t.Name))
			}
		}
		for _, fk := range t.TenantFKs() {
			if cat[strings.ToLower(fk.To.Name)] == nil {
				continue // the referenced table is reported missing
			}
			if !slices.ContainsFunc(ct.ForeignKeys, func(cf builder.ForeignKey) bool { return sameFK(fk, cf, cat) }) {
				errs = append(errs, fmt.Errorf("%w: %s(%s) -> %s(%s) is not a foreign-key constraint of the database; "+
					"the graph may declare only what the database enforces: add the constraint in a migration "+
					"(on PostgreSQL on the partitioned table itself, not only on its partitions)",
					ErrFKNotEnforced, t.Name, strings.Join(fk.Cols, ","), fk.To.Name, strings.Join(fk.RefCols, ",")))
			}
		}
	}
	return missing, errs
}

// levelAnchors checks t's level columns against the database's foreign
// keys (cat, by lower-case name).
//
// Invariant: a column declared to carry a level holds that level's keys
// by the database's own evidence where it has any: every foreign key it
// is a column of maps it onto a column carrying the same level, and a
// level column no foreign key anchors is not one of two columns of its
// level in the table, nor beside an undeclared column named like the
// level, nor a column of the primary key beside another column whose
// foreign key carries the level. (A level column with no foreign key at all, the
// only evidence of its level, is the Rails shape: the guard alone keeps
// it, writing only the writer's keys into it.)
func levelAnchors(g *sqlast.Schema, t *sqlast.Table, cat map[string]*builder.TableDef) []error {
	ct := cat[strings.ToLower(t.Name)]
	var errs []error
	anchored := map[string]bool{}
	for _, lc := range t.LevelCols {
		for _, fk := range ct.ForeignKeys {
			i := slices.IndexFunc(fk.Columns, func(c string) bool { return strings.EqualFold(c, lc.Col) })
			to := g.Tables[graphName(g, fk.RefTable)]
			if i < 0 || to == nil || to.Global || i >= len(fk.RefColumns) {
				continue
			}
			if carriesLevel(g, cat, to, fk.RefColumns[i], lc.Level, 0) {
				anchored[lc.Col] = true
				continue
			}
			errs = append(errs, fmt.Errorf("%w: %s.%s is declared a column of level %s, but the database's foreign key %s(%s) -> %s(%s) says it holds %s.%s, "+
				"which carries no key of level %s: remove %s from %s's Levels (its scope comes through its Parent), or declare the level where its keys are",
				ErrLevelColumn, t.Name, lc.Col, lc.Level.Name, t.Name, strings.Join(fk.Columns, ","), to.Name, strings.Join(fk.RefColumns, ","), to.Name, fk.RefColumns[i],
				lc.Level.Name, lc.Col, t.Name))
		}
	}
	if !guardfault.Off(guardfault.UndeclaredLevel) {
		errs = append(errs, undeclaredLevelColumns(g, t, cat)...)
	}
	for _, lc := range t.LevelCols {
		if anchored[lc.Col] {
			continue
		}
		if i := slices.IndexFunc(t.LevelCols, func(o sqlast.LevelCol) bool { return o.Col != lc.Col && o.Level == lc.Level }); i >= 0 {
			errs = append(errs, fmt.Errorf("%w: %s declares both %s and %s for level %s, and no foreign key says %s holds that level's keys: "+
				"a row is in scope when either matches, so %s's values would hand rows to the tenant with the same key; remove it from Levels",
				ErrLevelColumn, t.Name, t.LevelCols[i].Col, lc.Col, lc.Level.Name, lc.Col, lc.Col))
			continue
		}
		// The row's own key declared the level while another column's
		// foreign key carries it: Levels copied from the tenants' table
		// ({"id": "company"} on campaigns, whose company_id references
		// companies).
		if pkRefused(g, cat, t, ct, lc, &errs) {
			continue
		}
		// No foreign key says anything (a Rails schema): the name may. A
		// level column beside an undeclared column named like the level
		// (inbox_id declared the account column of conversations, which
		// has an account_id) is the wrong one, unless that column's type
		// cannot hold the level's keys (Kill Bill's account_id, a UUID,
		// beside the account_record_id that holds them).
		if x := slices.IndexFunc(ct.Columns, func(c string) bool {
			n := strings.ToLower(c)
			k := sqlast.TypeKind(ct.Types[c])
			return !strings.EqualFold(c, lc.Col) && levelOfFold(t, c) == nil && (n == lc.Level.Name || n == lc.Level.Name+"_id") && (k == 0 || k == lc.Level.Key)
		}); x >= 0 {
			errs = append(errs, fmt.Errorf("%w: %s.%s is declared the column of level %s, but %s also has %s, named like the level, undeclared: "+
				"declare %s, not %s, in %s's Levels",
				ErrLevelColumn, t.Name, lc.Col, lc.Level.Name, t.Name, ct.Columns[x], ct.Columns[x], lc.Col, t.Name))
		}
	}
	return errs
}

// undeclaredLevelColumns refuses a checked foreign key of t, besides its
// Parent and with no declared level column, with a column named like a
// level that holds the keys of a level t reaches only through its Parent
// (Taiga's tasks.project_id beside Parent user_story_id): undeclared, the column is only tested to name a row the
// writer sees, so a writer granted two tenants files a row under one
// through its Parent and under the other through the column, and a row
// whose Parent is NULL reaches no tenant though the column names one.
//
// Invariant: a column named like a level that the database shows to hold
// that level's keys is a level column of its table, in its Parent or in a
// key with a level column, or not checked (Unchecked, with a reason),
// wherever the table also reaches that level another way.
func undeclaredLevelColumns(g *sqlast.Schema, t *sqlast.Table, cat map[string]*builder.TableDef) []error {
	var errs []error
	for _, fk := range t.TenantFKs() {
		// A key with a declared level column (g25's (chain_id, hotel_id))
		// is anchored by it; a column not named like a level
		// (referred_by_hotel_id) may name another tenant's row on purpose.
		if fk == t.Parent || fk.To == t || slices.ContainsFunc(fk.Cols, func(c string) bool { return t.LevelOf(c) != nil }) {
			continue
		}
		for i, c := range fk.Cols {
			if i >= len(fk.RefCols) || !levelLike(g, c) {
				continue
			}
			for _, a := range t.Anchors {
				if len(a.Hops) == 0 || !carriesLevel(g, cat, fk.To, fk.RefCols[i], a.Level, 0) {
					continue
				}
				errs = append(errs, fmt.Errorf("%w: %s.%s references %s.%s, which holds the keys of level %s, and %s also reaches %s through its Parent %s: "+
					"declare %s in %s's Levels (the row's own column then decides its %s, the Parent's path is checked on writes), "+
					"or make it the Parent; as an undeclared checked key it need only name a row the writer sees, so a writer granted two %ss files a row under one through %s and the other through %s",
					ErrLevelColumn, t.Name, c, fk.To.Name, fk.RefCols[i], a.Level.Name, t.Name, a.Level.Name, strings.Join(t.Parent.Cols, ","),
					c, t.Name, a.Level.Name, a.Level.Name, strings.Join(t.Parent.Cols, ","), c))
				break
			}
		}
	}
	return errs
}

// pkRefused appends to errs, and reports, a column of t's primary key
// declared level lc.Level while another column's foreign key carries
// that level.
func pkRefused(g *sqlast.Schema, cat map[string]*builder.TableDef, t *sqlast.Table, ct *builder.TableDef, lc sqlast.LevelCol, errs *[]error) bool {
	if !slices.ContainsFunc(ct.PrimaryKey, func(c string) bool { return strings.EqualFold(c, lc.Col) }) {
		return false
	}
	for _, fk := range ct.ForeignKeys {
		to := g.Tables[graphName(g, fk.RefTable)]
		if to == nil || to.Global || to == t {
			continue // a self-reference (a parent company) names another row of t
		}
		for i, c := range fk.Columns {
			if i < len(fk.RefColumns) && !strings.EqualFold(c, lc.Col) && levelOfFold(t, c) == nil && carriesLevel(g, cat, to, fk.RefColumns[i], lc.Level, 0) {
				*errs = append(*errs, fmt.Errorf("%w: %s.%s, a column of %s's primary key, is declared the column of level %s, but the database's foreign key %s(%s) -> %s(%s) says %s.%s holds that level's keys: "+
					"declare %s, not %s, in %s's Levels (or its foreign key as the Parent)",
					ErrLevelColumn, t.Name, lc.Col, t.Name, lc.Level.Name, t.Name, strings.Join(fk.Columns, ","), to.Name, strings.Join(fk.RefColumns, ","), t.Name, c,
					c, lc.Col, t.Name))
				return true
			}
		}
	}
	return false
}

// levelOfFold is t.LevelOf for a catalog's column name, whose case the
// engine may have folded.
func levelOfFold(t *sqlast.Table, c string) *sqlast.Level {
	for _, lc := range t.LevelCols {
		if strings.EqualFold(lc.Col, c) {
			return lc.Level
		}
	}
	return nil
}

// carriesLevel reports whether column col of tenant-bound table r holds
// keys of level l: a level column of l, or a column the database's
// foreign keys map onto one (through the shape Citus recommends, where
// every table carries the tenant column in its composite keys).
func carriesLevel(g *sqlast.Schema, cat map[string]*builder.TableDef, r *sqlast.Table, col string, l *sqlast.Level, depth int) bool {
	if lv := levelOfFold(r, col); lv != nil {
		return lv == l
	}
	ct := cat[strings.ToLower(r.Name)]
	if ct == nil || depth > 8 {
		return false
	}
	for _, fk := range ct.ForeignKeys {
		i := slices.IndexFunc(fk.Columns, func(c string) bool { return strings.EqualFold(c, col) })
		to := g.Tables[graphName(g, fk.RefTable)]
		if i >= 0 && i < len(fk.RefColumns) && to != nil && !to.Global && carriesLevel(g, cat, to, fk.RefColumns[i], l, depth+1) {
			return true
		}
	}
	return false
}

// comparePathKeys checks that every foreign key into a tenant-bound table
// references a key of the database's table (builder checked the graph's).
func comparePathKeys(g *sqlast.Schema, cat map[string]*builder.TableDef) []error {
	var errs []error
	for _, name := range g.Names {
		for _, fk := range g.Tables[name].TenantFKs() {
			ct := cat[strings.ToLower(fk.To.Name)]
			if ct == nil {
				continue // reported as missing
			}
			live := sqlast.NewTable(ct.Name, ct.Columns)
			live.PK, live.Unique = ct.PrimaryKey, ct.Unique
			if !live.IsKey(fk.RefCols) {
				errs = append(errs, fmt.Errorf("%w: %s(%s) -> %s(%s); create a unique key on %s(%s)",
					ErrPathKey, fk.From.Name, strings.Join(fk.Cols, ","), fk.To.Name, strings.Join(fk.RefCols, ","), fk.To.Name, strings.Join(fk.RefCols, ",")))
			}
		}
	}
	return errs
}

// sameFK reports whether the catalog's foreign key cf is fk: same table
// referenced and the same column pairs (in any order).
func sameFK(fk *sqlast.FK, cf builder.ForeignKey, cat map[string]*builder.TableDef) bool {
	if !strings.EqualFold(cf.RefTable, fk.To.Name) || len(cf.Columns) != len(fk.Cols) {
		return false
	}
	ref := cf.RefColumns
	if len(ref) == 0 { // SQLite: the referenced table's primary key
		if to := cat[strings.ToLower(cf.RefTable)]; to != nil {
			ref = to.PrimaryKey
		}
	}
	if len(ref) != len(cf.Columns) {
		return false
	}
	for i, c := range fk.Cols {
		j := slices.IndexFunc(cf.Columns, func(x string) bool { return strings.EqualFold(x, c) })
		if j < 0 || !strings.EqualFold(ref[j], fk.RefCols[i]) {
			return false
		}
	}
	return true
}

func graphName(g *sqlast.Schema, name string) string {
	for _, n := range g.Names {
		if strings.EqualFold(n, name) {
			return n
		}
	}
	return ""
}

// unlisted returns the catalog tables the graph lacks that reference a
// tenant-bound table of the graph or have a level-named column.
func unlisted(g *sqlast.Schema, defs []builder.TableDef) (out, undeclarable []string) {
	for _, td := range defs {
		if graphName(g, td.Name) != "" {
			continue
		}
		levelNamed := slices.ContainsFunc(td.Columns, func(c string) bool { return levelLike(g, c) })
		// A reference the database does not hold: a column named like a
		// reference to a tenant-bound table with no foreign key on it
		// (Mattermost's channel_id), or a polymorphic pair (Lago's
		// versions, item_type and item_id). No declaration fits such a
		// table as the database stands.
		unheld := slices.ContainsFunc(td.Columns, func(c string) bool {
			to := g.Tables[refLike(g, c)]
			return to != nil && !to.ByRef && !slices.ContainsFunc(td.ForeignKeys, func(fk builder.ForeignKey) bool {
				return slices.ContainsFunc(fk.Columns, func(x string) bool { return strings.EqualFold(x, c) })
			})
		})
		if _, id := refname.Polymorphic(td.Columns); id != "" && slices.ContainsFunc(g.Names, func(n string) bool { return !g.Tables[n].Global }) {
			unheld = true
		}
		var bound, byRef bool
		for _, fk := range td.ForeignKeys {
			switch to := g.Tables[graphName(g, fk.RefTable)]; {
			case to == nil || to.Global:
			case to.ByRef:
				byRef = true
			default:
				bound = true
			}
		}
		switch {
		case levelNamed || bound:
			out = append(out, td.Name)
		case byRef || unheld:
			undeclarable = append(undeclarable, td.Name)
		}
	}
	return out, undeclarable
}
