package server_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

var sch = builder.MustSchema(builder.SchemaDef{
	Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
	Tables: []builder.TableDef{
		{Name: "guests", Columns: []string{"id", "chain_id", "full_name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
		{Name: "bookings", Columns: []string{"id", "guest_id", "check_in"}, PrimaryKey: []string{"id"},
			ForeignKeys: []builder.ForeignKey{{Columns: []string{"guest_id"}, RefTable: "guests"}}, Parent: "guest_id"},
	},
})

// readme:begin (the README's "A tool in twenty lines" is these regions; TestReadmeToolIsExampleAddTool keeps it so)
type ListIn struct {
	From string `json:"from" jsonschema:"earliest check-in, YYYY-MM-DD"`
}

type ListOut struct {
	Bookings []Booking `json:"bookings"`
}

type Booking struct {
	ID    int64  `json:"id"`
	Guest string `json:"guest" pii:"name"` // redacted unless the caller's role may see names
}

// readme:end

// A complete tool: typed input and output, a query built only from the
// schema, run through the guard. Nothing in it names a tenant.
func ExampleAddTool() {
	srv := exampleServer() // a *server.Server from server.New(server.Options{Verifier: …, DB: …})

	// readme:begin
	err := server.AddTool(srv, server.Tool{Name: "list_bookings", Description: "Bookings from a date."},
		func(ctx context.Context, db *guardedsql.DB, in ListIn) (ListOut, error) {
			b, g := sch.Table("bookings").As("b"), sch.Table("guests").As("g")
			q, err := builder.Select(b.Col("id"), g.Col("full_name")).From(b).
				Join(g, g.Col("id").EqCol(b.Col("guest_id"))).
				Where(b.Col("check_in").Ge(in.From)).Limit(50).Build()
			if err != nil {
				return ListOut{}, err
			}
			rows, err := db.Query(ctx, q) // tenant predicates for bookings AND guests are added here
			if err != nil {
				return ListOut{}, err
			}
			bs, err := guardedsql.CollectRows(rows, func(r *guardedsql.Rows) (b Booking, err error) {
				err = r.Scan(&b.ID, &b.Guest)
				return
			})
			return ListOut{Bookings: bs}, err
		})
	// readme:end
	fmt.Println(err)

	// An input that names a tenant does not register.
	type BadIn struct {
		ChainID string `json:"chain_id"`
	}
	err = server.AddTool(srv, server.Tool{Name: "bad"}, func(context.Context, *guardedsql.DB, BadIn) (ListOut, error) {
		return ListOut{}, nil
	})
	fmt.Println(err)
	// Output:
	// <nil>
	// server: tool "bad": input property "/chain_id" is the scope key "chain_id"; tenant scope comes only from the verified token
}

// A tool that asks the person behind the client before it acts, through
// MCP multi round-trip requests: the first pass returns Input's error (the
// client gets an input-required result), the client's retry brings the
// answer, verified against the signed requestState.
func ExampleInput() {
	srv := exampleServer()
	type CancelIn struct {
		ID int64 `json:"id"`
	}
	type CancelOut struct {
		Cancelled bool `json:"cancelled"`
	}
	err := server.AddTool(srv, server.Tool{Name: "cancel_booking"},
		func(ctx context.Context, db *guardedsql.DB, in CancelIn) (CancelOut, error) {
			answers, err := server.Input(ctx, mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
				Message:         fmt.Sprintf("Cancel booking %d?", in.ID),
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{"yes":{"type":"boolean"}},"required":["yes"]}`),
			}})
			if err != nil {
				return CancelOut{}, err // ErrInputRequired: ask; ErrInputUnsupported: the client cannot be asked
			}
			res, ok := answers["confirm"].(*mcp.ElicitResult)
			if !ok || res.Action != "accept" || res.Content["yes"] != true {
				return CancelOut{}, nil // declined, cancelled, or not a yes
			}
			// … cancel it through db …
			return CancelOut{Cancelled: true}, nil
		})
	fmt.Println(err)
	// Output:
	// <nil>
}
