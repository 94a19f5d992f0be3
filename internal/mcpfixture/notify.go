package mcpfixture

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenantmcp/tenantmcp/server"
)

// registerNotify adds the fixtures that notify while they run: three
// progress steps (sent only when the client gave a progressToken) and
// three info log messages, about 50ms apart.
func registerNotify(s *server.Server) error {
	steps := func(ctx context.Context, send func(i int) error) error {
		for i := range 3 {
			if i > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(50 * time.Millisecond):
				}
			}
			if err := send(i); err != nil {
				return err
			}
		}
		return nil
	}
	logs := []string{"Tool execution started", "Tool processing data", "Tool execution completed"}
	return errors.Join(
		textTool(s, "test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.", func(ctx context.Context) (string, error) {
			return "Progress reported", steps(ctx, func(i int) error {
				return server.Progress(ctx, float64(50*i), 100, fmt.Sprintf("step %d of 3", i+1))
			})
		}),
		textTool(s, "test_tool_with_logging", "Logs three info messages.", func(ctx context.Context) (string, error) {
			return "Logging completed", steps(ctx, func(i int) error {
				return server.Log(ctx, "info", "test_tool_with_logging", logs[i])
			})
		}),
	)
}
