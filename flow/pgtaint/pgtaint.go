package pgtaint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/flow"
)

// DefaultTable is the table of the taints when Options.Table is empty.
const DefaultTable = "tenantmcp_taint"

// ErrConfig is wrapped by the errors New and Install return for options
// they refuse or a table that is missing or unusable.
var ErrConfig = errors.New("pgtaint: invalid configuration")

// Options configures a Store.
type Options struct {
	// Table is the table name, optionally schema-qualified ("app.taint"):
	// lower-case letters, digits and '_'. Default DefaultTable.
	Table string
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$`)

// table returns the quoted table name of o.
func (o Options) table() (string, error) {
	name := o.Table
	if name == "" {
		name = DefaultTable
	}
	if !identRE.MatchString(name) {
		return "", fmt.Errorf("%w: table name %q: lower-case letters, digits and '_', optionally schema.table", ErrConfig, name)
	}
	return pgx.Identifier(strings.Split(name, ".")).Sanitize(), nil
}

// InstallSQL returns the statements that create the table of o (if it does
// not exist), for a migration tool.
func InstallSQL(o Options) ([]string, error) {
	t, err := o.table()
	if err != nil {
		return nil, err
	}
	ix := pgx.Identifier{strings.ReplaceAll(strings.Trim(t, `"`), `"."`, "_") + "_touched"}.Sanitize()
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + t + ` (
	subject text NOT NULL,
	session text NOT NULL DEFAULT '',
	taint   jsonb NOT NULL,
	touched timestamptz NOT NULL,
	PRIMARY KEY (subject, session)
)`,
		`CREATE INDEX IF NOT EXISTS ` + ix + ` ON ` + t + ` (touched)`,
	}, nil
}

// Install creates the table of o in the database db is connected to, as a
// role allowed to create tables there (grant SELECT, INSERT, UPDATE and
// DELETE on it to the application role afterwards).
func Install(ctx context.Context, db *pgxpool.Pool, o Options) error {
	stmts, err := InstallSQL(o)
	if err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := db.Exec(ctx, s); err != nil {
			return fmt.Errorf("pgtaint: install: %w", err)
		}
	}
	return nil
}

// Grant gives role (the application's) what a Store needs on the table of
// o: SELECT, INSERT, UPDATE and DELETE, and nothing else. Run it as the
// table's owner after Install.
func Grant(ctx context.Context, db *pgxpool.Pool, o Options, role string) error {
	t, err := o.table()
	if err != nil {
		return err
	}
	if role == "" {
		return fmt.Errorf("%w: empty role", ErrConfig)
	}
	if _, err := db.Exec(ctx, `GRANT SELECT, INSERT, UPDATE, DELETE ON `+t+` TO `+pgx.Identifier{role}.Sanitize()); err != nil {
		return fmt.Errorf("pgtaint: grant: %w", err)
	}
	return nil
}

// Store is a flow.Store in a PostgreSQL table. It is safe for concurrent
// use; Close does not close the pool.
type Store struct {
	pool  *pgxpool.Pool
	table string
	// lastSweep is the unix nanoseconds of the last delete of idle rows
	// by this process.
	lastSweep atomic.Int64
}

var _ flow.Store = (*Store)(nil)

// New returns a Store on pool, connected as the application role. It
// fails (ErrConfig) if the table does not exist or the role cannot read
// and write it, so that a misconfigured replica refuses to start instead
// of denying every sink call.
func New(ctx context.Context, pool *pgxpool.Pool, o Options) (*Store, error) {
	t, err := o.table()
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, table: t}
	var ok bool
	err = pool.QueryRow(ctx, `SELECT has_table_privilege(to_regclass($1), 'SELECT, INSERT, UPDATE, DELETE')`, strings.ReplaceAll(t, `"`, "")).Scan(&ok)
	if err != nil {
		return nil, fmt.Errorf("%w: table %s is missing or unreadable (create it with pgtaint.Install): %w", ErrConfig, t, err)
	}
	if !ok {
		return nil, fmt.Errorf("%w: the role may not read and write table %s (grant SELECT, INSERT, UPDATE, DELETE)", ErrConfig, t)
	}
	return s, nil
}

func storeErr(op string, err error) error {
	return fmt.Errorf("%w: pgtaint: %s: %w", flow.ErrTaintStore, op, err)
}

// Load implements flow.Store: it reads the row of k (of the subject, past
// flow.MaxKeysPerSubject sessions) and marks it used.
func (s *Store) Load(ctx context.Context, k flow.Key, now time.Time, retain time.Duration) (flow.Taint, error) {
	cutoff := now.Add(-retain)
	t, found, err := s.touch(ctx, k, now, cutoff)
	if err != nil {
		return flow.Taint{}, err
	}
	if found || k.Session == "" {
		return t, nil
	}
	over, err := s.overSessions(ctx, s.pool, k.Subject, cutoff)
	if err != nil || !over {
		return flow.Taint{}, err
	}
	t, _, err = s.touch(ctx, flow.Key{Subject: k.Subject}, now, cutoff)
	return t, err
}

// touch reads the taint under k if it is not idle past cutoff, marking it
// used at now.
func (s *Store) touch(ctx context.Context, k flow.Key, now, cutoff time.Time) (flow.Taint, bool, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `UPDATE `+s.table+` SET touched = GREATEST(touched, $3)
WHERE subject = $1 AND session = $2 AND touched >= $4 RETURNING taint`, k.Subject, k.Session, now, cutoff).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return flow.Taint{}, false, nil
	}
	if err != nil {
		return flow.Taint{}, false, storeErr("load", err)
	}
	var t flow.Taint
	if err := json.Unmarshal(raw, &t); err != nil {
		return flow.Taint{}, false, storeErr("load", errors.New("stored taint does not decode"))
	}
	return t, true, nil
}

// querier is what a Store reads through: the pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// overSessions reports whether subject has MaxKeysPerSubject live session
// taints.
func (s *Store) overSessions(ctx context.Context, q querier, subject string, cutoff time.Time) (bool, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM `+s.table+`
WHERE subject = $1 AND session <> '' AND touched >= $2 LIMIT $3) s`, subject, cutoff, flow.MaxKeysPerSubject).Scan(&n)
	if err != nil {
		return false, storeErr("load", err)
	}
	return n >= flow.MaxKeysPerSubject, nil
}

// Join implements flow.Store: JoinTx in a transaction of its own, which
// has committed when Join returns nil.
//
// Most joins add nothing (a session calling the same tools again): those
// take one statement, which marks the row used, instead of a transaction
// of four or five.
func (s *Store) Join(ctx context.Context, k flow.Key, now time.Time, retain time.Duration, add flow.Taint) error {
	if held, err := s.holds(ctx, k, now, retain, add); err != nil {
		return err
	} else if held {
		s.sweep(ctx, now, retain)
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return s.JoinTx(ctx, tx, k, now, retain, add)
	})
	if err != nil {
		if !errors.Is(err, flow.ErrTaintStore) {
			err = storeErr("join", err)
		}
		return err
	}
	s.sweep(ctx, now, retain)
	return nil
}

// holds reports whether the live taint stored under k already holds add
// (joining it would change nothing), marking the row used as a join does.
//
// Invariant: it answers true only from the row as stored and committed,
// read and touched by one statement; a stored taint is only ever joined
// into, or dropped whole once idle past retain, which the touch just
// postponed, so what it held stays held and the join it skips is durable.
// Anything else (no live row yet, a taint that would grow) is left to the
// transaction, which decides under the row lock.
func (s *Store) holds(ctx context.Context, k flow.Key, now time.Time, retain time.Duration, add flow.Taint) (bool, error) {
	stored, found, err := s.touch(ctx, k, now, now.Add(-retain))
	if err != nil || !found {
		return false, err
	}
	before, err := json.Marshal(stored)
	if err != nil {
		return false, storeErr("join", err)
	}
	stored.Join(add)
	after, err := json.Marshal(stored)
	if err != nil {
		return false, storeErr("join", err)
	}
	return bytes.Equal(before, after), nil
}

// JoinTx merges add into the taint under k inside tx: it locks the row
// (creating it), merges with flow.Taint.Join and writes it back. The join
// is durable when tx commits; the caller must not release the result
// before that.
func (s *Store) JoinTx(ctx context.Context, tx pgx.Tx, k flow.Key, now time.Time, retain time.Duration, add flow.Taint) error {
	cutoff := now.Add(-retain)
	if k.Session != "" {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.table+` WHERE subject = $1 AND session = $2 AND touched >= $3)`,
			k.Subject, k.Session, cutoff).Scan(&exists); err != nil {
			return storeErr("join", err)
		}
		if !exists {
			over, err := s.overSessions(ctx, tx, k.Subject, cutoff)
			if err != nil {
				return err
			}
			if over {
				k.Session = ""
			}
		}
	}
	// The upsert takes the row lock: concurrent joins of k from any
	// replica serialise here, so none is lost.
	var raw []byte
	var touched time.Time
	if err := tx.QueryRow(ctx, `INSERT INTO `+s.table+` AS t (subject, session, taint, touched) VALUES ($1, $2, '{}', $3)
ON CONFLICT (subject, session) DO UPDATE SET touched = t.touched RETURNING taint, touched`, k.Subject, k.Session, now).Scan(&raw, &touched); err != nil {
		return storeErr("join", err)
	}
	var t flow.Taint
	// A row idle past retain is dropped whole: the join starts afresh.
	if !touched.Before(cutoff) {
		if err := json.Unmarshal(raw, &t); err != nil {
			return storeErr("join", errors.New("stored taint does not decode"))
		}
	}
	t.Join(add)
	enc, err := json.Marshal(t)
	if err != nil {
		return storeErr("join", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+s.table+` SET taint = $3, touched = GREATEST(touched, $4) WHERE subject = $1 AND session = $2`,
		k.Subject, k.Session, enc, now); err != nil {
		return storeErr("join", err)
	}
	return nil
}

// sweep deletes the rows idle past retain, at most every retain/8 per
// process. It is housekeeping: Load and Join already ignore such rows, so
// an error is dropped.
func (s *Store) sweep(ctx context.Context, now time.Time, retain time.Duration) {
	last := s.lastSweep.Load()
	if now.UnixNano()-last < int64(retain/8) || !s.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	_, _ = s.pool.Exec(ctx, `DELETE FROM `+s.table+` WHERE touched < $1`, now.Add(-retain))
}
