package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
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
)

// instrumentationName names the meter and tracer of this package.
const instrumentationName = "github.com/tenantmcp/tenantmcp/server"

// latencyBuckets are the histogram bounds, in seconds, of call durations
// and pool waits: a millisecond to the default call timeout.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// TelemetryOptions configures NewTelemetry.
type TelemetryOptions struct {
	// MeterProvider receives the metrics. Nil means a private OpenTelemetry
	// SDK MeterProvider exporting to Prometheus, served by
	// Telemetry.Handler (and by HTTPOptions.MetricsPath).
	MeterProvider metric.MeterProvider
	// TracerProvider receives one span per tool call. Nil means
	// otel.GetTracerProvider(), which records nothing until the
	// application installs a provider.
	TracerProvider trace.TracerProvider
	// TenantLabel, if set, adds a "tenant" attribute with its result to
	// the call, latency and denial metrics and to the call's span. Nil (the
	// default) adds none: metrics are labelled by tool, outcome, rule and
	// category only, never by subject or tenant, because label values are
	// visible to whoever can scrape and each distinct value is a new time
	// series. Return a coarse, non-identifying value (a plan tier, a shard)
	// or a pseudonym, not a raw tenant id.
	TenantLabel func(scope.Scope) string
}

// Telemetry records OpenTelemetry metrics and traces of a Server's tool
// calls. Create it with NewTelemetry and pass it as Options.Telemetry. A
// nil *Telemetry records nothing, so its methods can be called
// unconditionally.
//
// Metrics (Prometheus names, as served by Handler):
//
//	tenantmcp_tool_calls_total{tool,outcome}            calls by outcome (Outcome*)
//	tenantmcp_tool_call_duration_seconds{tool,outcome}  call latency histogram
//	tenantmcp_denials_total{tool,rule}                  denials by rule (DenyError.Rule)
//	tenantmcp_redactions_total{tool,category}           values redacted by category
//	tenantmcp_pool_wait_seconds{tool,outcome}           waits for a database connection (PoolWait)
//	tenantmcp_rate_limit_rejections_total{tool,limit}   calls refused by a rate or concurrency limit (RateLimited)
type Telemetry struct {
	tenant   func(scope.Scope) string
	tracer   trace.Tracer
	handler  http.Handler
	shutdown func(context.Context) error

	calls      metric.Int64Counter
	duration   metric.Float64Histogram
	denials    metric.Int64Counter
	redactions metric.Int64Counter
	poolWait   metric.Float64Histogram
	rateLimit  metric.Int64Counter
}

// NewTelemetry creates the instruments. Without a MeterProvider it sets up
// a Prometheus exporter on a registry of its own, so several servers (or
// tests) in one process never collide in the global registry.
func NewTelemetry(o TelemetryOptions) (*Telemetry, error) {
	t := &Telemetry{
		tenant:   o.TenantLabel,
		handler:  http.NotFoundHandler(),
		shutdown: func(context.Context) error { return nil },
	}
	mp := o.MeterProvider
	if mp == nil {
		reg := promclient.NewRegistry()
		exp, err := promexporter.New(promexporter.WithRegisterer(reg), promexporter.WithoutScopeInfo())
		if err != nil {
			return nil, fmt.Errorf("%w: Prometheus exporter: %v", ErrConfig, err)
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
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: creating instruments: %v", ErrConfig, err)
	}
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

// Shutdown flushes and stops the MeterProvider NewTelemetry created (not
// one passed in TelemetryOptions).
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
	t.rateLimit.Add(ctx, 1, metric.WithAttributes(attribute.String("tool", tool), attribute.String("limit", limit)))
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

// toolKey carries the tool name of a call to the database's pool-wait
// observer (see PoolWaitObserver).
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

// startCall opens the call's span. Its attributes follow the OpenTelemetry
// conventions for MCP; the subject and the tenant never appear (unless
// TenantLabel says otherwise, in finishCall).
func (t *Telemetry) startCall(ctx context.Context, tool string) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	ctx = context.WithValue(ctx, toolKey{}, tool)
	return t.tracer.Start(ctx, "tools/call "+tool, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", tool)))
}

// finishCall records the call's metrics from its audit record and ends
// its span.
func (t *Telemetry) finishCall(ctx context.Context, span trace.Span, a *auditRecord) {
	if t == nil {
		return
	}
	ctx = context.WithoutCancel(ctx) // a cancelled call is still counted
	attrs := []attribute.KeyValue{attribute.String("tool", a.tool), attribute.String("outcome", a.outcome)}
	var tenant []attribute.KeyValue
	if t.tenant != nil && !a.scope.IsZero() {
		tenant = []attribute.KeyValue{attribute.String("tenant", t.tenant(a.scope))}
	}
	set := metric.WithAttributes(append(attrs, tenant...)...)
	t.calls.Add(ctx, 1, set)
	t.duration.Record(ctx, a.duration.Seconds(), set)
	if a.outcome == OutcomeDenied {
		t.denials.Add(ctx, 1, metric.WithAttributes(append([]attribute.KeyValue{
			attribute.String("tool", a.tool), attribute.String("rule", a.rule)}, tenant...)...))
	}
	for _, c := range redact.Categories() {
		if n := a.report.Redacted(c); n > 0 {
			t.redactions.Add(ctx, int64(n), metric.WithAttributes(attribute.String("tool", a.tool), attribute.String("category", string(c))))
		}
	}
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("tenantmcp.outcome", a.outcome), attribute.String("tenantmcp.call_id", a.callID))
	span.SetAttributes(tenant...)
	if a.rule != "" {
		span.SetAttributes(attribute.String("tenantmcp.rule", a.rule))
	}
	if a.outcome == OutcomeError || a.outcome == OutcomeUnavailable {
		span.SetStatus(codes.Error, a.outcome)
	}
	span.End()
}
