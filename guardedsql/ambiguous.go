package guardedsql

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/guard"
	"github.com/tenantmcp/tenantmcp/internal/guardfault"
)

// errAmbiguous is ErrAmbiguous. Its text is what a caller may read: it
// says what happened and how to narrow, and holds no value, no row count
// and no tenant, so it can be passed on as is.
var errAmbiguous = errors.New("guardedsql: ambiguous: more than one row matched; narrow the call to one of your grants, or name the row by its whole key")

// Ambiguity is visible. A statement meant for one row that matches several
// in scope fails rather than picking one: with composite keys such as
// (company_id, id) the ids repeat across tenants, and a caller holding
// grants on two companies who names "campaign 2" has named two rows. The
// checks below keep that invariant:
//
//   - an ExpectOne update or delete that affected more than one row
//     returns ErrAmbiguous from runSteps, and its caller rolls the
//     statement back (the plan of an ExpectOne mutation is Atomic: it runs
//     in its own transaction, or in a savepoint inside Tx), so nothing
//     changed;
//   - Row.Scan (QueryRow) and CollectOne (One) read one row further and
//     fail with ErrAmbiguous, zeroing what they scanned, when a second row
//     is there.
//
// The read check applies whatever the number of grants. A rule depending
// on the caller would let a tool that silently picks the first of several
// rows pass every test run with a single-grant token and misbehave only
// for the callers with several grants; "at most one row" is what QueryRow
// and One have always been documented to expect, and a tool that wants
// the first of many says so with OrderBy and Limit(1).

// ambiguousWrite is the error of an ExpectOne step that affected n > 1
// rows.
func ambiguousWrite(kind guard.Kind) error {
	return fmt.Errorf("%w (%s)", ErrAmbiguous, kind)
}

// secondRow reports whether rows has another row after the one just
// scanned: the read half of the ambiguity check. guardfault.Ambiguous
// (tests only) switches it off to show the conformance suite notices.
func secondRow(rows *Rows) bool {
	return !guardfault.Off(guardfault.Ambiguous) && rows.Next()
}

// expectOneOff reports whether the write half of the ambiguity check is
// switched off (guardfault.Ambiguous, tests only).
func expectOneOff() bool { return guardfault.Off(guardfault.Ambiguous) }

// zeroDest sets every pointer in dest back to its zero value, so that a Scan
// failing with ErrAmbiguous leaves no row's values behind.
func zeroDest(dest ...any) {
	for _, d := range dest {
		if v := reflect.ValueOf(d); v.Kind() == reflect.Pointer && !v.IsNil() {
			v.Elem().SetZero()
		}
	}
}
