package proptest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Collect runs a helper to completion and returns its result line; the
// helper's exit status does not matter once it printed one.
func Collect(cmd *exec.Cmd) (Result, error) {
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	res, perr := ParseResult(string(out))
	if perr != nil {
		return nil, fmt.Errorf("%v: %v; stderr: %s", err, perr, stderr.String())
	}
	return res, nil
}

// ParseResult finds the "@result JSON" line in a helper's output.
func ParseResult(out string) (Result, error) {
	for line := range strings.SplitSeq(out, "\n") {
		if js, ok := strings.CutPrefix(line, "@result "); ok {
			var r Result
			if err := json.Unmarshal([]byte(js), &r); err != nil {
				return nil, err
			}
			return r, nil
		}
	}
	return nil, fmt.Errorf("no @result line in output %q", out)
}

// Proc is a running helper whose protocol lines (those starting with "@")
// arrive in order.
type Proc struct {
	Cmd    *exec.Cmd
	Stdin  io.WriteCloser
	lines  chan string
	stderr strings.Builder
	mu     sync.Mutex
}

// Start starts cmd and kills it when the test ends.
func Start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, lines: make(chan string, 64)}
	cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	var err error
	if p.Stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "@") {
				p.lines <- sc.Text()
			}
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		p.Stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(b)
}

// Stderr returns what the helper wrote on stderr so far.
func (p *Proc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Expect waits up to 30 s for the next protocol line with the prefix,
// skipping others, and returns its remainder.
func (p *Proc) Expect(t testing.TB, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("helper exited before %q; stderr:\n%s", prefix, p.Stderr())
			}
			if rest, found := strings.CutPrefix(line, prefix); found {
				return strings.TrimSpace(rest)
			}
		case <-timeout:
			t.Fatalf("helper did not print %q within 30s; stderr:\n%s", prefix, p.Stderr())
		}
	}
}

// Result waits for the result line.
func (p *Proc) Result(t testing.TB) Result {
	t.Helper()
	var r Result
	if err := json.Unmarshal([]byte(p.Expect(t, "@result ")), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// Send writes a line to the helper's stdin.
func (p *Proc) Send(line string) { io.WriteString(p.Stdin, line+"\n") }

// Want checks one step's outcome.
func Want(t testing.TB, r Result, step, value string) {
	t.Helper()
	if r[step] != value {
		t.Errorf("%s = %q, want %q", step, r[step], value)
	}
}

// WantOneOf checks that a step's outcome is one of values.
func WantOneOf(t testing.TB, r Result, step string, values ...string) {
	t.Helper()
	for _, v := range values {
		if r[step] == v {
			return
		}
	}
	t.Errorf("%s = %q, want one of %q", step, r[step], values)
}

// WantFailed checks that a step ran and failed.
func WantFailed(t testing.TB, r Result, step string) {
	t.Helper()
	if v, ok := r[step]; !ok || v == "ok" {
		t.Errorf("%s = %q, want an error", step, v)
	}
}

// FreePort returns a loopback TCP port nothing listens on (now).
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// WantNotServing checks that nothing accepts connections on the loopback
// port.
func WantNotServing(t testing.TB, port int) {
	t.Helper()
	c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err == nil {
		c.Close()
		t.Errorf("something serves on port %d, want nothing", port)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial serve port: %v, want ECONNREFUSED", err)
	}
}

// Sink records what arrives on a loopback TCP or UDP port: the number of
// TCP connections accepted and the bytes (UDP datagrams end with '|').
// Benchmarks keep nothing.
type Sink struct {
	Port    int
	mu      sync.Mutex
	data    strings.Builder
	conns   int
	discard bool
}

// String returns the bytes received.
func (s *Sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data.String()
}

// Conns returns the number of TCP connections accepted.
func (s *Sink) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Add records bytes received by other means (an inbound connection the
// test reads itself).
func (s *Sink) Add(b []byte) {
	if s.discard {
		return
	}
	s.mu.Lock()
	s.data.Write(b)
	s.mu.Unlock()
}

// TCPSink listens on network/addr until the test ends.
func TCPSink(t testing.TB, network, addr string) *Sink {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &Sink{Port: ln.Addr().(*net.TCPAddr).Port, discard: isBenchmark(t)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					s.Add(buf[:n])
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

// UDPSink listens on 127.0.0.1 until the test ends.
func UDPSink(t testing.TB) *Sink {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	s := &Sink{Port: pc.LocalAddr().(*net.UDPAddr).Port, discard: isBenchmark(t)}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.Add(append(buf[:n:n], '|'))
		}
	}()
	return s
}

func isBenchmark(t testing.TB) bool {
	_, ok := t.(*testing.B)
	return ok
}

// Loop4 is 127.0.0.1:port.
func Loop4(port int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
}

// Sockaddr converts ap for the unix socket calls, with its family.
func Sockaddr(ap netip.AddrPort) (int, unix.Sockaddr) {
	if ap.Addr().Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}
