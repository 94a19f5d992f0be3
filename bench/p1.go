package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// guardPath is the in-process guard path of one list_bookings call, as the
// server runs it, without the transport: verify the bearer token (key
// cached), mint the scope into the context, run the tool (query built,
// rewritten with the tenant predicates, run on SQLite, scanned), and
// serialize the 50-row result through the redactor.
type guardPath struct {
	verifier *claims.Verifier
	issuer   *devtoken.Issuer
	token    string
	db       *guardedsql.DB
	red      *redact.Redactor
	raw      *sql.DB // the same file for the hand-written baseline
}

func newGuardPath(ctx context.Context, h *hotelSQLite) (*guardPath, error) {
	const aud = "http://127.0.0.1/mcp"
	is, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: aud, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	gp := &guardPath{issuer: is}
	ok := false
	defer func() {
		if !ok {
			gp.close()
		}
	}()
	// A static JWKS: the key is in hand, as after the first fetch.
	if gp.verifier, err = claims.New(claims.Options{Issuer: is.URL, Audience: []string{aud}, JWKS: is.JWKS(), Mapping: hotel.Mapping}); err != nil {
		return nil, err
	}
	if gp.token, err = is.Mint(devtoken.Token{Subject: benchSubject, Groups: []string{benchGroup}, Roles: []string{benchRole}, TTL: 2 * time.Hour}); err != nil {
		return nil, err
	}
	if gp.db, err = guardedsql.Open(ctx, h.guardedDSN(), hotel.Schema, guardedsql.Options{}); err != nil {
		return nil, err
	}
	if gp.red, err = redact.New(hotel.Redaction); err != nil {
		return nil, err
	}
	if gp.raw, err = sql.Open("sqlite", h.rawDSN()); err != nil {
		return nil, err
	}
	ok = true
	return gp, nil
}

func (gp *guardPath) close() {
	if gp.raw != nil {
		gp.raw.Close()
	}
	if gp.db != nil {
		gp.db.Close()
	}
	if gp.verifier != nil {
		gp.verifier.Close()
	}
	gp.issuer.Close()
}

// candidate runs the guard path for iteration i; verify says whether the
// scope comes from verifying the token or is minted directly.
func (gp *guardPath) candidate(ctx context.Context, i int, verify bool) ([]byte, hotel.BookingsOut, error) {
	var sc scope.Scope
	var err error
	if verify {
		sc, _, err = gp.verifier.Verify(ctx, gp.token)
	} else {
		sc, err = mint.Scope(benchSubject, []scope.Grant{{Level: hotel.LevelChain, ID: benchChain}}, []string{benchRole})
	}
	if err != nil {
		return nil, hotel.BookingsOut{}, err
	}
	from, to := window(i)
	out, err := hotel.ListBookings(mint.NewContext(ctx, sc), gp.db, hotel.ListBookingsIn{From: from, To: to})
	if err != nil {
		return nil, out, err
	}
	js, err := gp.red.ForScope(sc).JSON(out)
	return js, out, err
}

// baseline runs the same query written by hand with database/sql and
// serializes it with encoding/json.
func (gp *guardPath) baseline(ctx context.Context, i int) ([]byte, hotel.BookingsOut, error) {
	from, to := window(i)
	bs, err := queryBookings(ctx, gp.raw, handListBookings, benchChain, from, to)
	if err != nil {
		return nil, hotel.BookingsOut{}, err
	}
	out := hotel.BookingsOut{Bookings: bs}
	js, err := json.Marshal(out)
	return js, out, err
}

// check proves the candidates and the baseline return the same 50 rows
// for every window before anything is timed.
func (gp *guardPath) check(ctx context.Context) error {
	for i := range 10 {
		_, want, err := gp.baseline(ctx, i)
		if err != nil {
			return err
		}
		if len(want.Bookings) != pageRows {
			return fmt.Errorf("hand-written query returned %d rows for window %d, want %d", len(want.Bookings), i, pageRows)
		}
		for _, verify := range []bool{true, false} {
			_, got, err := gp.candidate(ctx, i, verify)
			if err != nil {
				return err
			}
			if !sameIDs(got.Bookings, want.Bookings) {
				return fmt.Errorf("guarded and hand-written list_bookings disagree for window %d", i)
			}
		}
	}
	return nil
}

func runP1(ctx context.Context, e *env) []Row {
	const fig = "P1"
	const base = "the same query hand-written with database/sql (tenant filter `h.chain_id = ?`) + encoding/json"
	rows := []Row{
		{Figure: fig, Case: "guard path of one tool call (SQLite, 50 rows)", Unit: unitMicros,
			Baseline:  base,
			Candidate: "claims.Verifier.Verify (cached Ed25519 key) + scope into context + hotel.ListBookings on guardedsql (query build, tenant rewrite, run, scan) + Redactor.ForScope(sc).JSON"},
		{Figure: fig, Case: "same, minus JWT verify", Unit: unitMicros,
			Baseline:  base,
			Candidate: "the same path with the scope minted directly (internal/mint) instead of verified from the token"},
	}
	h, err := e.hotelDB(ctx)
	if err != nil {
		return failAll(rows, err)
	}
	gp, err := newGuardPath(ctx, h)
	if err != nil {
		return failAll(rows, err)
	}
	defer gp.close()
	if err := gp.check(ctx); err != nil {
		return failAll(rows, err)
	}
	arms := sameInputs(e.batch(), []string{"hand-written", "guard path", "guard path minus verify"},
		func(ctx context.Context, i int) error { _, _, err := gp.baseline(ctx, i); return err },
		func(ctx context.Context, i int) error { _, _, err := gp.candidate(ctx, i, true); return err },
		func(ctx context.Context, i int) error { _, _, err := gp.candidate(ctx, i, false); return err },
	)
	s, err := rounds(ctx, arms, e.budget(8*time.Second), e.minRounds(), 1000)
	if err != nil {
		return failAll(rows, err)
	}
	c1, c2 := compare(s, 0, 1), compare(s, 0, 2)
	rows[0] = rows[0].measured(c1, 0)
	rows[1] = rows[1].measured(c2, 0)
	rows[0].Note = fmt.Sprintf("library adds %.0f µs per call", (c1.CandNs-c1.BaseNs)/1e3)
	rows[1].Note = fmt.Sprintf("library adds %.0f µs per call; JWT verify ≈ %.0f µs", (c2.CandNs-c2.BaseNs)/1e3, (c1.CandNs-c2.CandNs)/1e3)
	return rows
}

func failAll(rows []Row, err error) []Row {
	for i := range rows {
		rows[i].Failed = err.Error()
	}
	return rows
}

func skipAll(rows []Row, reason string) []Row {
	for i := range rows {
		rows[i].Skipped = reason
	}
	return rows
}
