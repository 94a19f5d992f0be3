package guardedsql_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	gmysql "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/sqlite"
)

// engineTexts are fragments of engine messages that must not reach tool
// code: they come with values.
var engineTexts = []string{"Duplicate entry", "UNIQUE constraint failed", "Key (", "Truncated incorrect", "Incorrect integer value", "invalid input syntax", "violates"}

// TestEngineErrorsTyped: on every engine, the engine's refusals reach tool
// code as typed errors naming the schema's identifiers, never the
// engine's text: a unique violation (a payment id another tenant's row
// holds, which the text would confirm) is ErrConflict, deleting a hotel
// that rooms reference is ErrReferenced, a NOT NULL violation is
// ErrInvalidValue naming the column, and an integer column given text is
// ErrInvalidValue where the engine checks types.
func TestEngineErrorsTyped(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.newHotel(t)
		acme := grantCtx(chainG("acme"))
		var foreignPayment int64
		for _, p := range h.m.payments {
			for _, b := range h.m.bookings {
				if b.ID == p.Booking && h.m.hotelOf(b.Room).Chain == "globex" && foreignPayment == 0 {
					foreignPayment = p.ID
				}
			}
		}
		var ownRoom int64
		for _, r := range h.m.rooms {
			if r.Hotel == hotelOfChain(h, "acme") {
				ownRoom = r.ID
				break
			}
		}
		pay := h.sch.Table("payments")
		rooms := h.sch.Table("rooms")
		hotels := h.sch.Table("hotels")
		check := func(t *testing.T, err error, want error, column string) {
			t.Helper()
			var ee *guardedsql.EngineError
			if !errors.Is(err, want) || !errors.As(err, &ee) {
				t.Fatalf("err = %v, want %v as an EngineError", err, want)
			}
			if column != "" && ee.Column != column {
				t.Errorf("column %q, want %q (%v)", ee.Column, column, err)
			}
			for _, s := range engineTexts {
				if strings.Contains(err.Error(), s) {
					t.Errorf("engine text %q in %v", s, err)
				}
			}
		}
		t.Run("conflict", func(t *testing.T) {
			_, err := h.db.Exec(acme, builder.Must(builder.InsertInto(pay).Columns("id", "booking_id", "amount", "method").
				Values(foreignPayment, bookingOf(h, "acme"), int64(1), "card").Build()))
			check(t, err, guardedsql.ErrConflict, "")
		})
		t.Run("referenced", func(t *testing.T) {
			_, err := h.db.Exec(acme, builder.Must(builder.DeleteFrom(hotels).Where(hotels.Col("id").Eq(hotelOfChain(h, "acme"))).Build()))
			check(t, err, guardedsql.ErrReferenced, "")
		})
		t.Run("not null", func(t *testing.T) {
			_, err := h.db.Exec(acme, builder.Must(builder.UpdateTable(rooms).Set("number", nil).Where(rooms.Col("id").Eq(ownRoom)).Build()))
			check(t, err, guardedsql.ErrInvalidValue, "number")
		})
		if e.name != "sqlite" { // SQLite stores the text as is
			t.Run("type", func(t *testing.T) {
				_, err := h.db.Exec(acme, builder.Must(builder.UpdateTable(rooms).Set("rate", "abc").Where(rooms.Col("id").Eq(ownRoom)).Build()))
				check(t, err, guardedsql.ErrInvalidValue, "")
				if strings.Contains(err.Error(), "abc") {
					t.Errorf("value in %v", err)
				}
			})
		}
	})
}

// TestMariaDBEngineErrorsCarryNoForeignValue: on MariaDB, in strict and
// non-strict sql_mode, guarded statements whose WHERE compares a text
// column with a number (directly, and through an EXISTS subquery over
// another table reference) make the engine evaluate the comparison on
// rows of any tenant, and its error quotes the value it failed to convert
// ("Truncated incorrect DOUBLE value: '<another tenant's email>'"). No
// such value reaches tool code (the returned error) or the operational
// log, and the other tenant's row is untouched.
func TestMariaDBEngineErrorsCarryNoForeignValue(t *testing.T) {
	h := newMySQLHotel(t, engineMySQL.dsn(t), seedModel(2, 1, 1, 1))
	ctx := context.Background()
	const foreign = "hank.scorpio@globex.example"
	if _, err := h.raw.ExecContext(ctx, `INSERT INTO guests (chain_id, name, email) VALUES ('globex', 'Hank', ?), ('acme', 'Ann', 'ann@acme.example')`, foreign); err != nil {
		t.Fatal(err)
	}
	var dbName string
	if err := h.raw.QueryRowContext(ctx, `SELECT DATABASE()`).Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	admin, err := gmysql.Config(engineMySQL.dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	guests := h.sch.Table("guests")
	g2 := h.sch.Table("guests").As("g2")
	stmts := map[string]builder.Statement{
		"update where text = number": builder.Must(builder.UpdateTable(guests).Set("name", "x").Where(guests.Col("email").Eq(int64(5))).Build()),
		"update where exists (text = number)": builder.Must(builder.UpdateTable(guests).Set("name", "x").Where(builder.Exists(
			builder.Must(builder.Select(g2.Col("id")).From(g2).Where(g2.Col("email").Eq(int64(5))).Build()))).Build()),
		"delete where text > number": builder.Must(builder.DeleteFrom(guests).Where(guests.Col("email").Gt(int64(5))).Build()),
		"select where text = number": builder.Must(builder.Select(guests.Col("id")).From(guests).Where(guests.Col("email").Eq(int64(5))).Build()),
	}
	for _, mode := range []string{"STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION", "NO_ENGINE_SUBSTITUTION"} {
		t.Run(mode, func(t *testing.T) {
			cfg := admin.Clone()
			cfg.DBName = dbName
			cfg.Params = map[string]string{"sql_mode": "'" + mode + "'"}
			conn, err := mysql.NewConnector(cfg)
			if err != nil {
				t.Fatal(err)
			}
			raw := sql.OpenDB(conn)
			defer raw.Close()
			logs := &bytes.Buffer{}
			db, err := gmysql.New(ctx, raw, h.sch, guardedsql.Options{
				Logger:        slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				LogStatements: true, // the statement log, too, must not carry a value
			})
			if err != nil {
				t.Fatal(err)
			}
			acme := grantCtx(chainG("acme"))
			errs := 0
			for name, st := range stmts {
				var err error
				switch st := st.(type) {
				case builder.Query:
					_, err = guardedsql.All(acme, db, st, guardedsql.Scalar[int64])
				case builder.Mutation:
					_, err = db.Exec(acme, st)
				}
				if err == nil {
					continue
				}
				errs++
				if !errors.Is(err, guardedsql.ErrInvalidValue) && !errors.Is(err, guardedsql.ErrEngine) {
					t.Errorf("%s: err = %v, want a typed engine error", name, err)
				}
				if strings.Contains(err.Error(), "@") || strings.Contains(err.Error(), "hank") {
					t.Errorf("%s: a value reached tool code: %v", name, err)
				}
			}
			// Since issue 26 the writes read their keys first with a SELECT
			// (which converts without failing) and write only those rows,
			// so strict mode may raise nothing at all; the statements must
			// still have run.
			if n := strings.Count(logs.String(), "guardedsql statement"); n < len(stmts) {
				t.Errorf("%d statements logged for %d probes (and %d errors): the test proves nothing", n, len(stmts), errs)
			}
			if out := logs.String(); strings.Contains(out, "hank") || strings.Contains(out, "globex.example") {
				t.Errorf("a foreign value reached the log:\n%s", out)
			}
			var name string
			if err := h.raw.QueryRowContext(ctx, `SELECT name FROM guests WHERE email = ?`, foreign).Scan(&name); err != nil || name != "Hank" {
				t.Errorf("the other tenant's guest: %q %v", name, err)
			}
		})
	}
}

// TestUniqueOraclesReported: at open, every engine reports the unique keys
// of tenant-bound tables that lack the tenant path column (a unique
// payments (method, id), the primary key payments.id) and not those that
// include it (guests (chain_id, id)), nor keys of global tables.
func TestUniqueOraclesReported(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		h := e.newHotel(t)
		ctx := context.Background()
		for _, s := range oracleIndexes {
			if _, err := h.raw.ExecContext(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		logs := &bytes.Buffer{}
		logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})) // acknowledged keys log at debug
		open := func(sch *builder.Schema) (*guardedsql.DB, error) {
			switch e.name {
			case "sqlite":
				return sqlite.New(ctx, h.raw, sch, guardedsql.Options{Logger: logger})
			case "mysql":
				return gmysql.New(ctx, h.raw, sch, guardedsql.Options{Logger: logger})
			}
			t.Skip("covered by TestPostgresUniqueOracles (needs the app role)")
			return nil, nil
		}
		_, err := open(h.sch)
		checkSharedUniqueRefused(t, err)
		db, err := open(oracleAckedSchema())
		if err != nil {
			t.Fatal(err)
		}
		checkOracles(t, db.UniqueOracles(), logs.String())
	})
}

// oracleIndexes are unique keys checkOracles expects to be reported (the
// first) or not (a key with the tenant column, a global table's).
var oracleIndexes = []string{
	`CREATE UNIQUE INDEX payments_method ON payments (method, id)`,
	`CREATE UNIQUE INDEX guests_chain_id ON guests (chain_id, id)`,
	`CREATE UNIQUE INDEX countries_name ON countries (name)`,
}

// oracleAckedSchema is hotelDef with payments' unique key (method, id) of
// oracleIndexes acknowledged as shared.
func oracleAckedSchema() *builder.Schema {
	def := hotelDef
	def.Tables = slices.Clone(hotelDef.Tables)
	for i := range def.Tables {
		if def.Tables[i].Name == "payments" {
			def.Tables[i].SharedUnique = map[string]string{"method,id": "whether a payment id exists (ids are drawn from one sequence)"}
		}
	}
	return builder.MustSchema(def)
}

// checkSharedUniqueRefused: Open refused the unacknowledged shared key of
// oracleIndexes, naming its table and columns, and only that one.
func checkSharedUniqueRefused(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, guardedsql.ErrSharedUnique) || !errors.Is(err, guardedsql.ErrCatalog) ||
		!strings.Contains(err.Error(), "payments unique key") || !strings.Contains(err.Error(), "(method,id)") {
		t.Fatalf("Open with an unacknowledged payments (method, id): err = %v, want ErrSharedUnique naming it", err)
	}
	if strings.Contains(err.Error(), "guests") || strings.Contains(err.Error(), "countries") {
		t.Errorf("a key with the tenant column, or of a global table, refused: %v", err)
	}
}

func checkOracles(t *testing.T, got []guardedsql.UniqueOracle, logs string) {
	t.Helper()
	has := func(table, cols string) bool {
		for _, o := range got {
			if o.Table == table && strings.Join(o.Columns, ",") == cols {
				return true
			}
		}
		return false
	}
	if !has("payments", "method,id") || !has("payments", "id") {
		t.Errorf("missing oracles in %+v", got)
	}
	if has("guests", "chain_id,id") || has("countries", "name") || has("chains", "id") || has("hotels", "id") {
		t.Errorf("keys with the tenant column, or of global tables, reported: %+v", got)
	}
	if !strings.Contains(logs, "table=payments") || !strings.Contains(logs, "columns=method,id") {
		t.Errorf("not logged:\n%s", logs)
	}
}

// TestRestrictIsReferenced: deleting a row that a foreign key declared ON
// DELETE RESTRICT protects is ErrReferenced on every engine (SQLite
// reports RESTRICT with the code of a trigger's refusal, 1811, not the
// foreign key's, 787), with no engine text.
func TestRestrictIsReferenced(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine) {
		s := newScratch(t, e, []string{
			`CREATE TABLE stores (id INT_T PRIMARY KEY, chain_id KEY_T NOT NULL)`,
			`CREATE TABLE customers (id INT_T PRIMARY KEY, store_id INT_T NOT NULL, FOREIGN KEY (store_id) REFERENCES stores(id) ON DELETE RESTRICT ON UPDATE RESTRICT)`,
			`INSERT INTO stores VALUES (1, 'acme'), (2, 'acme')`,
			`INSERT INTO customers VALUES (10, 1)`,
		})
		sch := builder.MustSchema(builder.SchemaDef{
			Levels: []builder.Level{{Name: "chain", Key: builder.TextKey}},
			Tables: []builder.TableDef{
				{Name: "stores", Columns: []string{"id", "chain_id"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"chain_id": "chain"}},
				{Name: "customers", Columns: []string{"id", "store_id"}, PrimaryKey: []string{"id"},
					ForeignKeys: []builder.ForeignKey{{Columns: []string{"store_id"}, RefTable: "stores"}}},
			},
		})
		db, err := s.open(sch)
		if err != nil {
			t.Fatal(err)
		}
		stores := sch.Table("stores")
		_, err = db.Exec(grantCtx(chainG("acme")), builder.Must(builder.DeleteFrom(stores).Where(stores.Col("id").Eq(1)).Build()))
		var ee *guardedsql.EngineError
		if !errors.Is(err, guardedsql.ErrReferenced) || !errors.As(err, &ee) || strings.Contains(err.Error(), "constraint failed") {
			t.Fatalf("deleting a store its customer references ON DELETE RESTRICT: err = %v, want ErrReferenced without engine text", err)
		}
		// Control: the unreferenced store goes.
		if res, err := db.Exec(grantCtx(chainG("acme")), builder.Must(builder.DeleteFrom(stores).Where(stores.Col("id").Eq(2)).Build())); err != nil || res.RowsAffected != 1 {
			t.Fatalf("deleting the unreferenced store: %v, %v", res, err)
		}
	})
}
