package builder_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

var writesDef = builder.SchemaDef{
	Levels: []builder.Level{{Name: "company", Key: builder.IntKey}},
	Tables: []builder.TableDef{
		{Name: "companies", Columns: []string{"id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "company"}},
		{Name: "campaigns", Columns: []string{"company_id", "id", "name", "budget"}, PrimaryKey: []string{"company_id", "id"},
			Unique:      [][]string{{"name"}},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"company_id"}, RefTable: "companies"}},
			Levels:      map[string]string{"company_id": "company"}},
	},
}

// TestWritesBuild: Returning, OnConflict and Select build what they say
// and refuse what the guard could not check.
func TestWritesBuild(t *testing.T) {
	sch := builder.MustSchema(writesDef)
	cmp := sch.Table("campaigns")
	ins := func() builder.InsertBuilder {
		return builder.InsertInto(cmp).Columns("company_id", "id", "name", "budget").Values(1, 2, "x", 3)
	}
	sel := func(cols ...string) builder.Query {
		var es []builder.Selectable
		for _, c := range cols {
			es = append(es, cmp.Col(c))
		}
		q, err := builder.Select(es...).From(cmp).Build()
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	ok := map[string]func() (builder.Mutation, error){
		"insert returning": func() (builder.Mutation, error) { return ins().Returning("company_id", "id").Build() },
		"update returning": func() (builder.Mutation, error) {
			return builder.UpdateTable(cmp).Set("budget", 1).Where(cmp.Col("id").Eq(1)).Returning("budget").Build()
		},
		"delete returning": func() (builder.Mutation, error) {
			return builder.DeleteFrom(cmp).Where(cmp.Col("id").Eq(1)).Returning("id").Build()
		},
		"upsert on the primary key": func() (builder.Mutation, error) {
			return ins().OnConflict("id", "company_id").DoUpdate("name", "budget").Build()
		},
		"upsert on a unique key": func() (builder.Mutation, error) { return ins().OnConflict("name").DoUpdate("budget").Build() },
		"upsert do nothing":      func() (builder.Mutation, error) { return ins().OnConflict("name").DoNothing().Build() },
		"insert select": func() (builder.Mutation, error) {
			return builder.InsertInto(cmp).Columns("company_id", "id", "name", "budget").Select(sel("company_id", "id", "name", "budget")).Build()
		},
		"insert select and upsert": func() (builder.Mutation, error) {
			return builder.InsertInto(cmp).Columns("company_id", "id", "name", "budget").Select(sel("company_id", "id", "name", "budget")).OnConflict("name").DoNothing().Build()
		},
	}
	for name, build := range ok {
		if _, err := build(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	m, _ := ins().Returning("id", "name").Build()
	if got := builder.Returns(m); !slices.Equal(got, []string{"id", "name"}) {
		t.Errorf("Returns = %v", got)
	}
	if got := builder.Returns(must(ins().Build())); got != nil {
		t.Errorf("Returns without Returning = %v", got)
	}
	bad := map[string]struct {
		build func() (builder.Mutation, error)
		says  string
	}{
		"returning unknown column": {func() (builder.Mutation, error) { return ins().Returning("secret").Build() }, `no column "secret"`},
		"returning nothing":        {func() (builder.Mutation, error) { return ins().Returning().Build() }, "Returning without columns"},
		"returning twice":          {func() (builder.Mutation, error) { return ins().Returning("id", "id").Build() }, "given twice"},
		"update returning unknown": {func() (builder.Mutation, error) {
			return builder.UpdateTable(cmp).Set("budget", 1).Where(cmp.Col("id").Eq(1)).Returning("nope").Build()
		}, `no column "nope"`},
		"delete returning unknown": {func() (builder.Mutation, error) {
			return builder.DeleteFrom(cmp).Where(cmp.Col("id").Eq(1)).Returning("nope").Build()
		}, `no column "nope"`},
		"upsert assigns the level column": {func() (builder.Mutation, error) { return ins().OnConflict("name").DoUpdate("company_id").Build() }, "decides the row's tenant"},
		"upsert assigns its target":       {func() (builder.Mutation, error) { return ins().OnConflict("name").DoUpdate("name").Build() }, "conflict column"},
		"upsert target not a key":         {func() (builder.Mutation, error) { return ins().OnConflict("budget").DoNothing().Build() }, "not the primary key or a unique key"},
		"upsert target part of a key":     {func() (builder.Mutation, error) { return ins().OnConflict("id").DoNothing().Build() }, "not the primary key or a unique key"},
		"upsert without target":           {func() (builder.Mutation, error) { return ins().OnConflict().DoNothing().Build() }, "without columns"},
		"upsert without assignments":      {func() (builder.Mutation, error) { return ins().OnConflict("name").DoUpdate().Build() }, "DoUpdate without columns"},
		"upsert target not inserted": {func() (builder.Mutation, error) {
			return builder.InsertInto(cmp).Columns("company_id", "id", "budget").Values(1, 2, 3).OnConflict("name").DoNothing().Build()
		}, "not among Columns"},
		"upsert assigns a column not inserted": {func() (builder.Mutation, error) {
			return builder.InsertInto(cmp).Columns("company_id", "id", "budget").Values(1, 2, 3).OnConflict("company_id", "id").DoUpdate("name").Build()
		}, "not among Columns"},
		"insert select column count": {func() (builder.Mutation, error) {
			return builder.InsertInto(cmp).Columns("company_id", "id", "name", "budget").Select(sel("company_id", "id")).Build()
		}, "produces 2 columns for 4 Columns"},
		"insert select and values": {func() (builder.Mutation, error) {
			return ins().Select(sel("company_id", "id", "name", "budget")).Build()
		}, "both Values and Select"},
		"insert select of a zero query": {func() (builder.Mutation, error) {
			return builder.InsertInto(cmp).Columns("id").Select(builder.Query{}).Build()
		}, "zero Query"},
	}
	for name, c := range bad {
		_, err := c.build()
		if !errors.Is(err, builder.ErrInvalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: err = %v, want ErrInvalid saying %q", name, err, c.says)
		}
	}
}

func must(m builder.Insert, err error) builder.Insert {
	if err != nil {
		panic(err)
	}
	return m
}
