// Package cutproxy is a loopback TCP proxy that tests can cut and restore,
// to simulate a database or identity-provider outage without stopping the
// shared server behind it, and that counts the round trips its clients
// make (the bench's wire-level count, issue 30).
package cutproxy

import (
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards every connection accepted on Addr to a target address.
type Proxy struct {
	// Addr is the proxy's loopback address, host:port.
	Addr string

	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
	bursts atomic.Int64 // request bursts of every connection, summed
}

// RoundTrips is the number of round trips counted so far over every
// connection. The proxy knows nothing of the protocols: a round trip is a
// burst of bytes a client sends after the target has sent something since
// that client's previous burst (a connection's first burst counts too). A
// client that pipelines several statements before reading pays one round
// trip for them; one that waits for each answer pays one per statement.
func (p *Proxy) RoundTrips() int64 { return p.bursts.Load() }

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close() // the outage: the connection is dropped at once
			continue
		}
		p.conns[c] = true
		p.mu.Unlock()
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	defer p.drop(c)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		up.Close()
		return
	}
	p.conns[up] = true
	p.mu.Unlock()
	defer p.drop(up)
	// answered is set when the target has sent bytes since the client's
	// last burst; it starts set so that the connection's first burst
	// counts, and it is set before the bytes are passed on, since the
	// client can send its next burst only after it has them.
	var answered atomic.Bool
	answered.Store(true)
	done := make(chan struct{}, 2)
	go func() {
		copyChunks(up, c, func() {
			if answered.Swap(false) {
				p.bursts.Add(1)
			}
		})
		done <- struct{}{}
	}()
	go func() { copyChunks(c, up, func() { answered.Store(true) }); done <- struct{}{} }()
	<-done
}

// copyChunks copies src to dst, calling seen before writing each chunk
// read, until either side fails or src ends.
func copyChunks(dst, src net.Conn, seen func()) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			seen()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF included: src ended
			return
		}
	}
}

func (p *Proxy) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Cut closes every open connection and drops new ones as soon as they are
// accepted, until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore forwards new connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}
