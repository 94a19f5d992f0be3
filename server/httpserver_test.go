package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/server"
)

type bearer struct{ tok string }

var legacy = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// connectHTTP opens a 2025-11-25 session (initialize; a stateful session
// where the endpoint has HTTPOptions.Sessions).
func connectHTTP(ctx context.Context, url, tok string) (*mcp.ClientSession, error) {
	return mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer{tok}}}, legacy)
}

// TestSessionCapAndIdleTimeout: a subject cannot hold more than
// MaxSessionsPerSubject sessions (another subject can), idle sessions are
// closed at SessionTimeout, and their slots come back.
func TestSessionCapAndIdleTimeout(t *testing.T) {
	f := newFixture(t, nil)
	h := addHold(t, f.srv)
	close(h.release)
	ts := httpServer(t, f, server.HTTPOptions{Sessions: true, MaxSessionsPerSubject: 2, SessionTimeout: 500 * time.Millisecond})
	ctx := context.Background()
	ann := f.token(t, "ann", "north", time.Hour)
	var open []*mcp.ClientSession
	for i := range 2 {
		cs, err := connectHTTP(ctx, ts.URL, ann)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		open = append(open, cs)
	}
	if cs, err := connectHTTP(ctx, ts.URL, ann); err == nil {
		cs.Close()
		t.Fatal("a third session of the same subject was opened")
	} else if !strings.Contains(err.Error(), "429") && !strings.Contains(err.Error(), "Too Many Requests") {
		t.Logf("third session refused with: %v", err)
	}
	ben, err := connectHTTP(ctx, ts.URL, f.token(t, "ben", "north", time.Hour))
	if err != nil {
		t.Fatalf("another subject's session: %v", err)
	}
	ben.Close()

	// Idle sessions expire; the subject may open new ones.
	start := time.Now()
	for {
		cs, err := connectHTTP(ctx, ts.URL, ann)
		if err == nil {
			t.Logf("slot free again %s after the sessions went idle (timeout 500ms)", time.Since(start).Round(10*time.Millisecond))
			cs.Close()
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("sessions never expired: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := open[0].CallTool(ctx, &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{"tag": "x"}}); err == nil {
		t.Fatal("a call on an expired session succeeded")
	}
	for _, cs := range open {
		cs.Close()
	}
}

func serveFixture(t *testing.T, f *fixture, o server.HTTPOptions) (addr string, stop func() (time.Duration, error)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.ResourceURL = "http://" + ln.Addr().String() + "/mcp"
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- f.srv.Serve(ctx, ln, o) }()
	t.Cleanup(cancel)
	return ln.Addr().String(), func() (time.Duration, error) {
		start := time.Now()
		cancel()
		select {
		case err := <-errc:
			return time.Since(start), err
		case <-time.After(60 * time.Second):
			return time.Since(start), errors.New("Serve did not return")
		}
	}
}

// closedAfter reads from c until the server closes it and says how long
// that took (capped by max).
func closedAfter(t *testing.T, c net.Conn, max time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(max))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %s", max)
	}
	return time.Since(start)
}

// TestStalledAndIdleConnectionsClosed: a request whose body stalls is cut
// off at ReadTimeout, a keep-alive connection left idle is closed at
// IdleTimeout; neither is held open.
func TestStalledAndIdleConnectionsClosed(t *testing.T) {
	f := newFixture(t, nil)
	addr, _ := serveFixture(t, f, server.HTTPOptions{ReadTimeout: 300 * time.Millisecond, IdleTimeout: 500 * time.Millisecond})
	tok := f.token(t, "ann", "north", time.Hour)

	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	fmt.Fprintf(stalled, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":", addr, tok)
	t.Logf("stalled body: connection closed after %s (ReadTimeout 300ms)", closedAfter(t, stalled, 10*time.Second).Round(10*time.Millisecond))

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprintf(idle, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", server.WellKnownProtectedResource, addr)
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("metadata: %d close=%v", resp.StatusCode, resp.Close)
	}
	t.Logf("idle keep-alive: connection closed after %s (IdleTimeout 500ms)", closedAfter(t, idle, 10*time.Second).Round(10*time.Millisecond))
}

// TestOriginAllowlist: a browser request from an origin that is neither
// the endpoint's own nor allowed is refused before authentication.
func TestOriginAllowlist(t *testing.T) {
	f := newFixture(t, nil)
	ts := httpServer(t, f, server.HTTPOptions{AllowedOrigins: []string{"https://app.example"}})
	tok := f.token(t, "ann", "north", time.Hour)
	for origin, want403 := range map[string]bool{
		"https://evil.example":   true,
		"null":                   true,
		"https://app.example":    false,
		"https://notes.test":     false, // the endpoint's own origin
		"":                       false, // not a browser
		"https://app.example.io": true,
	} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.StatusCode == http.StatusForbidden; got != want403 {
			t.Errorf("Origin %q: status %d, want 403 = %v", origin, resp.StatusCode, want403)
		}
	}
	if _, err := f.srv.Handler(server.HTTPOptions{ResourceURL: "https://notes.test/mcp", AllowedOrigins: []string{"app.example"}}); !errors.Is(err, server.ErrConfig) {
		t.Fatalf("an allowlist entry that is no origin: err = %v", err)
	}
}

// TestMaxTokenLifetime: a token that verifies but lives longer than the
// server accepts is refused on HTTP (401) and at stdio start.
func TestMaxTokenLifetime(t *testing.T) {
	f := newFixture(t, func(o *server.Options) { o.MaxTokenLifetime = 2 * time.Hour })
	h := addHold(t, f.srv)
	close(h.release)
	ts := httpServer(t, f, server.HTTPOptions{})
	ctx := context.Background()
	long := f.token(t, "ann", "north", 24*365*time.Hour)
	r, err := callHTTP(ctx, ts.URL, long, "hold", "x")
	if err != nil || r.Status != http.StatusUnauthorized {
		t.Fatalf("long-lived token: status %d, %v; want 401", r.Status, err)
	}
	r, err = callHTTP(ctx, ts.URL, f.token(t, "ann", "north", time.Hour), "hold", "x")
	if err != nil || r.Status != http.StatusOK || r.Err != nil {
		t.Fatalf("token within the lifetime: %+v %v", r, err)
	}
	if _, err := connectStdio(t, f, staticToken(long)); !errors.Is(err, server.ErrTokenLifetime) {
		t.Fatalf("stdio with a long-lived token: err = %v", err)
	}
}

// TestShutdownDrainsThenClosesStreams: at shutdown a call in flight
// finishes (within DrainTimeout) and its result reaches the client, then
// the open SSE streams are closed, so Serve returns promptly instead of
// waiting for clients to hang up.
func TestShutdownDrainsThenClosesStreams(t *testing.T) {
	f := newFixture(t, nil)
	h := addHold(t, f.srv)
	addr, stop := serveFixture(t, f, server.HTTPOptions{Sessions: true, DrainTimeout: 3 * time.Second})
	ctx := context.Background()
	cs, err := connectHTTP(ctx, "http://"+addr, f.token(t, "ann", "north", time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res := make(chan error, 1)
	go func() {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{"tag": "x"}})
		if err == nil && r.IsError {
			err = fmt.Errorf("tool error: %v", r.Content)
		}
		res <- err
	}()
	waitStarted(t, h, 1)
	stopped := make(chan struct{})
	var took time.Duration
	var serveErr error
	go func() { took, serveErr = stop(); close(stopped) }()
	time.Sleep(300 * time.Millisecond)
	close(h.release) // the call finishes during the drain
	if err := <-res; err != nil {
		t.Fatalf("call in flight at shutdown: %v", err)
	}
	<-stopped
	t.Logf("Serve returned %s after shutdown began (drain 3s, one session with its SSE stream open): %v", took.Round(10*time.Millisecond), serveErr)
	if took > 15*time.Second {
		t.Fatalf("shutdown took %s", took)
	}
}
