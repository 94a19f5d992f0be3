package conformance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/internal/refname"
	"github.com/tenantmcp/tenantmcp/scope"
)

func init() {
	register(&property{id: 58, name: "catalog_oracle", title: "No row the live catalog gives another tenant is returned",
		criterion: "every table, every tenant: 0 rows/count owned (catalog: levels + enforced FKs) by others, unless Target.Shared", fn: propCatalogOracle})
}

// impliedText renders references of table: "posts.channelid -> channels".
func impliedText(table string, refs []liveFK) string {
	out := make([]string, len(refs))
	for i, f := range refs {
		out[i] = table + "." + strings.Join(f.cols, ",") + " -> " + f.to
	}
	return strings.Join(out, ", ")
}

// P58: the declaration is not trusted. For every table of the graph,
// global ones included, and every tenant, the rows a guarded SELECT of
// all its columns returns and its COUNT(*) include no row that the
// catalog oracle (owners.go: level columns and every enforced foreign key
// of the live database, in both directions, and a global table's columns
// named like references that no foreign key covers) attributes to other tenants
// only, unless the run acknowledges the table as shared (Target.Shared);
// nor do MIN and MAX of its integer and text columns (extremesOwn).
// The graph's own reading of which rows a tenant sees (the oracle of
// properties 1–14) must not contain such a row either.
func propCatalogOracle(p *pt, r *runner) {
	if offCatalogOracle.Load() {
		return
	}
	for _, n := range slices.Sorted(maps.Keys(r.cat.implied)) {
		p.Logf("%s is declared global or left out of the graph, and the database has no foreign key on %s: the catalog oracle follows them as references, by their names", n, impliedText(n, r.cat.implied[n]))
	}
	checked, rowsRead := 0, 0
	own := map[string]int{} // tenant -> rows read that the catalog gives it
	for _, name := range r.g.names {
		if _, ok := r.target.Shared[name]; ok {
			continue
		}
		lt := strings.ToLower(name)
		ct := r.cat.tables[lt]
		if ct == nil {
			continue // missing from the database: property 27 reports it
		}
		t := r.g.tables[name]
		// Rows are matched to the catalog's by the catalog's primary key
		// when the graph selects all of it, else by every selected column.
		match := ct.pk
		for _, c := range ct.pk {
			if !slices.ContainsFunc(t.cols, func(x string) bool { return strings.EqualFold(x, c) }) {
				match = nil
			}
		}
		if len(match) == 0 {
			match = make([]string, len(t.cols))
			for i, c := range t.cols {
				match[i] = strings.ToLower(c)
			}
		}
		pos := make([]int, len(match))
		for i, c := range match {
			pos[i] = slices.IndexFunc(t.cols, func(x string) bool { return strings.EqualFold(x, c) })
		}
		decl := "tenant-bound"
		if t.byRef {
			decl = "owned by reference"
		}
		if t.global {
			decl = "global"
			for _, td := range r.target.Graph.Tables {
				if td.Name == name && td.GlobalReason != "" {
					decl += fmt.Sprintf(" with GlobalReason %q", td.GlobalReason)
				}
			}
		}
		checked++
		for _, tn := range r.tenants {
			ctx := r.scoped(p.ctx, tn)
			x := r.ref(name, "x")
			sel := make([]builder.Selectable, len(t.cols))
			for i, c := range t.cols {
				sel[i] = x.Col(c)
			}
			rows, err := r.rows(ctx, p.q(builder.Select(sel...).From(x).Build()))
			if err != nil {
				p.Errorf("%s as %s: %v", name, tn, err)
				continue
			}
			rowsRead += len(rows)
			var foreign, unknown []string
			owners := ""
			for _, row := range rows {
				parts := make([]string, len(pos))
				for i, j := range pos {
					parts[i] = row[j]
				}
				k := tuple(parts...)
				isForeign, found, who := r.cat.foreignByKey(name, match, k, r.g, tn.Grants)
				switch {
				case !found:
					unknown = append(unknown, k)
				case isForeign:
					foreign = append(foreign, k)
					if owners == "" {
						owners = who
					}
				case !t.global:
					own[tn.Name]++
				}
			}
			if len(foreign) > 0 {
				advice := "declare " + name + " tenant-bound (or owned by reference)"
				if !t.global {
					advice = "check " + name + "'s level columns, parents and paths"
				}
				if len(r.cat.poly[lt]) > 0 {
					typ, id := refname.Polymorphic(ct.cols)
					advice += fmt.Sprintf(" (the catalog oracle followed %s.%s to the table its %s values name)", name, id, typ)
				}
				if refs := r.cat.implied[lt]; len(refs) > 0 {
					advice += fmt.Sprintf(" (the catalog oracle followed %s, named like references with no foreign key: add the foreign keys in a migration to declare them)", impliedText(lt, refs))
				}
				p.Errorf("%s (declared %s) as %s: %d of %d rows returned belong, by the live catalog, to other tenants only (e.g. %s %s, owned by %s); "+
					"%s, or acknowledge it in Target.Shared if every tenant may read it",
					name, decl, tn, len(foreign), len(rows), strings.Join(match, ","), head(foreign), owners, advice)
			}
			if len(unknown) > 0 {
				p.Errorf("%s as %s: %d rows returned match no row of the database read as its owner (e.g. %s): the oracle cannot attribute them", name, tn, len(unknown), head(unknown))
			}
			// COUNT(*) never counts a row that is not the tenant's.
			var n any
			if err := r.db.QueryRow(ctx, p.q(builder.Select(builder.CountAll()).From(r.ref(name, "c")).Build())).Scan(&n); err != nil {
				p.Errorf("COUNT(*) of %s as %s: %v", name, tn, err)
			} else if allowed := len(r.cat.rows[lt]) - r.cat.foreignCount(lt, r.g, tn.Grants); asInt(number(n)) > int64(allowed) {
				p.Errorf("COUNT(*) of %s (declared %s) as %s = %s; the live catalog gives it only %d rows that are not other tenants'", name, decl, tn, number(n), allowed)
			}
			r.extremesOwn(p, ctx, name, t, tn)
		}
		// The graph's reading must agree: no row it lets a tenant see may
		// be another tenant's by the catalog.
		if t.global {
			continue
		}
		for _, tn := range r.tenants {
			var bad []string
			for _, k := range sortedKeys(r.or.visible(name, tn.Grants)) {
				row := r.or.row(name, k)
				parts := make([]string, len(match))
				for i := range match {
					parts[i] = canon(row[t.cols[pos[i]]])
				}
				if f, _, _ := r.cat.foreignByKey(name, match, tuple(parts...), r.g, tn.Grants); f {
					bad = append(bad, k)
				}
			}
			if len(bad) > 0 {
				p.Errorf("%s: the graph's scope paths let %s see %d rows the live catalog attributes to other tenants only (%s)", name, tn, len(bad), head(bad))
			}
		}
	}
	for _, tn := range r.tenants {
		if own[tn.Name] == 0 {
			p.Errorf("vacuous: as %s no tenant-bound table returned a row; the check proves nothing for it", tn)
		}
	}
	if checked == 0 {
		p.Errorf("no table of the graph is in the database and unacknowledged: nothing was checked")
	}
	p.Logf("%d tables × %d tenants read through the guard (%d rows), attributed by the live catalog; acknowledged shared: %s", checked, len(r.tenants), rowsRead, sharedText(r.target.Shared))
}

// foreignCount counts the rows of table foreign to grants.
func (c *catOracle) foreignCount(table string, g *graph, grants []scope.Grant) int {
	n := 0
	for i := range c.rows[table] {
		if c.foreignRow(table, i, g, grants) {
			n++
		}
	}
	return n
}

func sharedText(m map[string]string) string {
	if len(m) == 0 {
		return "none"
	}
	var out []string
	for t, why := range m {
		out = append(out, fmt.Sprintf("%s (%s)", t, why))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// catForeign reports whether the row of a graph table with the Dataset key
// k (over the graph's primary key) belongs, by the live catalog, to other
// tenants than tn only; a table the run acknowledges as shared has none.
func (r *runner) catForeign(table, k string, tn Tenant) bool {
	if _, ok := r.target.Shared[table]; ok {
		return false
	}
	t := r.g.tables[table]
	if t == nil || len(t.pk) == 0 {
		return false
	}
	f, _, _ := r.cat.foreignByKey(table, t.pk, k, r.g, tn.Grants)
	return f
}

// extremesOwn checks values, not rows: MIN and MAX of every integer or
// text column of table, read through the guard as tn, are values that a
// row the live catalog does not give to other tenants holds (NULL when it
// has none). A foreign row's value would show here even if no row did.
// Columns of other types are left out: their text differs between the
// aggregate and the owner's read, and some have no MIN or MAX at all
// (PostgreSQL's json, jsonb, boolean and bytea).
func (r *runner) extremesOwn(p *pt, ctx context.Context, name string, t *tinfo, tn Tenant) {
	lt := strings.ToLower(name)
	ct := r.cat.tables[lt]
	for _, col := range t.cols {
		lc := strings.ToLower(col)
		if k := typeKind(ct.types[lc]); k != kindInt && !(k == kindText && characterType(ct.types[lc])) {
			continue
		}
		held := map[string]bool{}
		for i, row := range r.cat.rows[lt] {
			if v, ok := row[lc]; ok && !r.cat.foreignRow(lt, i, r.g, tn.Grants) {
				held[v.(string)] = true
			}
		}
		x := r.ref(name, "m")
		for _, agg := range []struct {
			name string
			fn   func(builder.Expr) builder.Expr
		}{{"MIN", builder.Min}, {"MAX", builder.Max}} {
			var v any
			if err := r.db.QueryRow(ctx, p.q(builder.Select(agg.fn(x.Col(col))).From(x).Build())).Scan(&v); err != nil {
				p.Errorf("%s(%s.%s) as %s: %v", agg.name, name, col, tn, err)
				continue
			}
			got := canon(v)
			if typeKind(ct.types[lc]) == kindInt {
				got = number(v)
			}
			if v != nil && !held[got] {
				p.Errorf("%s(%s.%s) as %s = %q, a value only rows of other tenants hold (by the live catalog)", agg.name, name, col, tn, got)
			}
		}
	}
}

// characterType reports whether a catalog type is a character type (char,
// varchar, text, clob and their spellings), the text columns that every
// engine orders and so aggregates with MIN and MAX.
func characterType(typ string) bool {
	t := strings.ToLower(typ)
	return strings.Contains(t, "char") || strings.Contains(t, "text") || strings.Contains(t, "clob") || strings.Contains(t, "string")
}
