package guardedsql_test

import (
	"context"
	"encoding/hex"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	pgdialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/postgres"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

// writeCounter counts the writes on the connections it dialled: pgx
// writes a request (a query, a pipelined batch) in one write and then
// waits for the answer, so each write is one round trip.
type writeCounter struct{ n atomic.Int64 }

type countedConn struct {
	net.Conn
	c *writeCounter
}

func (c countedConn) Write(b []byte) (int, error) {
	c.c.n.Add(1)
	return c.Conn.Write(b)
}

// countedPool opens a one-connection pool of the application role whose
// writes w counts.
func countedPool(t *testing.T, h *pgHotel, w *writeCounter) *pgxpool.Pool {
	t.Helper()
	cfg := h.appCfg.Copy()
	cfg.MaxConns, cfg.MinConns = 1, 0
	d := &net.Dialer{}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{c, w}, nil
	}
	p := pgConnect(t, cfg)
	t.Cleanup(p.Close)
	return p
}

// guestIDs returns the ids of a chain's guests, read as the superuser.
func guestIDs(t *testing.T, h *pgHotel, chain string) []int64 {
	t.Helper()
	rows, err := h.admin.Query(context.Background(), `SELECT id FROM guests WHERE chain_id = $1 ORDER BY id`, chain)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestExchangeOneRoundTrip: on a warm connection a guarded read and a
// guarded single-statement write each take one round trip (the exchange,
// the statement and, implicitly, the commit in one batch), and see and
// change only the caller's tenant's rows; the first statement of a new
// connection takes one more, to open its counter.
func TestExchangeOneRoundTrip(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 2, 2, 2))
	ctx := context.Background()
	acme, globex := guestIDs(t, h, "acme"), guestIDs(t, h, "globex")
	if len(acme) < 2 || len(globex) < 2 || !(acme[0] < globex[0] && globex[0] < acme[1]) {
		t.Fatalf("seed: acme %v globex %v, want two tenants with interleaved ids", acme, globex)
	}
	var w writeCounter
	db, err := postgres.New(ctx, countedPool(t, h, &w), h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	gu := h.sch.Table("guests")
	read := builder.Must(builder.Select(gu.Col("id")).From(gu).OrderBy(gu.Col("id").Asc()).Build())
	as := grantCtx(chainG("acme"))
	readIDs := func(what string) []int64 {
		t.Helper()
		ids, err := guardedsql.All(as, db, read, guardedsql.Scalar[int64])
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return ids
	}
	// Cold: the connection is new (checked, counter opened), the
	// statements not yet prepared.
	if got := readIDs("cold read"); !slices.Equal(got, acme) {
		t.Fatalf("cold read: %v, want acme's %v", got, acme)
	}
	for i := range 3 {
		w.n.Store(0)
		got := readIDs("warm read")
		if n := w.n.Load(); n != 1 {
			t.Errorf("warm read %d: %d round trips, want 1", i, n)
		}
		if !slices.Equal(got, acme) {
			t.Fatalf("warm read: %v, want acme's %v", got, acme)
		}
	}
	rename := func(id int64) builder.Mutation {
		return builder.Must(builder.UpdateTable(gu).Set("name", "Renamed").Where(gu.Col("id").Eq(id)).Build())
	}
	if _, err := db.Exec(as, rename(acme[0])); err != nil { // prepares the statement
		t.Fatal(err)
	}
	w.n.Store(0)
	res, err := db.Exec(as, rename(acme[1]))
	if n := w.n.Load(); n != 1 {
		t.Errorf("warm write: %d round trips, want 1", n)
	}
	if err != nil || res.RowsAffected != 1 {
		t.Fatalf("warm write: %+v %v", res, err)
	}
	var name string
	if err := h.admin.QueryRow(ctx, `SELECT name FROM guests WHERE id = $1`, acme[1]).Scan(&name); err != nil || name != "Renamed" {
		t.Fatalf("the write did not land: %q %v", name, err)
	}
	// Another tenant's row, between acme's: not matched, unchanged.
	if res, err := db.Exec(as, rename(globex[0])); err != nil || res.RowsAffected != 0 {
		t.Fatalf("acme renaming globex's guest: %+v %v", res, err)
	}
	if err := h.admin.QueryRow(ctx, `SELECT name FROM guests WHERE id = $1`, globex[0]).Scan(&name); err != nil || name == "Renamed" {
		t.Fatalf("globex's guest: %q %v", name, err)
	}
	// An ExpectOne write must be able to roll back after counting its
	// rows: an explicit transaction, BEGIN, the exchange and the
	// statement in one round trip, COMMIT in a second.
	one := builder.Must(builder.UpdateTable(gu).Set("name", "Once").Where(gu.Col("id").Eq(acme[0])).ExpectOne().Build())
	if _, err := db.Exec(as, one); err != nil { // prepares the statement
		t.Fatal(err)
	}
	w.n.Store(0)
	if res, err := db.Exec(as, one); err != nil || res.RowsAffected != 1 {
		t.Fatalf("ExpectOne write: %+v %v", res, err)
	}
	if n := w.n.Load(); n != 2 {
		t.Errorf("ExpectOne write: %d round trips, want 2 (the batch, COMMIT)", n)
	}
	// An explicit transaction: BEGIN, the exchange and the first
	// statement in one round trip, COMMIT in a second.
	w.n.Store(0)
	err = db.Tx(as, func(tx *guardedsql.Tx) error {
		ids, err := guardedsql.All(as, tx, read, guardedsql.Scalar[int64])
		if err == nil && !slices.Equal(ids, acme) {
			err = errors.New("wrong rows in Tx")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := w.n.Load(); n != 2 {
		t.Errorf("read in Tx: %d round trips, want 2 (the batch, COMMIT)", n)
	}
}

// pgCode returns the SQLSTATE of err, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// exchangeConn is a raw connection of the application role, signing
// exchange values with the hotel's key as a server would.
type exchangeConn struct {
	t    *testing.T
	c    *pgx.Conn
	h    *pgHotel
	pid  uint32
	d    pgdialect.Dialect
	key  pgdialect.Key
	acme int64 // acme's guests
}

func newExchangeConn(t *testing.T, h *pgHotel) *exchangeConn {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.ConnectConfig(ctx, h.appCfg.ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	id, hx, _ := strings.Cut(h.key.Text(), ":")
	secret, err := hex.DecodeString(hx)
	if err != nil {
		t.Fatal(err)
	}
	return &exchangeConn{t: t, c: c, h: h, pid: c.PgConn().PID(), key: pgdialect.Key{ID: id, Secret: secret}, acme: int64(len(guestIDs(t, h, "acme")))}
}

// open opens (or advances) the session's counter and returns its next
// value.
func (x *exchangeConn) open() int64 {
	x.t.Helper()
	var n int64
	if err := x.c.QueryRow(context.Background(), x.d.OpenSQL()).Scan(&n); err != nil {
		x.t.Fatalf("open: %v", err)
	}
	return n
}

func (x *exchangeConn) sign(pid uint32, counter int64) string {
	return x.d.SignedExchange(x.key, pid, counter, `{"chain":["acme"]}`)
}

// exchange runs, in a transaction it rolls back (or commits), the
// exchange of v and counts the guests it then sees; the error is the
// exchange's.
func (x *exchangeConn) exchange(v string, commit bool) (int64, error) {
	ctx := context.Background()
	tx, err := x.c.Begin(ctx)
	if err != nil {
		x.t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, x.d.ExchangeSQL(), v); err != nil {
		return 0, err
	}
	var n int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM guests`).Scan(&n); err != nil {
		x.t.Fatal(err)
	}
	if commit {
		if err := tx.Commit(ctx); err != nil {
			x.t.Fatal(err)
		}
	}
	return n, nil
}

// replayProblems runs every way of reusing a captured exchange value and
// returns those that verified: none, when the exchange holds. Each case
// first shows, as its positive control, that a fresh value verifies and
// admits acme's guests, so an empty answer is the exchange's doing.
func replayProblems(t *testing.T, h *pgHotel) []string {
	x, y := newExchangeConn(t, h), newExchangeConn(t, h)
	var problems []string
	fresh := func(x *exchangeConn, commit bool) string {
		t.Helper()
		v := x.sign(x.pid, x.open())
		if n, err := x.exchange(v, commit); err != nil || n != x.acme || n == 0 {
			t.Fatalf("positive control: %d guests, %v; want acme's %d", n, err, x.acme)
		}
		return v
	}
	refused := func(what string, v string, x *exchangeConn, code string) {
		t.Helper()
		n, err := x.exchange(v, false)
		switch {
		case err == nil:
			problems = append(problems, what+": verified, "+strconv.FormatInt(n, 10)+" guests")
		case pgCode(err) != code:
			t.Errorf("%s: %v, want SQLSTATE %s", what, err, code)
		case strings.Contains(err.Error(), v[3:]) || strings.Contains(err.Error(), strings.Split(v, ".")[3]):
			t.Errorf("%s: the error echoes the value: %v", what, err)
		}
	}
	// (a) Again on the same backend, after its transaction committed.
	v := fresh(x, true)
	refused("replayed on the same backend", v, x, pgdialect.ErrCodeNotVerified)
	// (b) After ROLLBACK: the counter it consumed stays consumed.
	v = fresh(x, false)
	refused("replayed after ROLLBACK", v, x, pgdialect.ErrCodeNotVerified)
	// (c) On another backend, whose counter is open and whatever its
	// value.
	v = x.sign(x.pid, x.open())
	y.open()
	refused("replayed on another backend", v, y, pgdialect.ErrCodeNotVerified)
	refused("signed for another backend's pid with this one's counter", x.sign(x.pid, y.open()), y, pgdialect.ErrCodeNotVerified)
	// (d) Unused, after DISCARD ALL: no counter, then a fresh one.
	v = x.sign(x.pid, x.open())
	if _, err := x.c.Exec(context.Background(), `DISCARD ALL`); err != nil {
		t.Fatal(err)
	}
	if err := x.c.DeallocateAll(context.Background()); err != nil { // pgx's own statements went too
		t.Fatal(err)
	}
	refused("unused value after DISCARD ALL", v, x, pgdialect.ErrCodeNoCounter)
	x.open()
	refused("unused value after DISCARD ALL and a new counter", v, x, pgdialect.ErrCodeNotVerified)
	// Forged: a made-up MAC, a wrong counter, a value signed for the
	// counter the open after next will reach.
	next := x.open()
	parts := strings.SplitN(x.sign(x.pid, next), ".", 5)
	parts[3] = strings.Repeat("0", 64)
	refused("made-up MAC", strings.Join(parts, "."), x, pgdialect.ErrCodeNotVerified)
	refused("wrong counter", x.sign(x.pid, next+5), x, pgdialect.ErrCodeNotVerified)
	// A value that failed consumed nothing it was not signed for: the
	// next value still verifies (the positive control of the forgeries).
	if n, err := x.exchange(x.sign(x.pid, x.open()), false); err != nil || n != x.acme {
		t.Fatalf("fresh value after the forgeries: %d %v", n, err)
	}
	// A key id not in the table (a removed key): no scope, no rows, and
	// the counter consumed, so the next value verifies.
	c := x.open()
	unknown := pgdialect.Key{ID: "removed", Secret: x.key.Secret}
	if n, err := x.exchange(x.d.SignedExchange(unknown, x.pid, c, `{"chain":["acme"]}`), false); err != nil || n != 0 {
		t.Errorf("value of an unknown key: %d guests, %v; want none and no error", n, err)
	}
	if n, err := x.exchange(x.sign(x.pid, c+1), false); err != nil || n != x.acme {
		t.Errorf("the counter after an unknown key's value: %d %v", n, err)
	}
	return problems
}

// TestExchangeReplayRefused: an exchange value verifies once, on the
// backend it was signed for; replayed on the same backend (after COMMIT
// or ROLLBACK), on another backend, or after DISCARD ALL, forged or
// signed for another counter, it fails with its SQLSTATE and without
// echoing the value.
func TestExchangeReplayRefused(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 2, 2, 2))
	if p := replayProblems(t, h); len(p) > 0 {
		t.Fatalf("replays that verified: %v", p)
	}
}

// TestExchangeCounterOutOfReach: the application role can neither read,
// advance nor set its session's counter, nor plant a sequence of its own
// in its place, and raw SQL without an exchange sees no row.
func TestExchangeCounterOutOfReach(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 2, 2, 2))
	ctx := context.Background()
	x := newExchangeConn(t, h)
	x.open()
	seq := "pg_temp." + x.d.CounterSeq()
	for _, q := range []string{
		`SELECT pg_catalog.nextval('` + seq + `')`,
		`SELECT pg_catalog.setval('` + seq + `', 1)`,
		`SELECT pg_catalog.currval('` + seq + `')`,
		`SELECT last_value FROM ` + seq,
		`ALTER SEQUENCE ` + seq + ` RESTART`,
		`DROP SEQUENCE ` + seq,
	} {
		_, err := x.c.Exec(ctx, q)
		if code := pgCode(err); code != "42501" && code != "55000" { // insufficient_privilege; currval: not yet defined in this session
			t.Errorf("%s as the application role: %v, want permission denied", q, err)
		}
	}
	var n int64
	if err := x.c.QueryRow(ctx, `SELECT count(*) FROM guests`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("raw SQL without an exchange: %d guests, %v; want 0", n, err)
	}
	// The positive control: the counter is there and works.
	if n, err := x.exchange(x.sign(x.pid, x.open()), false); err != nil || n != x.acme || n == 0 {
		t.Fatalf("positive control: %d %v", n, err)
	}
	// A sequence of the role's own, under the counter's name, after
	// DISCARD TEMP: refused, at open and at exchange.
	for _, q := range []string{`DISCARD TEMP`, `CREATE TEMP SEQUENCE ` + x.d.CounterSeq(), `SELECT pg_catalog.setval('` + seq + `', 41)`} {
		if _, err := x.c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := x.c.Exec(ctx, x.d.OpenSQL()); pgCode(err) != pgdialect.ErrCodeNoCounter {
		t.Errorf("open over a planted sequence: %v, want SQLSTATE %s", err, pgdialect.ErrCodeNoCounter)
	}
	if _, err := x.exchange(x.sign(x.pid, 42), false); pgCode(err) != pgdialect.ErrCodeNoCounter {
		t.Errorf("exchange with a planted sequence: %v, want SQLSTATE %s", err, pgdialect.ErrCodeNoCounter)
	}
}

// TestExchangeRecoversAfterDiscard: DISCARD TEMP or DISCARD ALL run on
// the guarded pool's connection drops its counter; the next guarded call
// still succeeds (the driver opens a new counter and sends the batch
// again), and the one after is back to one round trip.
func TestExchangeRecoversAfterDiscard(t *testing.T) {
	h := newPostgresHotel(t, enginePostgres.dsn(t), seedModel(2, 2, 2, 2))
	ctx := context.Background()
	acme := guestIDs(t, h, "acme")
	var w writeCounter
	p := countedPool(t, h, &w)
	db, err := postgres.New(ctx, p, h.sch, guardedsql.Options{Engine: postgres.Options{Key: h.key}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	gu := h.sch.Table("guests")
	read := builder.Must(builder.Select(gu.Col("id")).From(gu).OrderBy(gu.Col("id").Asc()).Build())
	as := grantCtx(chainG("acme"))
	readIDs := func(what string, trips int64) {
		t.Helper()
		w.n.Store(0)
		ids, err := guardedsql.All(as, db, read, guardedsql.Scalar[int64])
		if err != nil || !slices.Equal(ids, acme) {
			t.Fatalf("%s: %v %v, want acme's %v", what, ids, err, acme)
		}
		if n := w.n.Load(); trips > 0 && n != trips {
			t.Errorf("%s: %d round trips, want %d", what, n, trips)
		}
	}
	readIDs("cold", 0)
	readIDs("warm", 1)
	for _, discard := range []string{"DISCARD TEMP", "DISCARD ALL"} {
		c, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Exec(ctx, discard)
		if err == nil && discard == "DISCARD ALL" {
			// DISCARD ALL also deallocates pgx's prepared statements;
			// pgx must be told (its documented reset), or its next
			// cached statement fails whatever the exchange does.
			err = c.Conn().DeallocateAll(ctx)
		}
		c.Release()
		if err != nil {
			t.Fatalf("%s: %v", discard, err)
		}
		// The refused exchange, the open and the batch again, plus
		// what pgx adds after a failed batch (it drops and prepares
		// again the batch's cached statements): not asserted.
		readIDs("after "+discard, 0)
		t.Logf("after %s: %d round trips", discard, w.n.Load())
		readIDs("warm after "+discard, 1)
	}
}
