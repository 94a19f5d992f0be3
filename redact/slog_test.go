package redact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

func TestHandlerJSON(t *testing.T) {
	r, err := New(Options{
		TokenKey:  testKey,
		Operators: map[Category]Operator{Email: Token},
		Reveal:    map[string][]Category{"front_desk": {Phone, Email}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil))).With("component", "mail alice@example.com")
	s := testScope(t, "chain", "acme", "front_desk")
	ctx := scopetest.NewContext(context.Background(), s)

	sc := r.For(ctx)
	sc.JSON(guestRecord{Email: "a@example.com"})
	log.InfoContext(ctx, "call for alice@example.com",
		"scope", s,
		"redactions", sc.Report(),
		"phone", "+1 202 555 0143",
		"err", errors.New("card 4111 1111 1111 1111 declined"),
		"guest", guestRecord{Name: "Alice Smith", Email: "alice@example.com", Phone: "+1 202 555 0143"},
		slog.Group("g", "ip", "203.0.113.7", "rows", 3),
		"took", 150*time.Millisecond,
		"named", namedString("alice@example.com"),
	)
	out := buf.String()
	for _, leak := range []string{"alice@example.com", "+1 202 555 0143", "4111 1111 1111 1111", "203.0.113.7", "Alice Smith"} {
		if strings.Contains(out, leak) {
			t.Errorf("log leaked %q: %s", leak, out)
		}
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("bad log line %s: %v", out, err)
	}
	tok := r.ForScope(testScope(t, "chain", "acme")).String("alice@example.com") // same grants, no role
	if !tokenRE.MatchString(tok) {
		t.Fatalf("expected a token, got %q", tok)
	}
	if rec["msg"] != "call for "+tok {
		t.Errorf("msg = %v, want the tenant token (roles reveal nothing in logs)", rec["msg"])
	}
	if rec["phone"] != "***0143" {
		t.Errorf("phone = %v (front_desk must not reveal in logs)", rec["phone"])
	}
	if rec["err"] != "card ****1111 declined" {
		t.Errorf("err = %v", rec["err"])
	}
	if rec["component"] != "mail [redacted:email]" {
		t.Errorf("With attr = %v, want redacted as with no scope", rec["component"])
	}
	if g, _ := rec["guest"].(map[string]any); g["name"] != "[redacted:name]" || g["email"] != tok || g["phone"] != "***0143" {
		t.Errorf("guest = %v", rec["guest"])
	}
	if g, _ := rec["g"].(map[string]any); g["ip"] != "[redacted:ip]" || g["rows"] != 3.0 {
		t.Errorf("group = %v", rec["g"])
	}
	if sc, _ := rec["scope"].(map[string]any); sc["sub"] != "user-acme" {
		t.Errorf("scope attr changed: %v", rec["scope"])
	}
	if red, _ := rec["redactions"].(map[string]any); red == nil {
		t.Errorf("report missing: %v", rec["redactions"])
	}
	if rec["took"] != float64(150*time.Millisecond) {
		t.Errorf("duration changed: %v", rec["took"])
	}
	if rec["named"] != tok {
		t.Errorf("named string = %v", rec["named"])
	}
}

type namedString string

func (n namedString) String() string { return string(n) } // must not bypass

func TestHandlerText(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(defaultRedactor.Handler(slog.NewTextHandler(&buf, nil)))
	log.Info("x", "guest", guestRecord{Email: "alice@example.com"}, "list", []string{"bob@example.com"})
	out := buf.String()
	if strings.Contains(out, "alice@") || strings.Contains(out, "bob@") {
		t.Errorf("leak: %s", out)
	}
	if !strings.Contains(out, `list="[\"[redacted:email]\"]"`) {
		t.Errorf("text rendering: %s", out)
	}
	if !log.Enabled(context.Background(), slog.LevelInfo) || log.Enabled(context.Background(), slog.LevelDebug) {
		t.Errorf("Enabled not delegated")
	}
	buf.Reset()
	log.WithGroup("grp").Info("y", "e", "carol@example.com")
	if !strings.Contains(buf.String(), "grp.e=[redacted:email]") {
		t.Errorf("WithGroup: %s", buf.String())
	}
}
