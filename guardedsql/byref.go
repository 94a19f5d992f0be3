package guardedsql

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
	"github.com/tenantmcp/tenantmcp/guardedsql/internal/guard"
)

// (h4-ref)

// ErrSharedRow: an ExpectOne update or delete matched a row in scope that
// is tied to rows outside the scope, so no tenant may change it: a row of
// a table owned by reference (builder.TableDef.OwnedByReference) that
// another tenant's row references as well, or a row one of whose
// consistency paths (a foreign key besides its scope parent) leads to a row
// outside the scope (a rental of store A whose clerk is store B's), or an
// update that would set such a foreign key to a row outside the scope. It
// matches ErrNotFound too. It says that such a tie exists, nothing about
// the other rows.
var ErrSharedRow = guard.ErrSharedRow

// probeShared tells, after an ExpectOne step matched no row, a row in
// scope held back by its write guard (ErrSharedRow) from no row at all
// (the step's Fail).
func probeShared(ctx context.Context, q engine.Querier, st guard.Step, kind guard.Kind) error {
	rows, err := q.Query(ctx, st.Probe.SQL, st.Probe.Args...)
	if err != nil {
		return err
	}
	found := rows.Next()
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if found {
		return fmt.Errorf("%w (%s)", ErrSharedRow, kind)
	}
	return fmt.Errorf("%w (%s)", st.Fail, kind)
}
