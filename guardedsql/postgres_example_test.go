package guardedsql_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// On PostgreSQL two roles take part. The tables' owner installs the
// row-level security policies generated from the schema graph (once, as a
// migration would); the server connects as an application role that is
// neither superuser nor BYPASSRLS and does not own the tables. postgres.New
// checks exactly that, and refuses to start otherwise.
func Example_newPostgres() {
	ctx := context.Background()
	sch := builder.MustSchema(hotelDef)

	// The scope-signing key, from the application's secret store
	// (postgres.NewKey made it; Text is its stored form).
	key, err := postgres.ParseKey(os.Getenv("HOTEL_RLS_KEY"))
	if err != nil {
		log.Fatal(err)
	}

	// Migration, as the owner of the tables: policies, the verifying
	// function, the key table and the key.
	owner, err := pgxpool.New(ctx, "postgres://hotel_owner@db.internal:5432/hotel")
	if err != nil {
		log.Fatal(err)
	}
	if err := postgres.ApplyRLS(ctx, owner, sch, postgres.Options{Key: key}); err != nil {
		log.Fatal(err)
	}
	owner.Close()

	// The server, as the application role.
	app, err := pgxpool.New(ctx, "postgres://hotel_app@db.internal:5432/hotel")
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close()
	db, err := postgres.New(ctx, app, sch, guardedsql.Options{Engine: postgres.Options{Key: key}})
	if errors.Is(err, postgres.ErrRLSUnsafe) {
		log.Fatalf("refusing to serve: %v", err) // e.g. connected as a superuser
	}
	if err != nil {
		log.Fatal(err)
	}

	// A request: the scope comes from the verified token (scopetest here).
	reqCtx := scopetest.NewContext(ctx, scopetest.New("alice", []scope.Grant{{Level: "chain", ID: "acme"}}))
	b := sch.Table("bookings").As("b")
	q := builder.Must(builder.Select(b.Col("id"), b.Col("check_in")).From(b).
		Where(b.Col("status").Eq("confirmed")).OrderBy(b.Col("check_in").Asc()).Limit(20).Build())
	rows, err := db.Query(reqCtx, q)
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var checkIn string
		if err := rows.Scan(&id, &checkIn); err != nil {
			log.Fatal(err)
		}
		fmt.Println(id, checkIn)
	}
	if err := rows.Err(); err != nil {
		log.Fatal(err)
	}
}

// Open picks the engine from the DSN. For PostgreSQL it runs the same
// start-up check as NewPostgres; the policies must already be installed
// (ApplyRLS, or RLSDDL in a migration).
func ExampleOpen_postgres() {
	ctx := context.Background()
	sch := builder.MustSchema(hotelDef)
	db, err := guardedsql.Open(ctx, "postgres://hotel_app:secret@db.internal:5432/hotel?sslmode=verify-full", sch, guardedsql.Options{})
	if err != nil {
		log.Fatal(err) // e.g. ErrRLSPolicyMissing: the migration did not run
	}
	defer db.Close()
	// MySQL and MariaDB: the guard alone, JSON_TABLE expansion.
	my, err := guardedsql.Open(ctx, "mysql://hotel_app:secret@tcp(db.internal:3306)/hotel?parseTime=true", sch, guardedsql.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer my.Close()
}
