package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// mcpClient is a minimal MCP client over streamable HTTP: initialize once,
// then tools/call on the session. It is deliberately thin (no SDK, no
// schema handling, responses checked by a byte scan after the first) so
// that the client's share of a loaded 2-core machine stays small and
// equal for every server.
type mcpClient struct {
	url, token, session string
	hc                  *http.Client
	id                  int
}

const protocolVersion = "2025-06-18"

func newMCPClient(ctx context.Context, hc *http.Client, url, token string) (*mcpClient, error) {
	c := &mcpClient{url: url, token: token, hc: hc}
	msg, hdr, err := c.post(ctx, map[string]any{
		"jsonrpc": "2.0", "id": c.next(), "method": "initialize",
		"params": map[string]any{
			"protocolVersion": protocolVersion,
			"capabilities":    map[string]any{},
			"clientInfo":      map[string]any{"name": "tenantmcp-bench", "version": "0"},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if err := rpcError(msg); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	c.session = hdr.Get("Mcp-Session-Id")
	if _, _, err := c.post(ctx, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	return c, nil
}

func (c *mcpClient) next() int { c.id++; return c.id }

// post sends one JSON-RPC message and returns the JSON-RPC message of the
// answer (nil for a notification's 202), whether it came as JSON or as a
// server-sent event.
func (c *mcpClient) post(ctx context.Context, body any) ([]byte, http.Header, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", protocolVersion)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, nil, err
	}
	switch {
	case resp.StatusCode == http.StatusAccepted:
		return nil, resp.Header, nil
	case resp.StatusCode != http.StatusOK:
		return nil, nil, &httpStatusError{code: resp.StatusCode, body: strings.TrimSpace(string(data[:min(len(data), 300)]))}
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data = sseData(data)
		if data == nil {
			return nil, nil, errNoResult
		}
	}
	return data, resp.Header, nil
}

// httpStatusError is an answer other than 200 or 202; the soak tells a
// 429 (a limit) from other failures by its code.
type httpStatusError struct {
	code int
	body string
}

func (e *httpStatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.body) }

// sseData returns the data of the last event in an event stream that
// carries a JSON-RPC response (an "id" and a "result" or "error").
func sseData(stream []byte) []byte {
	var last []byte
	for ev := range bytes.SplitSeq(stream, []byte("\n\n")) {
		var data []byte
		for line := range bytes.SplitSeq(ev, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
			}
		}
		if bytes.Contains(data, []byte(`"result"`)) || bytes.Contains(data, []byte(`"error"`)) {
			last = data
		}
	}
	return last
}

func rpcError(msg []byte) error {
	var m struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return fmt.Errorf("undecodable JSON-RPC message: %w", err)
	}
	if m.Error != nil {
		return fmt.Errorf("JSON-RPC error %d: %s", m.Error.Code, m.Error.Message)
	}
	return nil
}

// listBookings calls the list_bookings tool for window i. With check it
// decodes the answer and requires a full page; otherwise it only scans
// for a result that is not a tool error.
func (c *mcpClient) listBookings(ctx context.Context, i int, check bool) error {
	from, to := window(i)
	msg, _, err := c.post(ctx, map[string]any{
		"jsonrpc": "2.0", "id": c.next(), "method": "tools/call",
		"params": map[string]any{"name": "list_bookings", "arguments": map[string]any{"from": from, "to": to}},
	})
	if err != nil {
		return err
	}
	if !check {
		if !bytes.Contains(msg, []byte(`"result"`)) || bytes.Contains(msg, []byte(`"isError":true`)) {
			return fmt.Errorf("tools/call failed: %.300s", msg)
		}
		return nil
	}
	if err := rpcError(msg); err != nil {
		return err
	}
	var m struct {
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Bookings []json.RawMessage `json:"bookings"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return err
	}
	if m.Result.IsError || len(m.Result.StructuredContent.Bookings) != pageRows {
		return fmt.Errorf("tools/call list_bookings: isError=%v, %d bookings (want %d): %.300s",
			m.Result.IsError, len(m.Result.StructuredContent.Bookings), pageRows, msg)
	}
	return nil
}

// close ends the session.
func (c *mcpClient) close() {
	if c.session == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", c.session)
	req.Header.Set("Mcp-Protocol-Version", protocolVersion)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if resp, err := c.hc.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 128,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
}
