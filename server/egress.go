package server

import (
	"context"
	"log/slog"

	"github.com/tenantmcp/tenantmcp/egress"
)

// AuditEgress drains the egress guard's denials into the audit log, one
// record per denial (hook, network, destination, pid, comm), until ctx is
// done or the guard is closed. Run it in its own goroutine right after
// egress.Install, which must itself come before the server opens its
// database pool, JWKS client or listener (gate before serve).
//
// A slow audit log cannot weaken the guard: the kernel decides before it
// reports, and a denial whose record is lost is still enforced and counted
// in the guard's Dropped counter, which the final record reports.
func (s *Server) AuditEgress(ctx context.Context, g *egress.Guard) {
	if g == nil || !g.Active() {
		return
	}
	denials := g.Denials()
	for {
		select {
		case <-ctx.Done():
			s.egressSummary(g)
			return
		case d, ok := <-denials:
			if !ok {
				s.egressSummary(g)
				return
			}
			s.opts.AuditLogger.LogAttrs(context.Background(), slog.LevelWarn, "egress denied", slog.Any("denial", d))
		}
	}
}

func (s *Server) egressSummary(g *egress.Guard) {
	st := g.Stats()
	var denied uint64
	for _, n := range st.Denied {
		denied += n
	}
	s.opts.AuditLogger.LogAttrs(context.Background(), slog.LevelInfo, "egress guard summary",
		slog.Uint64("denied", denied), slog.Uint64("audit_dropped", st.Dropped))
}
