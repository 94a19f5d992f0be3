package postgres

import (
	"context"

	"github.com/tenantmcp/tenantmcp/guardedsql/internal/engine"
)

// NewConnChecker is implemented by the pgx driver's pools (pgxdriver.NewPool).
type NewConnChecker interface {
	// SetNewConnCheck makes fn vet every pooled connection before its
	// first use through this pool: fn gets a engine.Pool bound to that
	// one connection, and an error from it fails the call that acquired
	// the connection (which is returned to the pool unused and vetted
	// again next time). Call it before the pool is used.
	SetNewConnCheck(fn func(ctx context.Context, conn engine.Pool) error)
}
