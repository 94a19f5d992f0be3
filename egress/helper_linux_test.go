package egress

// The guard moves the whole calling process into its cgroup, so guarded code
// never runs in the test process itself: TestMain turns the test binary into
// a helper when TENANTMCP_EGRESS_HELPER names a scenario. A helper prints
// protocol lines starting with "@" on stdout:
//
//	@listen PORT      it listens (inside the guard) on 127.0.0.1:PORT
//	@ready            it is waiting for a line on stdin
//	@result JSON      map of step name -> "ok", an errno name, or a value
//
// and exits 0 unless it could not run the scenario at all.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenantmcp/tenantmcp/internal/proptest"
)

const (
	helperEnv     = "TENANTMCP_EGRESS_HELPER"
	helperArgsEnv = "TENANTMCP_EGRESS_ARGS"
)

// helperArgs are the loopback ports the parent test listens on.
type helperArgs struct {
	AllowTCP, DenyTCP int // TCP sinks on 127.0.0.1
	AllowUDP, DenyUDP int // UDP sinks on 127.0.0.1
	AllowTCP6         int // TCP sinks on [::1], 0 without IPv6
	DenyTCP6          int
	ServePort         int    // property 14: the port the helper would serve on
	Iterations        int    // benchmark loop length
	BestEffort        bool   // install best-effort
	Variant           string // scenario variant
}

func TestMain(m *testing.M) {
	if scenario := os.Getenv(helperEnv); scenario != "" {
		os.Exit(runHelper(scenario))
	}
	code := m.Run()
	// Helpers killed by a failing test leave empty guard cgroups behind.
	if place, err := locateCgroup(); err == nil {
		removeStale(place.orig)
	}
	os.Exit(code)
}

// result collects a helper's observations.
type result = proptest.Result

var (
	collect  = proptest.Collect
	loop4    = proptest.Loop4
	sockaddr = proptest.Sockaddr
)

func runHelper(scenario string) int {
	var a helperArgs
	if err := json.Unmarshal([]byte(os.Getenv(helperArgsEnv)), &a); err != nil {
		fmt.Fprintln(os.Stderr, "helper: bad args:", err)
		return 2
	}
	fn := map[string]func(helperArgs) int{
		"probe":       helperProbe,
		"connect":     helperConnect,
		"established": helperEstablished,
		"inherit":     helperInherit,
		"child":       helperChild,
		"control":     helperControl,
		"serve":       helperServe,
		"update":      helperUpdate,
		"ringfull":    helperRingFull,
		"bench":       helperBench,
	}[scenario]
	if fn == nil {
		fmt.Fprintln(os.Stderr, "helper: unknown scenario", scenario)
		return 2
	}
	return fn(a)
}

func loop6(port int) netip.AddrPort {
	return netip.AddrPortFrom(netip.IPv6Loopback(), uint16(port))
}

// dial connects a blocking socket of the given type; the fd is returned even
// on error (-1 if the socket could not be created).
func dial(typ int, ap netip.AddrPort) (int, error) {
	family, sa := sockaddr(ap)
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// dialMapped connects an AF_INET6 socket to the v4-mapped form of ap.
func dialMapped(ap netip.AddrPort) error {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	mapped := netip.AddrFrom16(ap.Addr().As16())
	return unix.Connect(fd, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: mapped.As16()})
}

func sendto(ap netip.AddrPort, msg string) error {
	family, sa := sockaddr(ap)
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Sendto(fd, []byte(msg), 0, sa)
}

func policyFor(a helperArgs) Policy {
	p := Policy{Allow: []Rule{AllowAddrPort(loop4(a.AllowTCP)), AllowAddrPort(loop4(a.AllowUDP))}}
	if a.AllowTCP6 != 0 {
		p.Allow = append(p.Allow, AllowAddrPort(loop6(a.AllowTCP6)))
	}
	return p
}

func installFor(a helperArgs, p Policy) (*Guard, error) {
	return Install(context.Background(), p, Options{BestEffort: a.BestEffort})
}

// helperProbe reports whether a guard can be installed here at all.
func helperProbe(a helperArgs) int {
	g, err := installFor(a, Policy{})
	r := result{"install": proptest.ErrName(err)}
	if err != nil {
		r["reason"] = err.Error()
		for name, sentinel := range sentinels {
			if errors.Is(err, sentinel) {
				r["is:"+name] = "true"
			}
		}
	} else {
		_, err2 := installFor(a, Policy{})
		r["second_install_refused"] = strconv.FormatBool(errors.Is(err2, ErrAlreadyInstalled))
		r["close"] = proptest.ErrName(g.Close())
	}
	proptest.Emit(r)
	return 0
}

var sentinels = map[string]error{
	"ErrUnsupported": ErrUnsupported, "ErrInvalidPolicy": ErrInvalidPolicy, "ErrNoCgroup2": ErrNoCgroup2,
	"ErrNotPermitted": ErrNotPermitted, "ErrLoad": ErrLoad, "ErrVerifier": ErrVerifier, "ErrAttach": ErrAttach,
	"ErrNotEnforcing": ErrNotEnforcing, "ErrPreexistingSockets": ErrPreexistingSockets,
	"ErrAlreadyInstalled": ErrAlreadyInstalled,
}

// helperConnect: property 1 — allowed loopback destinations work, denied
// ones fail with EPERM at connect (TCP, UDP, IPv6, v4-mapped) and sendto
// (unconnected UDP); denials reach the audit stream; Close restores the
// process.
func helperConnect(a helperArgs) int {
	r := result{}
	before, _ := ownCgroup2Path("/proc/self/cgroup")
	g, err := installFor(a, policyFor(a))
	r.Set("install", err)
	if err != nil {
		proptest.Emit(r)
		return 0
	}
	r["cgroup"] = g.Cgroup()
	inGuard, _ := ownCgroup2Path("/proc/self/cgroup")
	r["in_guard"] = strconv.FormatBool(inGuard != before && strings.HasSuffix(g.Cgroup(), inGuard))

	fd, err := dial(unix.SOCK_STREAM, loop4(a.AllowTCP))
	r.Set("tcp_allowed", err)
	if err == nil {
		_, err = unix.Write(fd, []byte("hello"))
		r.Set("tcp_allowed_write", err)
		unix.Close(fd)
	}
	_, err = dial(unix.SOCK_STREAM, loop4(a.DenyTCP))
	r.Set("tcp_denied", err)
	r.Set("tcp_denied_mapped", dialMapped(loop4(a.DenyTCP)))
	r.Set("tcp_allowed_mapped", dialMapped(loop4(a.AllowTCP)))
	r.Set("udp_sendto_allowed", sendto(loop4(a.AllowUDP), "udp-hello"))
	r.Set("udp_sendto_denied", sendto(loop4(a.DenyUDP), "udp-denied"))
	_, err = dial(unix.SOCK_DGRAM, loop4(a.DenyUDP))
	r.Set("udp_connect_denied", err)
	if a.AllowTCP6 != 0 {
		fd, err := dial(unix.SOCK_STREAM, loop6(a.AllowTCP6))
		r.Set("tcp6_allowed", err)
		if err == nil {
			unix.Close(fd)
		}
		_, err = dial(unix.SOCK_STREAM, loop6(a.DenyTCP6))
		r.Set("tcp6_denied", err)
	}
	// AF_UNIX is not affected.
	r.Set("unix_socketpair", unixPair())

	// The audit stream names the denied destination, the hook and us.
	want := loop4(a.DenyTCP)
	timeout := time.After(3 * time.Second)
	r["denial"] = "missing"
collect:
	for {
		select {
		case d := <-g.Denials():
			if d.Dest == want && d.Hook == HookConnect4 && d.Network == "tcp" {
				r["denial"] = "found"
				r["denial_pid_ok"] = strconv.FormatBool(d.PID == os.Getpid())
				r["denial_comm"] = d.Comm
				break collect
			}
		case <-timeout:
			break collect
		}
	}
	st := g.Stats()
	r["denied_connect4"] = strconv.FormatUint(st.Denied[HookConnect4], 10)
	r["dropped"] = strconv.FormatUint(g.Dropped(), 10)

	r.Set("close", g.Close())
	after, _ := ownCgroup2Path("/proc/self/cgroup")
	r["restored"] = strconv.FormatBool(after == before)
	_, statErr := os.Stat(r["cgroup"])
	r["cgroup_removed"] = strconv.FormatBool(errors.Is(statErr, os.ErrNotExist))
	fd, err = dial(unix.SOCK_STREAM, loop4(a.DenyTCP))
	r.Set("tcp_denied_after_close", err)
	if err == nil {
		unix.Close(fd)
	}
	proptest.Emit(r)
	return 0
}

func unixPair() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if _, err := unix.Write(fds[0], []byte("x")); err != nil {
		return err
	}
	buf := make([]byte, 1)
	_, err = unix.Read(fds[1], buf)
	return err
}

// helperEstablished: properties 3 and 13 — connections established while
// their destination was allowed stop carrying data once it is removed, for
// send, sendto, sendmsg and write (TCP) and send (connected UDP); replies on
// an inbound connection of a listener the guarded process owns stay writable.
func helperEstablished(a helperArgs) int {
	r := result{}
	g, err := installFor(a, policyFor(a))
	r.Set("install", err)
	if err != nil {
		proptest.Emit(r)
		return 0
	}
	defer g.Close()
	if a.Variant == "nosweep" {
		// Exercise the egress hook alone: no connection is aborted, so
		// the syscalls may succeed, yet no byte may reach the peer.
		g.impl.iter.Close()
		g.impl.iter = nil
	}

	// Inbound: our listener (inside the guard); the parent connects.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		r.Set("listen", err)
		proptest.Emit(r)
		return 0
	}
	fmt.Printf("@listen %d\n", ln.Addr().(*net.TCPAddr).Port)
	in, err := ln.Accept()
	if err != nil {
		r.Set("accept", err)
		proptest.Emit(r)
		return 0
	}
	_, err = in.Write([]byte("pong-before|"))
	r.Set("inbound_before", err)

	kinds := []string{"send", "sendto", "sendmsg", "write"}
	fds := map[string]int{}
	for _, k := range kinds {
		fd, err := dial(unix.SOCK_STREAM, loop4(a.AllowTCP))
		r.Set("connect_"+k, err)
		if err != nil {
			proptest.Emit(r)
			return 0
		}
		fds[k] = fd
		_, err = unix.Write(fd, []byte("before-"+k+"|"))
		r.Set("before_"+k, err)
	}
	ufd, err := dial(unix.SOCK_DGRAM, loop4(a.AllowUDP))
	r.Set("udp_connect", err)
	if err == nil {
		err = unix.Sendto(ufd, []byte("before-udp"), 0, nil)
	}
	r.Set("udp_before", err)
	for _, k := range kinds { // the "before" bytes reached the peer
		r.Set("acked_"+k, waitAcked(fds[k]))
	}

	// Remove every destination the connections use.
	r.Set("remove", g.Remove(g.Policy().Allow...))

	_, sa := sockaddr(loop4(a.AllowTCP))
	for _, k := range kinds {
		msg := []byte("after-" + k + "|")
		fd := fds[k]
		var err error
		switch k {
		case "send":
			err = unix.Sendto(fd, msg, unix.MSG_NOSIGNAL, nil)
		case "sendto":
			err = unix.Sendto(fd, msg, unix.MSG_NOSIGNAL, sa)
		case "sendmsg":
			_, err = unix.SendmsgN(fd, msg, nil, nil, unix.MSG_NOSIGNAL)
		case "write":
			_, err = unix.Write(fd, msg)
		}
		r.Set("after_"+k, err)
		unix.Close(fd)
	}
	r.Set("udp_after", unix.Sendto(ufd, []byte("after-udp"), 0, nil))
	_, err = dial(unix.SOCK_STREAM, loop4(a.AllowTCP))
	r.Set("connect_after", err)

	_, err = in.Write([]byte("pong-after|"))
	r.Set("inbound_after", err)
	in.Close()
	ln.Close()
	st := g.Stats()
	r["aborted"] = strconv.FormatUint(st.Denied[HookAbort], 10)
	r["egress_drops"] = strconv.FormatUint(st.Denied[HookEgress], 10)
	proptest.Emit(r)
	// Keep the guard until the parent has checked its sinks: data queued on
	// a connection the egress hook dropped could leave once it is closed.
	bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// waitAcked waits until the peer acknowledged every byte written to the TCP
// socket fd (SIOCOUTQ counts unacknowledged and unsent bytes).
func waitAcked(fd int) error {
	for range 500 {
		n, err := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
		if err != nil || n == 0 {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("bytes still unacknowledged after 5s")
}

// helperInherit: property 5 — a forked+exec'd child and a child started
// through /bin/sh -c (which forks again) are restricted too.
func helperInherit(a helperArgs) int {
	r := result{}
	g, err := installFor(a, policyFor(a))
	r.Set("install", err)
	if err != nil {
		proptest.Emit(r)
		return 0
	}
	guardPath, _ := ownCgroup2Path("/proc/self/cgroup")
	r["guard_path"] = guardPath

	self, _ := os.Executable()
	direct := exec.Command(self)
	viaShell := exec.Command("/bin/sh", "-c", "'"+self+"'; exit $?")
	for name, cmd := range map[string]*exec.Cmd{"exec": direct, "sh": viaShell} {
		cmd.Env = append(os.Environ(), helperEnv+"=child")
		res, err := collect(cmd)
		if err != nil {
			r[name+"_error"] = err.Error()
			continue
		}
		for k, v := range res {
			r[name+"_"+k] = v
		}
	}

	// A child still running at Close must not go on unguarded: Close
	// kills it.
	sleeper := exec.Command("/bin/sleep", "60")
	r.Set("orphan_start", sleeper.Start())
	r.Set("close", g.Close())
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		r["orphan_killed"] = strconv.FormatBool(errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL)
	case <-time.After(5 * time.Second):
		r["orphan_killed"] = "false"
		sleeper.Process.Kill()
	}
	proptest.Emit(r)
	return 0
}

// helperChild runs without installing anything: whatever restricts it was
// inherited.
func helperChild(a helperArgs) int {
	r := result{}
	r["cgroup"], _ = ownCgroup2Path("/proc/self/cgroup")
	fd, err := dial(unix.SOCK_STREAM, loop4(a.AllowTCP))
	r.Set("tcp_allowed", err)
	if err == nil {
		unix.Close(fd)
	}
	_, err = dial(unix.SOCK_STREAM, loop4(a.DenyTCP))
	r.Set("tcp_denied", err)
	r.Set("udp_sendto_denied", sendto(loop4(a.DenyUDP), "child"))
	proptest.Emit(r)
	return 0
}

// helperControl installs, reports ready, waits for the parent (which runs an
// unguarded process against the same destinations meanwhile), then checks
// that it is still denied itself.
func helperControl(a helperArgs) int {
	r := result{}
	g, err := installFor(a, policyFor(a))
	r.Set("install", err)
	if err != nil {
		proptest.Emit(r)
		return 0
	}
	defer g.Close()
	fmt.Println("@ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	_, err = dial(unix.SOCK_STREAM, loop4(a.DenyTCP))
	r.Set("tcp_denied", err)
	proptest.Emit(r)
	return 0
}

// helperServe is the server pattern of property 14: install the guard, and
// open the listener only if that succeeded. Variant "invalid" installs an
// invalid policy.
func helperServe(a helperArgs) int {
	r := result{}
	before, _ := ownCgroup2Path("/proc/self/cgroup")
	p := policyFor(a)
	if a.Variant == "invalid" {
		// Host bits set: a typo that must not silently widen the policy.
		p.Allow = append(p.Allow, Rule{Prefix: netip.MustParsePrefix("127.0.0.1/8"), Ports: AllPorts()})
	}
	g, err := installFor(a, p)
	r.Set("install", err)
	for name, sentinel := range sentinels {
		if errors.Is(err, sentinel) {
			r["is:"+name] = "true"
		}
	}
	after, _ := ownCgroup2Path("/proc/self/cgroup")
	r["cgroup_unchanged"] = strconv.FormatBool(before == after)
	r["leftover_cgroups"] = strconv.Itoa(countGuardCgroups())
	if err != nil {
		proptest.Emit(r)
		return 3 // not serving
	}
	r["active"] = strconv.FormatBool(g.Active())
	defer g.Close()
	ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", a.ServePort))
	r.Set("listen", err)
	if err == nil {
		fmt.Println("@ready")
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("served"))
			c.Close()
		}
		ln.Close()
	}
	proptest.Emit(r)
	return 0
}

// countGuardCgroups counts guard cgroups under the process's cgroup.
func countGuardCgroups() int {
	place, err := locateCgroup()
	if err != nil {
		return -1
	}
	entries, _ := os.ReadDir(place.orig)
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), cgroupNamePrefix+strconv.Itoa(os.Getpid())+"-") {
			n++
		}
	}
	return n
}

// helperUpdate: property 8 — a rule added at run time applies at once, and
// its removal applies at once.
func helperUpdate(a helperArgs) int {
	r := result{}
	g, err := installFor(a, policyFor(a))
	r.Set("install", err)
	if err != nil {
		proptest.Emit(r)
		return 0
	}
	defer g.Close()
	deny := AllowAddrPort(loop4(a.DenyTCP))
	_, err = dial(unix.SOCK_STREAM, loop4(a.DenyTCP))
	r.Set("initial", err)
	r.Set("allow", g.Allow(deny))
	fd, err := dial(unix.SOCK_STREAM, loop4(a.DenyTCP))
	r.Set("after_allow", err)
	if err == nil {
		unix.Close(fd)
	}
	r.Set("remove", g.Remove(deny))
	_, err = dial(unix.SOCK_STREAM, loop4(a.DenyTCP))
	r.Set("after_remove", err)
	r.Set("remove_absent", g.Remove(deny))
	r["remove_absent_invalid"] = strconv.FormatBool(errors.Is(g.Remove(deny), ErrInvalidPolicy))
	fd, err = dial(unix.SOCK_STREAM, loop4(a.AllowTCP))
	r.Set("allowed_kept", err)
	if err == nil {
		unix.Close(fd)
	}
	proptest.Emit(r)
	return 0
}

// helperRingFull: a full audit ring buffer never turns a deny into an allow;
// the lost records are counted.
func helperRingFull(a helperArgs) int {
	r := result{}
	g, err := Install(context.Background(), policyFor(a), Options{AuditBufferSize: 4096, holdAudit: true})
	r.Set("install", err)
	if err != nil {
		proptest.Emit(r)
		return 0
	}
	defer g.Close()
	const attempts = 500
	denied := 0
	other := ""
	for range attempts {
		_, err := dial(unix.SOCK_STREAM, loop4(a.DenyTCP))
		if errors.Is(err, unix.EPERM) {
			denied++
		} else {
			other = proptest.ErrName(err)
		}
	}
	r["attempts"] = strconv.Itoa(attempts)
	r["denied"] = strconv.Itoa(denied)
	r["other"] = other
	st := g.Stats()
	r["counted"] = strconv.FormatUint(st.Denied[HookConnect4], 10)
	r["kernel_dropped"] = strconv.FormatUint(st.KernelDropped, 10)
	fd, err := dial(unix.SOCK_STREAM, loop4(a.AllowTCP))
	r.Set("allowed_still", err)
	if err == nil {
		unix.Close(fd)
	}
	proptest.Emit(r)
	return 0
}

// collect runs cmd and parses its @result line.
