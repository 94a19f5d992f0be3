package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// Probe paths served by Handler.
const (
	HealthPath = "/healthz"
	ReadyPath  = "/readyz"
)

// Defaults for HealthOptions fields left zero.
const (
	DefaultReadyTimeout = 2 * time.Second
	DefaultReadyCache   = time.Second
)

// HealthOptions configures the probes Handler serves: HealthPath answers
// 200 while the process serves HTTP at all (liveness); ReadyPath answers
// 200 only while every readiness check passes and 503 otherwise. The
// checks: the Verifier has signing keys (claims.Verifier.Ready); the
// database answers and, on PostgreSQL, its row-level security is still in
// force for the connected role (guardedsql.DB.Check, so a migration that
// drops a policy makes the server unready); the egress guard is active if
// RequireEgress; and the application's own Checks. The body names each
// check with a fixed word ("ok", "unavailable", "failed", "not installed"),
// never an error message, address or role: probes are often reachable by
// more than the operator. Failures are logged, redacted, to Options.Logger.
type HealthOptions struct {
	// Disable serves neither probe.
	Disable bool
	// RequireEgress makes readiness depend on Egress being installed and
	// active: set it when the deployment asked for the egress guard.
	RequireEgress bool
	// Egress is the installed guard (egress.Install returns an
	// *egress.Guard), if any.
	Egress EgressGuard
	// Checks are further readiness checks; each must return within ctx.
	Checks []ReadinessCheck
	// Timeout bounds one round of checks; zero means DefaultReadyTimeout,
	// negative is refused (Handler).
	Timeout time.Duration
	// CacheFor reuses a round's result for this long, so that many probes
	// cost the database one round trip; zero means DefaultReadyCache,
	// negative means no reuse.
	CacheFor time.Duration
}

// EgressGuard is what readiness reads of the egress guard; *egress.Guard
// implements it (a nil one is inactive). Package server does not import
// package egress, so that a server without the guard does not link eBPF.
type EgressGuard interface {
	Active() bool
}

// ReadinessCheck is one named readiness check of the application.
type ReadinessCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// Pinger is implemented by the shared stores a server depends on (taint,
// consent replay and rate stores of packages server/redisstore,
// server/pgstore and flow/pgtaint): Ping reports whether the store answers
// now. Readiness pings every store that implements it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Readiness is the outcome of a round of readiness checks.
type Readiness struct {
	Ready bool `json:"ready"`
	// Checks maps each check (jwks, database, rls, egress, taints,
	// replays, rates and the application's) to "ok" or a fixed word saying
	// what is wrong.
	Checks map[string]string `json:"checks"`
	// Degraded names the checks that failed without making the server
	// unready: "rates" while the shared rate store does not answer (calls
	// are then limited per replica, see Limits.Rates).
	Degraded []string `json:"degraded,omitempty"`
}

// Check states in Readiness.Checks.
const (
	checkOK           = "ok"
	checkUnavailable  = "unavailable"
	checkFailed       = "failed"
	checkUnknown      = "unknown"
	checkNoKeys       = "no signing keys"
	checkNotInstalled = "not installed"
	checkDegraded     = "degraded"
)

// Ready runs one round of readiness checks now (uncached). The HTTP probe
// at ReadyPath serves its result.
func (s *Server) Ready(ctx context.Context, o HealthOptions) Readiness {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := Readiness{Ready: true, Checks: map[string]string{}}
	set := func(name, state string, err error) {
		r.Checks[name] = state
		if state != checkOK {
			r.Ready = false
			attrs := []any{slog.String("check", name), slog.String("state", state)}
			if err != nil {
				attrs = append(attrs, slog.String("error", s.logRedactor().Error(err)))
			}
			s.opts.Logger.Warn("server not ready", attrs...)
		}
	}
	if s.opts.Verifier.Ready() {
		set("jwks", checkOK, nil)
	} else {
		set("jwks", checkNoKeys, nil)
	}
	switch err := s.opts.DB.Check(ctx); {
	case err == nil:
		set("database", checkOK, nil)
		set("rls", checkOK, nil)
	case errors.Is(err, guardedsql.ErrEngineUnsafe):
		set("database", checkOK, nil)
		set("rls", checkFailed, err)
	case errors.Is(err, guardedsql.ErrUnavailable):
		set("database", checkUnavailable, err)
		r.Checks["rls"] = checkUnknown
	default:
		set("database", checkFailed, err)
		r.Checks["rls"] = checkUnknown
	}
	if o.RequireEgress {
		if o.Egress != nil && o.Egress.Active() {
			set("egress", checkOK, nil)
		} else {
			set("egress", checkNotInstalled, nil)
		}
	}
	// Shared stores. Taint and consent replay stores fail closed: a call
	// that needs them is refused while they are down, so the replica is
	// not ready. The rate store falls back to per-replica limits: the
	// replica stays ready and says it is degraded.
	if s.opts.Flow != nil {
		if p, ok := s.opts.Flow.Store().(Pinger); ok {
			if err := p.Ping(ctx); err != nil {
				set("taints", checkUnavailable, err)
			} else {
				set("taints", checkOK, nil)
			}
		}
	}
	if p, ok := s.replays.(Pinger); ok {
		if err := p.Ping(ctx); err != nil {
			set("replays", checkUnavailable, err)
		} else {
			set("replays", checkOK, nil)
		}
	}
	if rates := s.limiter.l.Rates; rates != nil {
		var err error
		p, pinger := rates.(Pinger)
		if pinger {
			err = p.Ping(ctx)
		}
		switch {
		case err == nil && !s.limiter.isDegraded():
			if pinger {
				r.Checks["rates"] = checkOK
			}
		case s.limiter.l.FailClosed:
			// Refusing every rated call: not ready.
			set("rates", checkUnavailable, err)
		default:
			r.Checks["rates"] = checkDegraded
			r.Degraded = append(r.Degraded, "rates")
			attrs := []any{slog.String("check", "rates"), slog.String("state", checkDegraded)}
			if err != nil {
				attrs = append(attrs, slog.String("error", s.logRedactor().Error(err)))
			}
			s.opts.Logger.Warn("server degraded: rate limits are per replica", attrs...)
		}
	}
	for _, c := range o.Checks {
		if err := c.Check(ctx); err != nil {
			set(c.Name, checkFailed, err)
		} else {
			set(c.Name, checkOK, nil)
		}
	}
	return r
}

// readyProbe serves ReadyPath with a cached round of checks.
type readyProbe struct {
	s *Server
	o HealthOptions

	mu   sync.Mutex // one round at a time; probes arriving meanwhile wait for it
	last Readiness
	at   time.Time
}

func (p *readyProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cacheFor := p.o.CacheFor
	if cacheFor == 0 {
		cacheFor = DefaultReadyCache
	}
	p.mu.Lock()
	now := p.s.opts.Now()
	if p.at.IsZero() || cacheFor < 0 || now.Sub(p.at) >= cacheFor {
		// A probe that hangs up must not cache a cancelled round as a failure.
		p.last = p.s.Ready(context.WithoutCancel(r.Context()), p.o)
		p.at = p.s.opts.Now()
	}
	res := p.last
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !res.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(res)
}

// healthz answers liveness: the process serves HTTP.
func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}
