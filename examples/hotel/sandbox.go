package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/sandbox"
)

// sandboxSetup is what installSandbox needs beyond hotel.Options.
type sandboxSetup struct {
	setupDemo  string // -setup-demo DSN: its endpoint is connected to as well
	tokenFile  string // -token-file, read for every token refresh
	bestEffort bool
}

// installSandbox confines the server with Landlock before the database
// pool, the listener or any client exists. It grants exactly what the
// hotel uses after start-up: the system files a Go server reads lazily
// (TLS roots, resolver configuration, time zones), the flow policy and
// token files, a private temporary directory (TMPDIR points there, so the
// embedded SQLite database lands in it) or the directory of a sqlite: -db,
// TCP connect to the database, JWKS and DNS ports, and TCP bind on the
// listen port (and ephemeral ports for the development issuer). It returns
// a cleanup that empties the temporary directory; the directory itself
// stays, empty, because removing it needs a right on its parent.
func installSandbox(ctx context.Context, cfg hotel.Options, s sandboxSetup, log *slog.Logger) (*sandbox.Sandbox, func(), error) {
	p := sandbox.Policy{Paths: sandbox.SystemFiles()}

	if dsn, ok := strings.CutPrefix(cfg.DB, "sqlite:"); ok {
		rule, err := sandbox.SQLiteDir(strings.TrimPrefix(strings.SplitN(dsn, "?", 2)[0], "file:"))
		if err != nil {
			return nil, nil, err
		}
		p.Paths = append(p.Paths, rule)
	}
	tmp, err := os.MkdirTemp("", "tenantmcp-hotel-sandbox-")
	if err != nil {
		return nil, nil, err
	}
	os.Setenv("TMPDIR", tmp) // os.TempDir, and so the embedded database, now use it
	cleanup := func() {
		ents, _ := os.ReadDir(tmp)
		for _, e := range ents {
			os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
	p.Paths = append(p.Paths, sandbox.ReadWriteDirs(tmp))
	for _, f := range []string{cfg.FlowPolicy, s.tokenFile} {
		if f != "" {
			abs, err := filepath.Abs(f)
			if err != nil {
				return nil, nil, err
			}
			p.Paths = append(p.Paths, sandbox.ReadOnly(abs))
		}
	}

	needDNS := false
	connect := func(hostport string) error {
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return fmt.Errorf("port in %q: want 1-65535", hostport)
		}
		if net.ParseIP(host) == nil {
			needDNS = true
		}
		p.ConnectTCP = append(p.ConnectTCP, uint16(n))
		return nil
	}
	eps, err := endpoints(cfg.JWKSURL, cfg.DB, s.setupDemo)
	if err != nil {
		return nil, nil, err
	}
	for _, hp := range eps {
		if err := connect(hp); err != nil {
			return nil, nil, fmt.Errorf("endpoint %s: %w", hp, err)
		}
	}
	if cfg.JWKSURL == "" {
		p.BindTCP = append(p.BindTCP, 0) // the development issuer listens on 127.0.0.1:0
	}
	if needDNS {
		p.ConnectTCP = append(p.ConnectTCP, 53) // DNS over TCP; UDP is not restricted
	}
	_, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("-addr: %w", err)
	}
	lp, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, nil, fmt.Errorf("-addr port: %w", err)
	}
	p.BindTCP = append(p.BindTCP, uint16(lp))

	sb, err := sandbox.Install(ctx, p, sandbox.Options{BestEffort: s.bestEffort, Logger: log})
	if err != nil {
		cleanup()
		os.Remove(tmp)
		return nil, nil, err
	}
	return sb, cleanup, nil
}
