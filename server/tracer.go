package server

import (
	"context"
	"time"

	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Tracer observes a Server's tool calls, for metrics and traces; set it as
// [Options.Tracer]. Package server/otelserver implements it with
// OpenTelemetry and a Prometheus exporter. Only this interface lives here,
// as pgx keeps only its QueryTracer in the core, so that a program which
// records no telemetry links no telemetry SDK; a nil Options.Tracer costs
// one comparison per call.
//
// The server calls TraceCallStart before a call and TraceCallEnd after it
// with the context TraceCallStart returned, so an implementation can carry
// a span or the tool's name from one to the other. Methods are called
// concurrently and must not block.
type Tracer interface {
	// TraceCallStart is called when a tools/call begins, before the
	// caller's scope is derived. The context it returns is the call's: the
	// handler and the database see it.
	TraceCallStart(ctx context.Context, data TraceCallStartData) context.Context
	// TraceCallEnd is called once per TraceCallStart, after the call is
	// answered and audited, whatever its outcome (the context may be
	// cancelled).
	TraceCallEnd(ctx context.Context, data TraceCallEndData)
	// TraceLimit is called for every call that [Options.Limits] refuses,
	// before [Limits.OnReject].
	TraceLimit(ctx context.Context, err *LimitError)
}

// TraceCallStartData is what [Tracer.TraceCallStart] learns of a call.
type TraceCallStartData struct {
	Tool string
}

// TraceCallEndData is what [Tracer.TraceCallEnd] learns of a call: the
// fields of its audit record that metrics and spans use.
type TraceCallEndData struct {
	Tool    string
	CallID  string // the correlation id of the audit record and of internal errors
	Outcome string // one of the Outcome* constants
	Rule    string // the rule of a denial or refusal; "" otherwise
	// Scope is the caller's scope, zero if none was derived. It identifies
	// the tenant: never use it as a label value as it is.
	Scope    scope.Scope
	Duration time.Duration
	// Redactions counts the values redacted from the result and errors.
	Redactions redact.Report
}
