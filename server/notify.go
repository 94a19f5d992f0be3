//lint:file-ignore SA1019 logging is deprecated by 2026-07-28 (SEP-2577) but clients still receive it during the deprecation window

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/flow"
)

// Notifications a handler sends while it runs. Invariant: everything
// textual a notification carries passes the caller's redactor (and, for a
// tool under flow control, joins the caller's taint first, as a result
// does), and it goes only to the request that made it: on the request's
// own session, related to the request (on HTTP, its response stream), so
// no other session or tenant can receive it.

// errNotHandler: the context is not a handler's (or the request has no
// session to notify on).
var errNotHandler = errors.New("server: notification outside a tool, prompt or resource handler")

// Progress sends the client a progress notification for the request the
// handler serves (MCP notifications/progress): progress so far, total if
// known (0: unknown), and a message, redacted for the caller. A client
// that asked for no progress (no progressToken in the request's _meta)
// gets nothing, and Progress returns nil.
func Progress(ctx context.Context, progress, total float64, message string) error {
	rq := requestOf(ctx)
	if rq == nil || rq.session == nil {
		return errNotHandler
	}
	token := rq.meta["progressToken"]
	if token == nil {
		return nil
	}
	msg := rq.red.String(message)
	if err := recordNotice(ctx, rq, message); err != nil {
		return err
	}
	return rq.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
		Progress: progress, Total: total, Message: msg})
}

// logLevels are the MCP log levels (RFC 5424 severities).
var logLevels = map[mcp.LoggingLevel]bool{"debug": true, "info": true, "notice": true, "warning": true,
	"error": true, "critical": true, "alert": true, "emergency": true}

// Log sends the client a log message (MCP notifications/message) from the
// handler of its request: level is one of the MCP levels ("debug" …
// "emergency"), logger names the source (may be empty), and data (a
// string or any JSON-encodable value) is sent as its redacted JSON. The
// client gets it only at or above the level it asked for: a 2026-07-28
// request's _meta "io.modelcontextprotocol/logLevel" (none: no message),
// a 2025-era session's logging/setLevel (a stateless 2025-era request:
// "info"). A message below it is dropped and Log returns nil.
//
// Logging is deprecated as of MCP 2026-07-28 (SEP-2577) but still spoken;
// the server's own operational log stays Options.Logger.
func Log(ctx context.Context, level mcp.LoggingLevel, logger string, data any) error {
	rq := requestOf(ctx)
	if rq == nil || rq.session == nil {
		return errNotHandler
	}
	if !logLevels[level] {
		return fmt.Errorf("server: unknown log level %q", level)
	}
	js, err := rq.red.JSON(data)
	if err != nil {
		return fmt.Errorf("server: log data: %w", err)
	}
	if err := recordNotice(ctx, rq, data); err != nil {
		return err
	}
	//lint:ignore SA1019 deprecated in 2026-07-28, still spoken by older clients
	return rq.session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: rq.red.String(logger), Data: json.RawMessage(js)})
}

// recordNotice joins what a notification carries into the caller's taint
// before the client sees it, as record does for a result: a handler that
// fails after notifying must not have leaked its data unlabelled.
func recordNotice(ctx context.Context, rq *request, out any) error {
	if fc, ok := flow.FromContext(ctx); ok && fc != nil {
		if err := fc.Record(ctx, out, rq.red.Report()); err != nil {
			return fmt.Errorf("recording the flow label: %w", err)
		}
	}
	return nil
}

// CanInput reports whether Input could ask the client for a request of
// r's kind (elicitation, sampling, roots) in the handler's request: the
// client declared the capability and can be asked (a 2026-07-28 client,
// or a 2025-era client in a session). It asks nothing.
func CanInput(ctx context.Context, r mcp.InputRequest) bool {
	rq := requestOf(ctx)
	return rq != nil && rq.in != nil && rq.in.can(r) == nil
}
