package builder_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

// typedDef is hotelDef with declared types and a registered function, for
// the type checks of the scalar expressions.
func typedDef() builder.SchemaDef {
	def := hotelDef()
	def.Tables = append(def.Tables, builder.TableDef{Name: "stats", Columns: []string{"id", "hotel_id", "hits", "label", "ratio", "seen_at", "doc", "active"},
		PrimaryKey:  []string{"id"},
		ForeignKeys: []builder.ForeignKey{{Columns: []string{"hotel_id"}, RefTable: "hotels"}},
		Types: map[string]string{"id": "BIGINT", "hits": "INTEGER", "label": "VARCHAR(20)", "ratio": "DOUBLE PRECISION",
			"seen_at": "TIMESTAMP", "doc": "jsonb", "active": "BOOLEAN"}})
	def.Functions = []builder.FuncDef{{Name: "similarity", Args: []builder.Kind{builder.KindText, builder.KindText}, Result: builder.KindReal, Dialects: []string{"postgres"}}}
	return def
}

func TestScalarKinds(t *testing.T) {
	sch := builder.MustSchema(typedDef())
	s := sch.Table("stats")
	for _, tc := range []struct {
		e    builder.Expr
		want builder.Kind
	}{
		{s.Col("hits"), builder.KindInt},
		{s.Col("hits").Add(1), builder.KindInt},
		{s.Col("hits").Add(1.5), builder.KindReal},
		{s.Col("hits").Div(2), builder.KindReal},
		{s.Col("ratio").Mul(s.Col("hits")), builder.KindReal},
		{builder.Cast(s.Col("hits"), builder.AsText), builder.KindText},
		{builder.Length(s.Col("label")), builder.KindInt},
		{builder.Abs(s.Col("hits")), builder.KindInt},
		{builder.Extract(builder.PartYear, s.Col("seen_at")), builder.KindInt},
		{builder.JSONText(s.Col("doc"), "is_mobile"), builder.KindText},
		{builder.JSONNumber(s.Col("doc"), "a", "b"), builder.KindReal},
		{builder.Coalesce(s.Col("label"), "none"), builder.KindText},
		{builder.Case().When(s.Col("hits").Gt(3), s.Col("hits")).Else(0), builder.KindInt},
		{builder.RowNumber().Over(builder.Window()), builder.KindInt},
		{builder.Avg(s.Col("hits")).Over(builder.Window()), builder.KindReal},
		{sch.Func("similarity", s.Col("label"), "x"), builder.KindReal},
	} {
		if _, err := builder.Select(tc.e).From(s).Build(); err != nil {
			t.Errorf("%v: %v", tc.want, err)
			continue
		}
		if got := tc.e.Kind(); got != tc.want {
			t.Errorf("kind %v, want %v", got, tc.want)
		}
	}
}

// TestScalarRefusals: every constructor refuses what it cannot type or
// check, at Build, with ErrInvalid (ErrType for kinds).
func TestScalarRefusals(t *testing.T) {
	sch := builder.MustSchema(typedDef())
	s, r := sch.Table("stats"), sch.Table("rooms")
	win := builder.RowNumber().Over(builder.Window().OrderBy(s.Col("id").Asc()))
	withVal := s.Col("hits").Add(1)
	for name, tc := range map[string]struct {
		b    func() error
		want error
	}{
		"arithmetic on text":       {sel(s, s.Col("label").Add(1)), builder.ErrType},
		"arithmetic with text":     {sel(s, s.Col("hits").Add("1")), builder.ErrType},
		"arithmetic on json":       {sel(s, s.Col("doc").Mul(s.Col("hits"))), builder.ErrType},
		"arithmetic by text expr":  {sel(s, s.Col("hits").Sub(s.Col("label"))), builder.ErrType},
		"case mixes kinds":         {sel(s, builder.Case().When(s.Col("hits").Gt(1), s.Col("hits")).Else(s.Col("label"))), builder.ErrType},
		"case value of wrong kind": {sel(s, builder.Case().When(s.Col("hits").Gt(1), s.Col("hits")).Else("many")), builder.ErrType},
		"case without when":        {sel(s, builder.Case().Else(1)), builder.ErrInvalid},
		"coalesce of one":          {sel(s, builder.Coalesce(s.Col("hits"))), builder.ErrInvalid},
		"coalesce wrong value":     {sel(s, builder.Coalesce(s.Col("hits"), "x")), builder.ErrType},
		"nullif wrong value":       {sel(s, builder.NullIf(s.Col("active"), 3)), builder.ErrType},
		"zero cast type":           {sel(s, builder.Cast(s.Col("hits"), builder.CastType{})), builder.ErrInvalid},
		"lower of integer":         {sel(s, builder.Lower(s.Col("hits"))), builder.ErrType},
		"extract of bool":          {sel(s, builder.Extract(builder.PartDay, s.Col("active"))), builder.ErrType},
		"date trunc to hour":       {sel(s, builder.DateTrunc(builder.PartHour, s.Col("seen_at"))), builder.ErrInvalid},
		"unknown function":         {sel(s, sch.Func("pg_sleep", 1)), builder.ErrUnknownFunc},
		"function arity":           {sel(s, sch.Func("similarity", s.Col("label"))), builder.ErrInvalid},
		"function arg kind":        {sel(s, sch.Func("similarity", s.Col("hits"), "x")), builder.ErrType},
		"json on integer":          {sel(s, builder.JSONText(s.Col("hits"), "a")), builder.ErrType},
		"json key with quote":      {sel(s, builder.JSONText(s.Col("doc"), "a'||pg_sleep(1)||'")), builder.ErrInvalid},
		"json key with dot":        {sel(s, builder.JSONText(s.Col("doc"), "a.b")), builder.ErrInvalid},
		"json key with dollar":     {sel(s, builder.JSONText(s.Col("doc"), "$")), builder.ErrInvalid},
		"json without keys":        {sel(s, builder.JSONText(s.Col("doc"))), builder.ErrInvalid},
		"over a column":            {sel(s, s.Col("hits").Over(builder.Window())), builder.ErrInvalid},
		"window distinct":          {sel(s, builder.CountDistinct(s.Col("hits")).Over(builder.Window())), builder.ErrInvalid},
		"window in where": {func() error {
			_, err := builder.Select(s.Col("id")).From(s).Where(win.Gt(1)).Build()
			return err
		}, builder.ErrInvalid},
		"window in having": {func() error {
			_, err := builder.Select(builder.CountAll()).From(s).Having(win.Gt(1)).Build()
			return err
		}, builder.ErrInvalid},
		"window in group by": {func() error {
			_, err := builder.Select(builder.CountAll()).From(s).GroupBy(win).Build()
			return err
		}, builder.ErrInvalid},
		"window in aggregate": {sel(s, builder.Sum(win)), builder.ErrInvalid},
		"window in window":    {sel(s, builder.Rank().Over(builder.Window().OrderBy(win.Asc()))), builder.ErrInvalid},
		"window in join on": {func() error {
			_, err := builder.Select(s.Col("id")).From(s).Join(r, r.Col("id").EqCol(win)).Build()
			return err
		}, builder.ErrInvalid},
		"group by bound value not an item": {func() error {
			_, err := builder.Select(s.Col("hits").Add(1), builder.CountAll()).From(s).GroupBy(s.Col("hits").Add(1)).Build()
			return err
		}, builder.ErrInvalid},
		"scalar query of two columns":      {sel(s, builder.ScalarQuery(builder.Must(builder.Select(r.Col("id"), r.Col("number")).From(r).Build()))), builder.ErrInvalid},
		"scalar query zero":                {sel(s, builder.ScalarQuery(builder.Query{})), builder.ErrInvalid},
		"set expr on level-path fk column": {upd(s, "hotel_id", s.Col("hotel_id").Add(1)), builder.ErrScopeColumn},
		"set expr on level column": {func() error {
			h := sch.Table("hotels")
			_, err := builder.UpdateTable(h).SetExpr("chain_id", builder.Lower(h.Col("name"))).Where(h.Col("id").Eq(1)).Build()
			return err
		}, builder.ErrScopeColumn},
		"set expr reads another table": {upd(s, "hits", r.Col("id").Add(1)), builder.ErrInvalid},
		"set expr with subquery":       {upd(s, "hits", builder.ScalarQuery(builder.Must(builder.Select(builder.CountAll()).From(r).Build()))), builder.ErrInvalid},
		"set expr with aggregate":      {upd(s, "hits", builder.Max(s.Col("hits"))), builder.ErrInvalid},
		"set expr kind":                {upd(s, "hits", builder.Lower(s.Col("label"))), builder.ErrInvalid},
		"set expr unknown column":      {upd(s, "nope", withVal), builder.ErrInvalid},
	} {
		err := tc.b()
		if !errors.Is(err, tc.want) || !errors.Is(err, builder.ErrInvalid) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
	// The values themselves never appear in type errors.
	_, err := builder.Select(builder.Coalesce(s.Col("hits"), "s3cr3t")).From(s).Build()
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error echoes the value: %v", err)
	}
}

func sel(t builder.TableRef, e builder.Expr) func() error {
	return func() error {
		_, err := builder.Select(e).From(t).Build()
		return err
	}
}

func upd(t builder.TableRef, col string, e builder.Expr) func() error {
	return func() error {
		_, err := builder.UpdateTable(t).SetExpr(col, e).Where(t.Col("id").Eq(1)).Build()
		return err
	}
}

func TestFuncDefValidation(t *testing.T) {
	for name, fd := range map[string]builder.FuncDef{
		"upper case name": {Name: "Similarity", Dialects: []string{"postgres"}},
		"quote in name":   {Name: "f'x", Dialects: []string{"postgres"}},
		"empty name":      {Name: "", Dialects: []string{"postgres"}},
		"builtin":         {Name: "lower", Dialects: []string{"postgres"}},
		"unknown dialect": {Name: "f", Dialects: []string{"oracle"}},
		"no dialect":      {Name: "f"},
		"bad result kind": {Name: "f", Result: 99, Dialects: []string{"sqlite"}},
		"bad arg kind":    {Name: "f", Args: []builder.Kind{-1}, Dialects: []string{"sqlite"}},
	} {
		def := hotelDef()
		def.Functions = []builder.FuncDef{fd}
		if _, err := builder.NewSchema(def); !errors.Is(err, builder.ErrSchema) {
			t.Errorf("%s: err = %v, want ErrSchema", name, err)
		}
	}
	def := hotelDef()
	def.Functions = []builder.FuncDef{{Name: "f", Dialects: []string{"sqlite"}}, {Name: "f", Dialects: []string{"mysql"}}}
	if _, err := builder.NewSchema(def); !errors.Is(err, builder.ErrSchema) {
		t.Errorf("duplicate: err = %v, want ErrSchema", err)
	}
}

// TestScalarTables: the references inside expressions (a scalar subquery,
// an EXISTS inside a CASE) are the statement's, so the guard must confine
// them; a subquery used twice is refused.
func TestScalarTables(t *testing.T) {
	sch := builder.MustSchema(typedDef())
	h, r, b := sch.Table("hotels"), sch.Table("rooms"), sch.Table("bookings")
	rooms := builder.Must(builder.Select(builder.CountAll()).From(r).Where(r.Col("hotel_id").EqCol(h.Col("id"))).Build())
	booked := builder.Must(builder.Select(b.Col("id")).From(b).Where(b.Col("room_id").Eq(1)).Build())
	q, err := builder.Select(h.Col("id"), builder.ScalarQuery(rooms).As("n"),
		builder.Case().When(builder.Exists(booked), "busy").Else("idle").As("state")).From(h).Build()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tr := range q.Tables() {
		names = append(names, tr.Name())
	}
	if strings.Join(names, ",") != "hotels,rooms,bookings" {
		t.Errorf("tables %v", names)
	}
	if _, err := builder.Select(builder.ScalarQuery(rooms), builder.ScalarQuery(rooms)).From(h).Build(); !errors.Is(err, builder.ErrInvalid) {
		t.Errorf("subquery used twice: %v", err)
	}
	if !rooms.Correlated() {
		t.Error("correlated subquery not marked")
	}
	// A scalar subquery correlated with a table the query does not declare
	// makes the query itself correlated: usable only as a subquery, and
	// refused by guardedsql as a statement.
	st := sch.Table("stats")
	r2 := sch.Table("rooms").As("r2")
	odd := builder.Must(builder.Select(builder.CountAll()).From(r2).Where(r2.Col("id").EqCol(st.Col("id"))).Build())
	q2, err := builder.Select(builder.ScalarQuery(odd)).From(sch.Table("hotels").As("h2")).Build()
	if err != nil || !q2.Correlated() {
		t.Errorf("outer reference through a scalar subquery: err %v, correlated %v", err, q2.Correlated())
	}
}
