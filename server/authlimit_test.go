package server_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/server"
)

// forged mints a real token signed by a real key the server does not trust
// (another issuer's), for the fixture's audience.
func forged(t *testing.T, sub string) string {
	t.Helper()
	other, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: "https://notes.test/mcp", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	tok, err := other.Mint(devtoken.Token{Subject: sub, Groups: []string{"org:north"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// postList sends a tools/list with tok (and extra headers) and returns the
// status and Retry-After.
func postList(t *testing.T, url, tok string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestFailedTokensLimitedByDefault: with the zero HTTPOptions, a client
// address presenting forged tokens (real signatures by a key the server
// does not trust) gets DefaultFailedTokenBurst 401s, then 429 with
// Retry-After, also for a valid token from the same address, while the
// check happens before any verification. A request without a token is
// never counted.
func TestFailedTokensLimitedByDefault(t *testing.T) {
	f := newFixture(t, nil)
	ts := httpServer(t, f, server.HTTPOptions{})
	bad := forged(t, "mallory")
	good := f.token(t, "ann", "north", time.Hour)
	for range 30 {
		if code, _ := postList(t, ts.URL, "", nil); code != http.StatusUnauthorized {
			t.Fatalf("no token: %d, want 401", code)
		}
	}
	for i := range server.DefaultFailedTokenBurst {
		if code, _ := postList(t, ts.URL, bad, nil); code != http.StatusUnauthorized {
			t.Fatalf("forged token %d: %d, want 401", i+1, code)
		}
	}
	code, retry := postList(t, ts.URL, bad, nil)
	if code != http.StatusTooManyRequests {
		t.Fatalf("forged token %d: %d, want 429 after %d failures", server.DefaultFailedTokenBurst+1, code, server.DefaultFailedTokenBurst)
	}
	if n, err := strconv.Atoi(retry); err != nil || n < 1 || n > 10 {
		t.Errorf("Retry-After %q, want 1..10 s (one attempt regained every 10 s)", retry)
	}
	if code, _ := postList(t, ts.URL, good, nil); code != http.StatusTooManyRequests {
		t.Errorf("valid token from a blocked address: %d, want 429", code)
	}
}

// TestFailedTokensPerAddress: the limit is per client address. A header
// naming another address is ignored from an untrusted peer; from a
// trusted proxy its right-most untrusted address is the client, so two
// clients behind the proxy have a budget each, and one of them spending
// its budget does not block the other.
func TestFailedTokensPerAddress(t *testing.T) {
	f := newFixture(t, nil)
	bad := forged(t, "mallory")
	good := f.token(t, "ann", "north", time.Hour)

	untrusted := httpServer(t, f, server.HTTPOptions{FailedTokens: server.FailedTokenLimit{Burst: 2}})
	for i := range 2 {
		postList(t, untrusted.URL, bad, map[string]string{"X-Forwarded-For": fmt.Sprintf("203.0.113.%d", i)})
	}
	if code, _ := postList(t, untrusted.URL, bad, map[string]string{"X-Forwarded-For": "203.0.113.99"}); code != http.StatusTooManyRequests {
		t.Fatalf("X-Forwarded-For without trusted proxies changed the address: %d, want 429", code)
	}

	proxied := httpServer(t, f, server.HTTPOptions{FailedTokens: server.FailedTokenLimit{Burst: 2,
		ClientIPHeader: "X-Forwarded-For", TrustedProxies: []string{"127.0.0.0/8"}}})
	a := map[string]string{"X-Forwarded-For": "198.51.100.7, 203.0.113.1"} // the client spoofed the first hop
	b := map[string]string{"X-Forwarded-For": "203.0.113.2"}
	for range 2 {
		if code, _ := postList(t, proxied.URL, bad, a); code != http.StatusUnauthorized {
			t.Fatalf("client a: %d, want 401", code)
		}
	}
	if code, _ := postList(t, proxied.URL, bad, a); code != http.StatusTooManyRequests {
		t.Fatalf("client a after its budget: %d, want 429", code)
	}
	if code, _ := postList(t, proxied.URL, bad, map[string]string{"X-Forwarded-For": "1.2.3.4, 203.0.113.1"}); code != http.StatusTooManyRequests {
		t.Fatalf("client a with another spoofed first hop: %d, want 429", code)
	}
	if code, _ := postList(t, proxied.URL, good, b); code != http.StatusOK {
		t.Fatalf("client b behind the same proxy: %d, want 200", code)
	}
	if _, err := f.srv.Handler(server.HTTPOptions{ResourceURL: "https://notes.test/mcp", FailedTokens: server.FailedTokenLimit{TrustedProxies: []string{"not-an-ip"}, ClientIPHeader: "X-Real-IP"}}); err == nil {
		t.Error("a TrustedProxies entry that is no address was accepted")
	}

	// Disabled: a negative Rate.
	off := httpServer(t, f, server.HTTPOptions{FailedTokens: server.FailedTokenLimit{Rate: -1}})
	for i := range 2 * server.DefaultFailedTokenBurst {
		if code, _ := postList(t, off.URL, bad, nil); code != http.StatusUnauthorized {
			t.Fatalf("limit disabled, forged token %d: %d, want 401", i+1, code)
		}
	}
}

// TestStalledBodyIs408: a client that sends its headers and part of its
// body and then stops is answered 408 Request Timeout once ReadTimeout
// runs out (not 413, which says the body was too large), and a body over
// MaxRequestBytes is still 413.
func TestStalledBodyIs408(t *testing.T) {
	f := newFixture(t, func(o *server.Options) { o.MaxRequestBytes = 4096 })
	addr, _ := serveFixture(t, f, server.HTTPOptions{ReadTimeout: 300 * time.Millisecond})
	tok := f.token(t, "ann", "north", time.Hour)

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":", addr, tok)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	resp.Body.Close()
	t.Logf("stalled body answered %d after %s (ReadTimeout 300ms)", resp.StatusCode, time.Since(start).Round(10*time.Millisecond))
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled body: %d, want 408", resp.StatusCode)
	}

	big, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"` + strings.Repeat("a", 8000) + `"}}`
	fmt.Fprintf(big, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", addr, tok, len(body), body)
	_ = big.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(big), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d, want 413", resp.StatusCode)
	}
}
