package server_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/server"
)

// twoLevels is a schema whose levels ("agency", "desk") are in none of
// DefaultScopeKeys, so only the schema can make them forbidden inputs.
var twoLevels = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: "agency", Key: builder.TextKey}, {Name: "desk", Key: builder.TextKey}},
	Tables: []builder.TableDef{{Name: "files", Columns: []string{"id", "agency_id", "desk_id", "body"}, PrimaryKey: []string{"id"},
		Levels: map[string]string{"agency_id": "agency", "desk_id": "desk"}}},
})

func levelsServer(t *testing.T, m claims.Mapping, levels []string) (*server.Server, error) {
	t.Helper()
	is, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: "https://files.test/mcp", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Close() })
	v, err := claims.New(claims.Options{Issuer: is.URL, Audience: []string{is.Audience}, JWKS: is.JWKS(), Mapping: m})
	if err != nil {
		t.Fatal(err)
	}
	db, err := guardedsql.Open(context.Background(), "sqlite::memory:", twoLevels, guardedsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return server.New(server.Options{Name: "files", Verifier: v, DB: db, Levels: levels, Logger: slog.New(slog.DiscardHandler), AuditLogger: slog.New(slog.DiscardHandler)})
}

// TestLevelsDerivedFromSchema: with Options.Levels unset, the schema's
// levels (and "<level>_id") are forbidden tool inputs, exactly as if they
// had been configured; a listing in another order is the same set.
func TestLevelsDerivedFromSchema(t *testing.T) {
	type DeskInput struct {
		DeskID string `json:"desk_id"`
	}
	type AgencyInput struct {
		Agency string `json:"agency"`
	}
	for _, levels := range [][]string{nil, {"desk", "agency"}} {
		srv, err := levelsServer(t, claims.Mapping{Patterns: []string{"/a/{agency}/d/{desk}"}}, levels)
		if err != nil {
			t.Fatalf("levels %q: %v", levels, err)
		}
		if err := server.AddTool(srv, server.Tool{Name: "desk"}, func(context.Context, *guardedsql.DB, DeskInput) (empty, error) { return empty{}, nil }); !errors.Is(err, server.ErrTenantInInput) {
			t.Fatalf("levels %q: desk_id accepted as an input: %v", levels, err)
		}
		if err := server.AddTool(srv, server.Tool{Name: "agency"}, func(context.Context, *guardedsql.DB, AgencyInput) (empty, error) { return empty{}, nil }); !errors.Is(err, server.ErrTenantInInput) {
			t.Fatalf("levels %q: agency accepted as an input: %v", levels, err)
		}
	}
}

// TestLevelsMismatchRefused: Options.Levels that are not the schema's, an
// invalid level name, and a claims mapping granting a level the schema
// lacks are each refused by New with ErrLevels (and ErrConfig), naming the
// offending level.
func TestLevelsMismatchRefused(t *testing.T) {
	good := claims.Mapping{Patterns: []string{"/a/{agency}/d/{desk}"}}
	cases := []struct {
		name    string
		m       claims.Mapping
		levels  []string
		mention string
	}{
		{"subset", good, []string{"agency"}, `"agency"`},
		{"superset", good, []string{"agency", "desk", "room"}, `"room"`},
		{"other", good, []string{"agency", "dsk"}, `"dsk"`},
		{"invalid name", good, []string{"Agency", "desk"}, `"Agency"`},
		{"pattern typo", claims.Mapping{Patterns: []string{"/a/{agncy}"}}, nil, `"agncy"`},
		{"declared mapping levels", claims.Mapping{Patterns: []string{"/a/{agency}"}, Levels: []string{"agency", "team"}}, nil, `"team"`},
		{"table grant", claims.Mapping{Table: map[string]scope.Grant{"g1": {Level: "room", ID: "7"}}}, nil, `"room"`},
		{"table ancestor", claims.Mapping{Table: map[string]scope.Grant{"g1": {Level: "desk", ID: "7", Within: []scope.Grant{{Level: "firm", ID: "x"}}}}}, nil, `"firm"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := levelsServer(t, c.m, c.levels)
			if !errors.Is(err, server.ErrLevels) || !errors.Is(err, server.ErrConfig) {
				t.Fatalf("err = %v, want ErrLevels", err)
			}
			if !strings.Contains(err.Error(), c.mention) {
				t.Fatalf("error does not name %s: %v", c.mention, err)
			}
		})
	}
	// The controls: the same mappings against the right levels start.
	for _, m := range []claims.Mapping{good, {Table: map[string]scope.Grant{"g1": {Level: "desk", ID: "7", Within: []scope.Grant{{Level: "agency", ID: "x"}}}}}} {
		if _, err := levelsServer(t, m, nil); err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
	}
}
