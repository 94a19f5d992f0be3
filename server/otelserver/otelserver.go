package otelserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/server"
)

// instrumentationName names the meter and tracer. It is the server
// package's path, as before this adapter moved out of it, so that
// dashboards filtering on the scope keep working.
const instrumentationName = "github.com/tenantmcp/tenantmcp/server"

// latencyBuckets are the histogram bounds, in seconds, of call durations
// and pool waits: a millisecond to the default call timeout.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Options configures [New]. The zero value exports to Prometheus and traces
// to the global TracerProvider.
type Options struct {
	// MeterProvider receives the metrics. Nil means a private OpenTelemetry
	// SDK MeterProvider exporting to Prometheus, served by
	// [Telemetry.Handler].
	MeterProvider metric.MeterProvider
	// TracerProvider receives one span per tool call. Nil means
	// otel.GetTracerProvider(), which records nothing until the
	// application installs a provider.
	TracerProvider trace.TracerProvider
	// TenantLabel, if set, adds a "tenant" attribute with its result to
	// the call, latency, denial and rate-limit metrics and to the call's
	// span. Nil (the default, without TenantTopN) adds none: metrics are
	// labelled by tool, outcome, rule and category only, never by subject
	// or tenant, because label values are visible to whoever can scrape and
	// each distinct value is a new time series. Return a coarse,
	// non-identifying value (a plan tier, a shard) or a pseudonym, not a
	// raw tenant id. Without TenantTopN the number of values is the
	// application's to bound.
	TenantLabel func(scope.Scope) string
	// TenantTopN, when above zero, adds the "tenant" label bounded to at
	// most TenantTopN values plus "other" ([OtherTenant]), so an operator
	// sees which tenants call, fail and are limited without one series per
	// tenant: the busiest tenants (the first TenantTopN whose calls a
	// bounded counter proves to pass a small threshold; see topN) keep
	// their label for the life of the process, every other tenant is
	// "other". The value is TenantLabel's, or by default [Pseudonym] of the
	// root tenants (never a raw tenant id). Each instrument then has at most
	// TenantTopN+1 tenant values (times its tool, outcome, rule or limit
	// values), whatever the number of tenants. Negative is refused.
	TenantTopN int
	// TenantLabelKey keys the default pseudonym (HMAC-SHA-256): give every
	// replica the same key so their labels agree, and keep it from whoever
	// scrapes, so that a label cannot be matched to a tenant by hashing
	// candidate ids. Empty: an unkeyed hash (a pseudonym, not a secret).
	TenantLabelKey []byte
	// NoRuntimeMetrics leaves the Go runtime and process metrics
	// (go_goroutines, go_memstats_*, process_resident_memory_bytes,
	// process_open_fds, ...) off the private Prometheus registry. They are
	// on by default there, because a leak of goroutines, memory or file
	// descriptors is what an operator must see before the replica dies; a
	// program that serves its own registry already has them. Ignored with
	// a MeterProvider of the application's own.
	NoRuntimeMetrics bool
}

// Telemetry records a Server's tool calls as OpenTelemetry metrics and
// spans; it implements [server.Tracer]. A nil *Telemetry records nothing,
// so its methods can be called unconditionally.
type Telemetry struct {
	tenant   func(scope.Scope) string
	top      *topN // bounds tenant's values (TenantTopN); nil: unbounded
	tracer   trace.Tracer
	handler  http.Handler
	shutdown func(context.Context) error

	calls      metric.Int64Counter
	duration   metric.Float64Histogram
	denials    metric.Int64Counter
	redactions metric.Int64Counter
	poolWait   metric.Float64Histogram
	rateLimit  metric.Int64Counter
	degraded   metric.Int64Gauge
}

var _ server.Tracer = (*Telemetry)(nil)

// New creates the instruments. Without a MeterProvider it sets up a
// Prometheus exporter on a registry of its own, so several servers (or
// tests) in one process never collide in the global registry. Its errors
// wrap [server.ErrConfig].
func New(o Options) (*Telemetry, error) {
	t := &Telemetry{
		tenant:   o.TenantLabel,
		handler:  http.NotFoundHandler(),
		shutdown: func(context.Context) error { return nil },
	}
	switch {
	case o.TenantTopN < 0:
		return nil, fmt.Errorf("%w: TenantTopN %d is negative", server.ErrConfig, o.TenantTopN)
	case o.TenantTopN > 0:
		t.top = newTopN(o.TenantTopN)
		if t.tenant == nil {
			key := slices.Clone(o.TenantLabelKey)
			t.tenant = func(sc scope.Scope) string { return Pseudonym(sc, key) }
		}
	}
	mp := o.MeterProvider
	if mp == nil {
		reg := promclient.NewRegistry()
		if !o.NoRuntimeMetrics {
			// On the private registry only, so two Telemetry in one process
			// (tests, several servers) never register them twice.
			if err := reg.Register(collectors.NewGoCollector()); err != nil {
				return nil, fmt.Errorf("%w: Go runtime collector: %v", server.ErrConfig, err)
			}
			if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
				return nil, fmt.Errorf("%w: process collector: %v", server.ErrConfig, err)
			}
		}
		exp, err := promexporter.New(promexporter.WithRegisterer(reg), promexporter.WithoutScopeInfo())
		if err != nil {
			return nil, fmt.Errorf("%w: Prometheus exporter: %v", server.ErrConfig, err)
		}
		sdk := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
		mp = sdk
		t.shutdown = sdk.Shutdown
		t.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	tp := o.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	t.tracer = tp.Tracer(instrumentationName)
	m := mp.Meter(instrumentationName)
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	t.calls, err = m.Int64Counter("tenantmcp.tool.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls by tool and outcome."))
	add(err)
	t.duration, err = m.Float64Histogram("tenantmcp.tool.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Tool call latency by tool and outcome."), metric.WithExplicitBucketBoundaries(latencyBuckets...))
	add(err)
	t.denials, err = m.Int64Counter("tenantmcp.denials", metric.WithUnit("{call}"),
		metric.WithDescription("Denied tool calls by tool and rule."))
	add(err)
	t.redactions, err = m.Int64Counter("tenantmcp.redactions", metric.WithUnit("{value}"),
		metric.WithDescription("Values redacted from results and errors, by tool and PII category."))
	add(err)
	t.poolWait, err = m.Float64Histogram("tenantmcp.pool.wait", metric.WithUnit("s"),
		metric.WithDescription("Time tool calls waited for a database connection, by tool and outcome (acquired, timeout)."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	add(err)
	t.rateLimit, err = m.Int64Counter("tenantmcp.rate_limit.rejections", metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls refused by a rate or concurrency limit, by tool and limit."))
	add(err)
	t.degraded, err = m.Int64Gauge("tenantmcp.limit.degraded",
		metric.WithDescription("1 while the shared rate-limit store fails and admission uses per-replica limits (LimitDegraded), else 0."))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: creating instruments: %v", server.ErrConfig, err)
	}
	// The gauge exists from the start, at 0: an alert on "== 1" needs no
	// rule for an absent series.
	t.degraded.Record(context.Background(), 0)
	return t, nil
}

// Handler serves the metrics in the Prometheus text format. With a
// MeterProvider of the application's own it answers 404: that provider's
// exporter decides where metrics go.
func (t *Telemetry) Handler() http.Handler {
	if t == nil {
		return http.NotFoundHandler()
	}
	return t.handler
}

// Shutdown flushes and stops the MeterProvider New created (not one passed
// in Options).
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// RateLimited counts one call refused by a rate or concurrency limit.
// limit names the limit that refused it, from a small fixed set (for
// example "tenant", "subject", "tenant_concurrency"), never a tenant id.
func (t *Telemetry) RateLimited(ctx context.Context, tool, limit string) {
	if t == nil {
		return
	}
	t.rateLimited(ctx, tool, limit, scope.Scope{})
}

func (t *Telemetry) rateLimited(ctx context.Context, tool, limit string, sc scope.Scope) {
	t.rateLimit.Add(ctx, 1, metric.WithAttributes(append([]attribute.KeyValue{attribute.String("tool", tool), attribute.String("limit", limit)},
		t.tenantAttr(sc)...)...))
}

// LimitDegraded sets the gauge tenantmcp.limit.degraded: 1 while the
// shared rate-limit store is failing and admission falls back to
// per-replica buckets, 0 when it answers again. Wire it as
// server.Limits{OnDegraded: tel.LimitDegraded}; it names no tenant.
func (t *Telemetry) LimitDegraded(ctx context.Context, degraded bool) {
	if t == nil {
		return
	}
	var v int64
	if degraded {
		v = 1
	}
	t.degraded.Record(context.WithoutCancel(ctx), v)
}

// tenantAttr is the call's tenant label (TenantLabel, bounded by
// TenantTopN), or none when no tenant label is configured or there is no
// scope.
func (t *Telemetry) tenantAttr(sc scope.Scope) []attribute.KeyValue {
	if t.tenant == nil || sc.IsZero() {
		return nil
	}
	v := t.tenant(sc)
	if t.top != nil {
		v = t.top.label(v)
	}
	return []attribute.KeyValue{attribute.String("tenant", v)}
}

// PoolWait records how long a call waited for a database connection and
// whether it got one (acquired false: the wait bound expired).
func (t *Telemetry) PoolWait(ctx context.Context, tool string, wait time.Duration, acquired bool) {
	if t == nil {
		return
	}
	outcome := "acquired"
	if !acquired {
		outcome = "timeout"
	}
	t.poolWait.Record(ctx, wait.Seconds(), metric.WithAttributes(attribute.String("tool", tool), attribute.String("outcome", outcome)))
}

// toolKey carries the tool name of a call, set by TraceCallStart, to the
// database's pool-wait observer (see PoolWaitObserver).
type toolKey struct{}

// PoolWaitObserver returns the function to pass to
// guardedsql.Options.PoolWaitObserver so that every wait for a database
// connection is recorded by PoolWait under the waiting call's tool.
func (t *Telemetry) PoolWaitObserver() func(ctx context.Context, waited time.Duration, busy bool) {
	return func(ctx context.Context, waited time.Duration, busy bool) {
		tool, _ := ctx.Value(toolKey{}).(string)
		t.PoolWait(ctx, tool, waited, !busy)
	}
}

// TraceLimit counts a refusal by its tool (for a tools/call; its method
// otherwise) and rule, never by tenant; it implements [server.Tracer].
func (t *Telemetry) TraceLimit(ctx context.Context, e *server.LimitError) {
	if t == nil {
		return
	}
	name := e.Tool
	if name == "" {
		name = e.Method
	}
	// The tenant label, when configured, comes from the scope the server
	// put in the context; a refusal made before it (the HTTP front's
	// admission) counts without one.
	sc, _ := scope.FromContext(ctx)
	t.rateLimited(ctx, name, e.Rule, sc)
}

// spanKey carries the call's span from TraceCallStart to TraceCallEnd.
type spanKey struct{}

// TraceCallStart opens the call's span; it implements [server.Tracer]. Its
// attributes follow the OpenTelemetry conventions for MCP; the subject and
// the tenant never appear (unless TenantLabel says otherwise, in
// TraceCallEnd).
func (t *Telemetry) TraceCallStart(ctx context.Context, d server.TraceCallStartData) context.Context {
	if t == nil {
		return ctx
	}
	ctx = context.WithValue(ctx, toolKey{}, d.Tool)
	ctx, span := t.tracer.Start(ctx, "tools/call "+d.Tool, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", d.Tool)))
	return context.WithValue(ctx, spanKey{}, span)
}

// TraceCallEnd records the call's metrics and ends its span; it implements
// [server.Tracer].
func (t *Telemetry) TraceCallEnd(ctx context.Context, d server.TraceCallEndData) {
	if t == nil {
		return
	}
	ctx = context.WithoutCancel(ctx) // a cancelled call is still counted
	attrs := []attribute.KeyValue{attribute.String("tool", d.Tool), attribute.String("outcome", d.Outcome)}
	tenant := t.tenantAttr(d.Scope) // once per call: calls, latency and denials agree
	set := metric.WithAttributes(append(attrs, tenant...)...)
	t.calls.Add(ctx, 1, set)
	t.duration.Record(ctx, d.Duration.Seconds(), set)
	if d.Outcome == server.OutcomeDenied {
		t.denials.Add(ctx, 1, metric.WithAttributes(append([]attribute.KeyValue{
			attribute.String("tool", d.Tool), attribute.String("rule", d.Rule)}, tenant...)...))
	}
	for _, c := range redact.Categories() {
		if n := d.Redactions.Redacted(c); n > 0 {
			t.redactions.Add(ctx, int64(n), metric.WithAttributes(attribute.String("tool", d.Tool), attribute.String("category", string(c))))
		}
	}
	span, _ := ctx.Value(spanKey{}).(trace.Span)
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("tenantmcp.outcome", d.Outcome), attribute.String("tenantmcp.call_id", d.CallID))
	span.SetAttributes(tenant...)
	if d.Rule != "" {
		span.SetAttributes(attribute.String("tenantmcp.rule", d.Rule))
	}
	if d.Outcome == server.OutcomeError || d.Outcome == server.OutcomeUnavailable || d.Outcome == server.OutcomeUnconfirmed {
		span.SetStatus(codes.Error, d.Outcome)
	}
	span.End()
}
