package egress

import (
	"context"
	"log/slog"
)

// Audit drains the guard's denials into log, one record per denial (hook,
// network, destination, pid, comm), until ctx is done or the guard is
// closed, then logs a summary. Run it in its own goroutine right after
// Install, which must itself come before the server opens its database
// pool, JWKS client or listener (gate before serve); pass the server's
// audit log (server.Server.AuditLogger) so that denials sit beside the
// tool calls. A nil or inactive guard returns at once.
//
// It lives here, not in package server, so that a server that does not
// use the guard does not link eBPF.
//
// A slow audit log cannot weaken the guard: the kernel decides before it
// reports, and a denial whose record is lost is still enforced and counted
// in the guard's Dropped counter, which the final record reports.
func (g *Guard) Audit(ctx context.Context, log *slog.Logger) {
	if g == nil || !g.Active() {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	denials := g.Denials()
	for {
		select {
		case <-ctx.Done():
			g.auditSummary(log)
			return
		case d, ok := <-denials:
			if !ok {
				g.auditSummary(log)
				return
			}
			log.LogAttrs(context.Background(), slog.LevelWarn, "egress denied", slog.Any("denial", d))
		}
	}
}

func (g *Guard) auditSummary(log *slog.Logger) {
	st := g.Stats()
	var denied uint64
	for _, n := range st.Denied {
		denied += n
	}
	log.LogAttrs(context.Background(), slog.LevelInfo, "egress guard summary",
		slog.Uint64("denied", denied), slog.Uint64("audit_dropped", st.Dropped))
}
