package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/tenantmcp/tenantmcp/egress/internal/kern"
)

// canary proves, from inside the guard cgroup, that the hooks deny: an armed
// canary destination (denied regardless of policy) and, where the policy
// leaves one, a loopback destination outside the allowlist must both fail
// with EPERM, and their audit events must arrive. ECONNREFUSED would mean the
// programs are attached but do not run for this process.
func (g *platformGuard) canary(ctx context.Context, denials chan<- Denial) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()

	loop4 := netip.MustParseAddr("127.0.0.1")
	armed := netip.AddrPortFrom(loop4, uint16(20000+rand.IntN(40000)))
	ip := armed.Addr().As4()
	if err := g.objs.Config.Put(uint32(0), kern.GuardConfig{
		Generation: g.generation,
		CanaryIp4:  binary.NativeEndian.Uint32(ip[:]),
		CanaryPort: armed.Port(),
	}); err != nil {
		return fmt.Errorf("%w: arming canary: %w", ErrNotEnforcing, err)
	}
	err := probe(unix.SOCK_STREAM, armed)
	if derr := g.objs.Config.Put(uint32(0), kern.GuardConfig{Generation: g.generation}); derr != nil {
		return fmt.Errorf("%w: disarming canary: %w", ErrNotEnforcing, derr)
	}
	if !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w: canary connect to %v returned %v, want EPERM", ErrNotEnforcing, armed, errnoText(err))
	}
	expect := map[netip.AddrPort]int{armed: 1}

	// Probe the allowlist itself with destinations the policy denies.
	type attempt struct {
		typ int // unix.SOCK_STREAM: connect; unix.SOCK_DGRAM: sendto
		dst netip.AddrPort
	}
	var probes []attempt
	if dst, ok := g.current.uncovered(loop4); ok {
		probes = append(probes, attempt{unix.SOCK_STREAM, dst}, attempt{unix.SOCK_DGRAM, dst})
	}
	if dst, ok := g.current.uncovered(netip.IPv6Loopback()); ok && haveIPv6() {
		probes = append(probes, attempt{unix.SOCK_STREAM, dst})
	}
	for _, p := range probes {
		expect[p.dst]++
		if err := probe(p.typ, p.dst); !errors.Is(err, unix.EPERM) {
			kind := "connect"
			if p.typ == unix.SOCK_DGRAM {
				kind = "sendto"
			}
			return fmt.Errorf("%w: %s to %v (outside the allowlist) returned %v, want EPERM", ErrNotEnforcing, kind, p.dst, errnoText(err))
		}
	}

	// Every probe must show up in the audit stream. Other records (a thread
	// of the program denied meanwhile) are passed on.
	deadline, _ := ctx.Deadline()
	g.reader.SetDeadline(deadline)
	defer g.reader.SetDeadline(time.Time{})
	var rec ringbuf.Record
	for len(expect) > 0 {
		ev, err := g.readEvent(&rec)
		if err != nil {
			return fmt.Errorf("%w: the audit events of the canary did not arrive (missing %v): %w", ErrNotEnforcing, keys(expect), err)
		}
		d := decodeEvent(&ev, g.bootOffset)
		if n := expect[d.Dest]; n > 0 {
			if n == 1 {
				delete(expect, d.Dest)
			} else {
				expect[d.Dest] = n - 1
			}
			continue
		}
		g.deliver(denials, d)
	}
	return nil
}

func keys(m map[netip.AddrPort]int) []netip.AddrPort {
	var out []netip.AddrPort
	for k := range m {
		out = append(out, k)
	}
	return out
}

func errnoText(err error) string {
	if err == nil {
		return "success"
	}
	return err.Error()
}

// probe attempts one connect (stream) or sendto (datagram) to dst from a
// fresh non-blocking socket, returning the syscall's error.
func probe(typ int, dst netip.AddrPort) error {
	family := unix.AF_INET6
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(dst.Port()), Addr: dst.Addr().As16()}
	if dst.Addr().Is4() {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if typ == unix.SOCK_DGRAM {
		return unix.Sendto(fd, []byte("tenantmcp egress canary"), 0, sa)
	}
	return unix.Connect(fd, sa)
}

func haveIPv6() bool {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}
