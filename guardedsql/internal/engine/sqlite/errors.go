package sqlite

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

var _ engine.ErrorClassifier = Dialect{}

// constraintCols reads "UNIQUE constraint failed: t.a, t.b" and
// "NOT NULL constraint failed: t.a", which carry names only.
var constraintCols = regexp.MustCompile(`(?:UNIQUE|NOT NULL) constraint failed: ([A-Za-z0-9_$., ]+)`)

// Classify implements engine.ErrorClassifier for modernc.org/sqlite
// errors (anything with the extended result code as Code() int).
func (Dialect) Classify(err error) (engine.EngineError, bool) {
	var se interface {
		error
		Code() int
	}
	if !errors.As(err, &se) {
		return engine.EngineError{}, false
	}
	code := se.Code()
	e := engine.EngineError{Code: strconv.Itoa(code), Message: se.Error()}
	switch code {
	case 2067, 1555: // SQLITE_CONSTRAINT_UNIQUE, SQLITE_CONSTRAINT_PRIMARYKEY
		e.Kind = engine.EngineUnique
	case 787: // SQLITE_CONSTRAINT_FOREIGNKEY: the message does not say which side
		e.Kind = engine.EngineReferenced
	case 1811: // SQLITE_CONSTRAINT_TRIGGER
		// A foreign key's ON DELETE/UPDATE RESTRICT action refuses with
		// this code and SQLite's fixed text; a user trigger's RAISE has
		// its own text and stays unclassified.
		if strings.Contains(se.Error(), "FOREIGN KEY constraint failed") {
			e.Kind = engine.EngineReferenced
		}
	case 1299, 275, 3091: // NOTNULL, CHECK, DATATYPE (strict tables)
		e.Kind = engine.EngineInvalid
	case 20: // SQLITE_MISMATCH
		e.Kind = engine.EngineInvalid
	}
	switch code & 0xff {
	case 5, 6:
		// SQLITE_BUSY (with its extended codes: BUSY_SNAPSHOT, a WAL
		// reader that cannot upgrade to write; BUSY_TIMEOUT) and
		// SQLITE_LOCKED: another connection holds the lock.
		e.Kind = engine.EngineRetryable
	}
	if m := constraintCols.FindStringSubmatch(e.Message); m != nil {
		for _, tc := range strings.Split(m[1], ",") {
			t, c, ok := strings.Cut(strings.TrimSpace(tc), ".")
			if !ok {
				continue
			}
			e.Table = engine.Ident(t)
			if c = engine.Ident(c); c != "" {
				e.Columns = append(e.Columns, c)
			}
		}
	}
	return e, true
}

var _ engine.UniqueLister = Dialect{}

// UniqueKeys implements engine.UniqueLister: the unique indexes of every
// table (pragma_index_list; origin 'pk' for a declared non-rowid primary
// key). A rowid alias (INTEGER PRIMARY KEY) has no index and is not
// listed.
func (Dialect) UniqueKeys(ctx context.Context, q engine.Querier) ([]engine.UniqueKey, error) {
	return engine.CollectUniqueKeys(ctx, q, `SELECT m.name, l.name, l.origin = 'pk',
       (SELECT group_concat(name, ',') FROM (SELECT i.name FROM pragma_index_info(l.name) AS i ORDER BY i.seqno))
FROM sqlite_schema AS m, pragma_index_list(m.name) AS l
WHERE m.type = 'table' AND l."unique" = 1
ORDER BY 1, 2`)
}
