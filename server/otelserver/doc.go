// Package otelserver records the tool calls of a [server.Server] as
// OpenTelemetry metrics and traces, and serves the metrics in the Prometheus
// format. It implements [server.Tracer]; it lives in a package of its own so
// that a program which imports server without it links neither the
// OpenTelemetry SDK nor Prometheus.
//
// Create a [Telemetry] with [New], pass it as server.Options.Tracer, pass
// [Telemetry.PoolWaitObserver] as guardedsql.Options.PoolWaitObserver, and
// serve [Telemetry.Handler] at server.HTTPOptions.MetricsPath (or on a
// listener of its own that only the monitoring system reaches).
//
// Metrics (Prometheus names, as served by Handler):
//
//	tenantmcp_tool_calls_total{tool,outcome}            calls by outcome (server.Outcome*)
//	tenantmcp_tool_call_duration_seconds{tool,outcome}  call latency histogram
//	tenantmcp_denials_total{tool,rule}                  denials by rule (server.DenyError.Rule)
//	tenantmcp_redactions_total{tool,category}           values redacted by category
//	tenantmcp_pool_wait_seconds{tool,outcome}           waits for a database connection (PoolWait)
//	tenantmcp_rate_limit_rejections_total{tool,limit}   calls refused by a rate or concurrency limit (RateLimited)
//	tenantmcp_limit_degraded                            1 while the shared rate store fails and limits are per replica (LimitDegraded)
//	go_goroutines, go_memstats_*, process_*             Go runtime and process metrics (Options.NoRuntimeMetrics)
//
// With [Options.TenantTopN] the call, latency, denial and rate-limit
// metrics also carry a "tenant" label of at most TenantTopN values plus
// [OtherTenant]: the busiest tenants keep their own label, a [Pseudonym]
// of the root tenants by default (keyed by Options.TenantLabelKey), never
// a tenant id. The bound holds whatever the number of tenants, because a
// label slot, once given, is never given again (see topN).
//
// Each tool call is one server span named "tools/call <tool>" with the
// attributes of the OpenTelemetry conventions for MCP, the outcome, the
// rule and the call id. Metrics and spans never carry the subject or a
// tenant id: [Options.TenantTopN] and [Options.TenantLabel] opt in to a
// tenant label (bounded, and a pseudonym by default).
package otelserver
