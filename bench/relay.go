package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
)

// Round trips to the database, counted at the wire (issue 30): a loopback
// TCP relay the bench puts between a database client (a server child, or
// a P2 pool) and the database. It knows nothing of the protocols: a round
// trip is a burst of bytes the client sends after the database has sent
// something since the client's previous burst (the first burst of a
// connection counts too). A client that pipelines several statements
// before reading pays one round trip for them; one that waits for each
// answer pays one per statement. Counting it this way measures what the
// library does on the wire, not what it says it does.

// wireRelay accepts connections on a loopback port and copies each to a
// new connection to target, counting the client's request bursts.
type wireRelay struct {
	ln     net.Listener
	target string
	bursts atomic.Int64 // request bursts of every connection, summed

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startRelay listens on 127.0.0.1 and relays to target (host:port).
func startRelay(target string) (*wireRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &wireRelay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// addr is the relay's listening address, host:port.
func (r *wireRelay) addr() string { return r.ln.Addr().String() }

// roundTrips is the number of request bursts counted so far over every
// connection.
func (r *wireRelay) roundTrips() int64 { return r.bursts.Load() }

func (r *wireRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go r.relay(c)
	}
}

// track registers c for close; it is false once the relay is closed.
func (r *wireRelay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *wireRelay) relay(client net.Conn) {
	defer r.wg.Done()
	server, err := net.Dial("tcp", r.target)
	if err != nil {
		client.Close()
		return
	}
	if !r.track(client) || !r.track(server) {
		client.Close()
		server.Close()
		return
	}
	// answered is set when the server has sent bytes since the client's
	// last burst; it starts set so that the connection's first burst
	// counts.
	var answered atomic.Bool
	answered.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Set before the bytes are passed on: the client can send its
		// next burst only after it has them.
		_ = copyChunks(client, server, func() { answered.Store(true) })
		client.Close()
	}()
	_ = copyChunks(server, client, func() {
		if answered.Swap(false) {
			r.bursts.Add(1)
		}
	})
	server.Close()
	<-done
	r.mu.Lock()
	delete(r.conns, client)
	delete(r.conns, server)
	r.mu.Unlock()
}

// copyChunks copies src to dst, calling seen before writing each chunk
// read, until either side fails or src ends.
func copyChunks(dst, src net.Conn, seen func()) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			seen()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// close stops accepting, closes every relayed connection and waits for
// the copies to end.
func (r *wireRelay) close() {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.ln.Close()
	r.wg.Wait()
}

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
