package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/claims"
	"github.com/tenantmcp/tenantmcp/claims/devtoken"
	"github.com/tenantmcp/tenantmcp/egress"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/internal/logbuf"
	"github.com/tenantmcp/tenantmcp/server"
)

const egressChildEnv = "TENANTMCP_SERVER_EGRESS_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(egressChildEnv) == "1" {
		os.Exit(egressChild())
	}
	os.Exit(m.Run())
}

// egressChild is the guarded process: it installs a deny-all guard (which
// moves the whole process into a cgroup, hence a child), builds a server,
// drains denials with egress.Guard.Audit, makes one forbidden connection and
// prints the audit log.
func egressChild() int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, err := egress.Install(ctx, egress.Policy{}, egress.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println("SKIP:", err)
		return 0
	}
	defer g.Close()
	is, err := devtoken.Start(devtoken.Options{Addr: "127.0.0.1:0", Audience: "https://notes.test/mcp", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println("ERROR:", err)
		return 1
	}
	defer is.Close()
	v, err := claims.New(claims.Options{Issuer: is.URL, Audience: []string{is.Audience}, JWKS: is.JWKS(),
		Mapping: claims.Mapping{Patterns: []string{"org:{org}"}}})
	if err != nil {
		fmt.Println("ERROR:", err)
		return 1
	}
	db, err := guardedsql.Open(ctx, "sqlite::memory:", testSchema, guardedsql.Options{})
	if err != nil {
		fmt.Println("ERROR:", err)
		return 1
	}
	defer db.Close()
	var audit logbuf.Buffer
	srv, err := server.New(server.Options{Name: "notes", Verifier: v, DB: db,
		AuditLogger: slog.New(slog.NewJSONHandler(&audit, nil)), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println("ERROR:", err)
		return 1
	}
	drained := make(chan struct{})
	go func() { g.Audit(ctx, srv.AuditLogger()); close(drained) }()
	_, err = net.DialTimeout("tcp", "127.0.0.1:9", time.Second)
	fmt.Println("DIAL:", errors.Is(err, syscall.EPERM))
	time.Sleep(500 * time.Millisecond)
	cancel()
	<-drained
	fmt.Print(audit.String())
	return 0
}

// TestEgressAuditRecordsDenials runs egressChild and checks that the denied
// connection reached the audit log with its hook and destination, followed
// by the summary record.
func TestEgressAuditRecordsDenials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("the egress guard needs root (running as uid %d)", os.Geteuid())
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), egressChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	text := string(out)
	if reason, skip := strings.CutPrefix(text, "SKIP: "); skip {
		t.Skipf("egress guard unavailable: %s", strings.TrimSpace(reason))
	}
	if !strings.Contains(text, "DIAL: true") {
		t.Fatalf("the guarded connect was not refused with EPERM:\n%s", text)
	}
	var denial, summary map[string]any
	for _, line := range strings.Split(text, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch rec["msg"] {
		case "egress denied":
			if d, _ := rec["denial"].(map[string]any); d["dest"] == "127.0.0.1:9" {
				denial = d
			}
		case "egress guard summary":
			summary = rec
		}
	}
	if denial == nil || denial["hook"] != "connect4" || denial["network"] != "tcp" {
		t.Fatalf("no audit record of the denied connect to 127.0.0.1:9:\n%s", text)
	}
	if summary == nil || summary["denied"].(float64) < 1 {
		t.Fatalf("no summary record counting the denial:\n%s", text)
	}
}
