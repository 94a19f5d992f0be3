// Package rpctest posts one JSON-RPC request (a tools/call, or any method)
// to a streamable HTTP MCP endpoint the way a bare HTTP client does, for
// tests that must see what an MCP client library would hide: the HTTP
// status (429), Retry-After, and the JSON-RPC error of a refused request. It speaks the stateless mode
// (no session), reading the reply from a JSON or an SSE body.
package rpctest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Reply is what the client got back.
type Reply struct {
	Status     int
	RetryAfter string
	// Err is the JSON-RPC error, if the reply was one.
	Err *jsonrpc.Error
	// IsError, Text and Structured are the tool result's.
	IsError    bool
	Text       string
	Structured json.RawMessage
}

// OK reports a 200 carrying a tool result that is not an error.
func (r Reply) OK() bool { return r.Status == http.StatusOK && r.Err == nil && !r.IsError }

// Call posts tools/call of tool with args to endpoint with the bearer
// token. A reply body is decoded for 200 and 429; other statuses leave
// only Status set.
func Call(ctx context.Context, endpoint, token, tool string, args any) (Reply, error) {
	return Post(ctx, endpoint, token, "tools/call", map[string]any{"name": tool, "arguments": args})
}

// Post posts a request of method with params, as Call does.
func Post(ctx context.Context, endpoint, token, method string, params any) (Reply, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return Reply{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, err
	}
	r := Reply{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		return r, nil
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if i := bytes.Index(raw, []byte("data: ")); i >= 0 {
			raw = raw[i+len("data: "):]
			if j := bytes.IndexByte(raw, '\n'); j >= 0 {
				raw = raw[:j]
			}
		}
	}
	var msg struct {
		Result struct {
			IsError           bool            `json:"isError"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			Content           []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *jsonrpc.Error `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		return r, fmt.Errorf("reply %d %q: %w", resp.StatusCode, raw, err)
	}
	r.Err, r.IsError, r.Structured = msg.Error, msg.Result.IsError, msg.Result.StructuredContent
	for _, c := range msg.Result.Content {
		r.Text += c.Text
	}
	return r, nil
}
