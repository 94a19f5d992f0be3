package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/tenantmcp/tenantmcp/internal/cutproxy"
)

// Round trips to the database, counted at the wire (issue 30): a loopback
// TCP relay (internal/cutproxy, see its RoundTrips) the bench puts between
// a database client (a server child, or a P2 pool) and the database.
// Counting it this way measures what the library does on the wire, not
// what it says it does.

// wireRelay relays a loopback port to the database and counts round trips.
type wireRelay struct{ p *cutproxy.Proxy }

// startRelay listens on 127.0.0.1 and relays to target (host:port).
func startRelay(target string) (*wireRelay, error) {
	p, err := cutproxy.Start(target)
	if err != nil {
		return nil, err
	}
	return &wireRelay{p}, nil
}

// addr is the relay's listening address, host:port.
func (r *wireRelay) addr() string { return r.p.Addr }

// roundTrips is the number of round trips counted so far over every
// connection.
func (r *wireRelay) roundTrips() int64 { return r.p.RoundTrips() }

// close stops accepting, closes every relayed connection and waits for
// the copies to end.
func (r *wireRelay) close() { r.p.Close() }

// errNoTCP: the DSN names no TCP host to relay to (a Unix socket).
var errNoTCP = errors.New("round trips are counted on a postgres:// URL with a TCP host")

// relayPG starts a relay to the host and port of PostgreSQL URL dsn and
// returns the DSN pointed at it.
func relayPG(dsn string) (string, *wireRelay, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Hostname() == "" {
		return "", nil, errNoTCP
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	rel, err := startRelay(target)
	if err != nil {
		return "", nil, err
	}
	u.Host = rel.addr()
	return u.String(), rel, nil
}

// countRoundTrips runs op n times, one after the other, and returns the
// round trips rel counted per operation; it fails when it counted none,
// so a relay bypassed or broken cannot pass for a free operation.
func countRoundTrips(ctx context.Context, rel *wireRelay, n int, op func(ctx context.Context, i int) error) (float64, error) {
	before := rel.roundTrips()
	for i := range n {
		if err := op(ctx, i); err != nil {
			return 0, err
		}
	}
	got := rel.roundTrips() - before
	if got <= 0 {
		return 0, fmt.Errorf("the wire relay counted no round trip over %d operations", n)
	}
	return float64(got) / float64(n), nil
}

// roundTripOps is how many operations of each arm a count covers.
func (e *env) roundTripOps() int {
	if e.cfg.smoke {
		return 20
	}
	return 200
}
