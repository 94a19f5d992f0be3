package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// noEcho wraps the go-sdk's streamable HTTP handler so that the bodies of
// its 400 (and 403) responses never echo the client's bytes: its messages
// quote JSON decoding errors ("malformed payload: json: cannot unmarshal
// … into Go struct field …"), header values and the Host. A response the
// client has sent something wrong gets one fixed sentence; a JSON-RPC
// error keeps its id and code with a fixed message per code, and its data
// scrubbed (see scrubData). Other responses, streams included, pass
// through untouched.
func noEcho(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bw := &badRequestWriter{ResponseWriter: w}
		if x := exchangeOf(auth.TokenInfoFromContext(r.Context())); x != nil {
			bw.uri = x.uri
		}
		h.ServeHTTP(bw, r)
		bw.finish()
	})
}

// safeBadRequests are go-sdk 400 bodies that quote nothing of the request.
var safeBadRequests = map[string]bool{
	"Accept must contain both 'application/json' and 'text/event-stream'": true,
	"Accept must contain 'text/event-stream' for GET requests":            true,
	"POST requires a non-empty body":                                      true,
	"Bad Request: GET requires an Mcp-Session-Id header":                  true,
	"Bad Request: DELETE requires an Mcp-Session-Id header":               true,
	"can't send Last-Event-ID for POST request":                           true,
	"stream replay unsupported":                                           true,
	"failed to read body":                                                 true,
}

const (
	badRequestBody = "Bad Request: the request is not a valid MCP message for this endpoint (check the JSON-RPC body and the Mcp-* headers)"
	forbiddenBody  = "Forbidden"
)

type badRequestWriter struct {
	http.ResponseWriter
	status int // the status written, 0 before
	held   bool
	buf    bytes.Buffer
	uri    string // the params.uri the client sent, which its error may name
}

func (w *badRequestWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	if code == http.StatusBadRequest || code == http.StatusForbidden {
		w.held = true // the body decides what is written: see finish
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *badRequestWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.held {
		if w.buf.Len() < 64<<10 {
			w.buf.Write(b)
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes through for streams; a held response is written by finish.
func (w *badRequestWriter) Flush() {
	if w.held {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *badRequestWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *badRequestWriter) finish() {
	if !w.held {
		return
	}
	hd := w.ResponseWriter.Header()
	hd.Del("Content-Length")
	if strings.HasPrefix(hd.Get("Content-Type"), "application/json") {
		if body, ok := rpcErrorBody(w.buf.Bytes(), w.uri); ok {
			hd.Set("Content-Length", strconv.Itoa(len(body)))
			w.ResponseWriter.WriteHeader(w.status)
			w.ResponseWriter.Write(body)
			return
		}
	}
	msg := strings.TrimSpace(w.buf.String())
	switch {
	case w.status == http.StatusForbidden && strings.HasPrefix(msg, "Forbidden: invalid Host header"):
		msg = "Forbidden: invalid Host header"
	case w.status == http.StatusForbidden:
		msg = forbiddenBody
	case strings.HasPrefix(msg, "Bad Request: Unsupported protocol version"):
		msg = "Bad Request: unsupported protocol version (Mcp-Protocol-Version)"
	case !safeBadRequests[msg]:
		msg = badRequestBody
	}
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.ResponseWriter.WriteHeader(w.status)
	w.ResponseWriter.Write([]byte(msg + "\n"))
}

// rpcErrorBody rewrites a JSON-RPC error response: its id and code, a
// fixed message for the code, and its data scrubbed.
func rpcErrorBody(b []byte, uri string) ([]byte, bool) {
	var resp struct {
		ID    json.RawMessage `json:"id,omitempty"`
		Error *struct {
			Code int64           `json:"code"`
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &resp) != nil || resp.Error == nil {
		return nil, false
	}
	msg := "bad request"
	switch resp.Error.Code {
	case jsonrpc.CodeInvalidRequest:
		msg = "invalid request"
	case jsonrpc.CodeInvalidParams:
		msg = "invalid params"
	case jsonrpc.CodeParseError:
		msg = "parse error"
	case mcp.CodeUnsupportedProtocolVersion:
		msg = "unsupported protocol version"
	case mcp.CodeMissingRequiredClientCapabilities:
		msg = "missing required client capabilities"
	case mcp.CodeHeaderMismatch:
		msg = "an Mcp-* header does not match the request"
	}
	e := map[string]any{"code": resp.Error.Code, "message": msg}
	if d := scrubData(resp.Error.Code, resp.Error.Data, uri); d != nil {
		e["data"] = d
	}
	out := map[string]any{"jsonrpc": "2.0", "error": e}
	if len(resp.ID) > 0 && len(resp.ID) <= 66 { // a longer id is not repeated
		out["id"] = resp.ID
	}
	body, err := json.Marshal(out)
	return body, err == nil
}

// redacted replaces a data value that may echo the client.
const redacted = "(redacted)"

// versionToken is the shape of a requested version echoed back: a short
// token such as 2026-07-28 or v999.0.0 (clients compare it with theirs).
var versionToken = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$`)

// scrubData scrubs values, not structure: every field of an error's data
// stays (clients act on them: -32022 supported and requested, -32021
// requiredCapabilities, a resource-not-found's uri). Invariant: a value
// passes only if the server produced it (supported, requiredCapabilities)
// or it is the client's own input in a safe shape (requested as a short
// version token, uri exactly as this client sent it); every other
// value is replaced by "(redacted)", never dropped.
func scrubData(code int64, raw json.RawMessage, uri string) any {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return nil
	}
	var data map[string]json.RawMessage
	if json.Unmarshal(raw, &data) != nil {
		return redacted
	}
	out := make(map[string]any, len(data))
	for k, v := range data {
		var str string
		isStr := json.Unmarshal(v, &str) == nil
		switch {
		case code == mcp.CodeUnsupportedProtocolVersion && k == "supported",
			code == mcp.CodeMissingRequiredClientCapabilities && k == "requiredCapabilities":
			out[k] = v
		case code == mcp.CodeUnsupportedProtocolVersion && k == "requested" && isStr && versionToken.MatchString(str),
			k == "uri" && isStr && uri != "" && str == uri:
			out[k] = str
		default:
			out[k] = redacted
		}
	}
	return out
}
