package main

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// lineServer answers each line it reads with the line upper-cased; a line
// "pair" waits for the next line too and answers both, in two writes a
// few milliseconds apart (an answer split over several TCP segments).
func lineServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if l == "pair\n" {
						l2, err := r.ReadString('\n')
						if err != nil {
							return
						}
						_, _ = c.Write([]byte("PAIR\n"))
						time.Sleep(5 * time.Millisecond)
						l = l2
					}
					if _, err := c.Write([]byte(strings.ToUpper(l))); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// turn sends lines (in separate writes, without reading in between) and
// reads want lines back.
func turn(t *testing.T, c net.Conn, r *bufio.Reader, lines []string, want []string) {
	t.Helper()
	for _, l := range lines {
		if _, err := c.Write([]byte(l + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range want {
		got, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if got != w+"\n" {
			t.Fatalf("through the relay: got %q, want %q", got, w)
		}
	}
}

// The relay counts one round trip per request/response turn, one for
// requests sent together before reading (pipelined), none for the parts of
// an answer, and sums its connections.
func TestRelayCountsRoundTrips(t *testing.T) {
	rel, err := startRelay(lineServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer rel.close()
	c, err := net.Dial("tcp", rel.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for _, l := range []string{"begin", "select", "commit"} {
		turn(t, c, r, []string{l}, []string{strings.ToUpper(l)})
	}
	if got := rel.roundTrips(); got != 3 {
		t.Fatalf("3 request/response turns: counted %d round trips, want 3", got)
	}
	// Two requests written back to back, one answer in two segments.
	turn(t, c, r, []string{"pair", "x"}, []string{"PAIR", "X"})
	if got := rel.roundTrips(); got != 4 {
		t.Fatalf("after a pipelined turn: counted %d round trips, want 4", got)
	}
	// A second connection's turns add to the total.
	c2, err := net.Dial("tcp", rel.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	turn(t, c2, r2, []string{"one"}, []string{"ONE"})
	turn(t, c2, r2, []string{"two"}, []string{"TWO"})
	if got := rel.roundTrips(); got != 6 {
		t.Fatalf("two connections: counted %d round trips, want 6", got)
	}
}

// close ends the relayed connections: a client blocked on a read returns.
func TestRelayCloseEndsConnections(t *testing.T) {
	rel, err := startRelay(lineServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", rel.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	turn(t, c, r, []string{"hello"}, []string{"HELLO"})
	done := make(chan error, 1)
	go func() { _, err := r.ReadString('\n'); done <- err }()
	rel.close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read after close returned a line")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("close left the relayed connection open")
	}
}
