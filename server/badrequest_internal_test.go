package server

import (
	"encoding/json"
	"testing"
)

// TestScrubDataKeepsStructure: every data field stays; values the server
// produced pass, a client value only in its safe shape, anything else is
// replaced.
func TestScrubDataKeepsStructure(t *testing.T) {
	for _, c := range []struct {
		in, uri, want string
	}{
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"need elicitation","data":{"requiredCapabilities":{"elicitation":{}}}}}`, "",
			`{"error":{"code":-32021,"data":{"requiredCapabilities":{"elicitation":{}}},"message":"missing required client capabilities"},"id":1,"jsonrpc":"2.0"}`},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Resource not found","data":{"uri":"notes://a/1"}}}`, "notes://a/1",
			`{"error":{"code":-32602,"data":{"uri":"notes://a/1"},"message":"invalid params"},"id":1,"jsonrpc":"2.0"}`},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Resource not found","data":{"uri":"notes://other/2"}}}`, "notes://a/1",
			`{"error":{"code":-32602,"data":{"uri":"(redacted)"},"message":"invalid params"},"id":1,"jsonrpc":"2.0"}`},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"x","data":{"header":"secret"}}}`, "",
			`{"error":{"code":-32020,"data":{"header":"(redacted)"},"message":"an Mcp-* header does not match the request"},"id":1,"jsonrpc":"2.0"}`},
	} {
		got, ok := rpcErrorBody([]byte(c.in), c.uri)
		var a, b any
		json.Unmarshal(got, &a)
		json.Unmarshal([]byte(c.want), &b)
		ga, _ := json.Marshal(a)
		gb, _ := json.Marshal(b)
		if !ok || string(ga) != string(gb) {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}
