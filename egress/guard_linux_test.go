package egress

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/tenantmcp/tenantmcp/internal/proptest"
)

// requireGuard skips the test, with the exact reason, where a guard cannot be
// installed (not root, no cgroup v2, BPF refused); any other failure to
// install is a test failure.
func requireGuard(t testing.TB) {
	t.Helper()
	guardProbeOnce.Do(func() {
		if os.Geteuid() != 0 {
			guardSkip = "egress guard tests need root (BPF programs, cgroup v2 writes); running as uid " + strconv.Itoa(os.Geteuid())
			return
		}
		r, err := collect(helperCmd("probe", helperArgs{}))
		if err != nil {
			guardFail = "probe helper: " + err.Error()
			return
		}
		if r["install"] == "ok" {
			return
		}
		if r["is:ErrNotPermitted"] == "true" || r["is:ErrNoCgroup2"] == "true" || r["is:ErrUnsupported"] == "true" {
			guardSkip = "egress guard cannot be installed here: " + r["reason"]
			return
		}
		guardFail = "Install failed: " + r["reason"]
	})
	if guardSkip != "" {
		t.Skip(guardSkip)
	}
	if guardFail != "" {
		t.Fatal(guardFail)
	}
}

var (
	guardProbeOnce       sync.Once
	guardSkip, guardFail string
)

func helperCmd(scenario string, a helperArgs) *exec.Cmd {
	js, _ := json.Marshal(a)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+scenario, helperArgsEnv+"="+string(js))
	return cmd
}

// The helper protocol, sinks and checks are the ones the sandbox suite
// uses too.
type (
	helperProc = proptest.Proc
	sink       = proptest.Sink
)

var (
	tcpSink        = proptest.TCPSink
	udpSink        = proptest.UDPSink
	want           = proptest.Want
	wantFailed     = proptest.WantFailed
	freePort       = proptest.FreePort
	wantNotServing = proptest.WantNotServing
)

func startHelper(t *testing.T, scenario string, a helperArgs, prepare func(*exec.Cmd)) *helperProc {
	t.Helper()
	cmd := helperCmd(scenario, a)
	if prepare != nil {
		prepare(cmd)
	}
	return proptest.Start(t, cmd)
}

// fixture is a fresh set of loopback sinks for one property run.
type fixture struct {
	a                   helperArgs
	allowTCP, denyTCP   *sink
	allowUDP, denyUDP   *sink
	allowTCP6, denyTCP6 *sink
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{
		allowTCP: tcpSink(t, "tcp4", "127.0.0.1:0"),
		denyTCP:  tcpSink(t, "tcp4", "127.0.0.1:0"),
		allowUDP: udpSink(t),
		denyUDP:  udpSink(t),
	}
	f.a = helperArgs{AllowTCP: f.allowTCP.Port, DenyTCP: f.denyTCP.Port, AllowUDP: f.allowUDP.Port, DenyUDP: f.denyUDP.Port}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		f.allowTCP6 = tcpSink(t, "tcp6", "[::1]:0")
		f.denyTCP6 = tcpSink(t, "tcp6", "[::1]:0")
		f.a.AllowTCP6, f.a.DenyTCP6 = f.allowTCP6.Port, f.denyTCP6.Port
	}
	return f
}

func eventually(cond func() bool) bool {
	for range 100 {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// Property 1: a guarded process reaches allowed loopback destinations and gets
// EPERM for denied ones — TCP connect (IPv4, IPv6, v4-mapped), UDP sendto on an
// unconnected socket and UDP connect — with the denial in the audit stream;
// AF_UNIX is unaffected; Close restores the process.
func propAllowDeny(t *testing.T) {
	f := newFixture(t)
	r, err := collect(helperCmd("connect", f.a))
	if err != nil {
		t.Fatal(err)
	}
	want(t, r, "install", "ok")
	want(t, r, "in_guard", "true")
	want(t, r, "tcp_allowed", "ok")
	want(t, r, "tcp_allowed_write", "ok")
	want(t, r, "tcp_denied", "EPERM")
	want(t, r, "tcp_denied_mapped", "EPERM")
	want(t, r, "tcp_allowed_mapped", "ok")
	want(t, r, "udp_sendto_allowed", "ok")
	want(t, r, "udp_sendto_denied", "EPERM")
	want(t, r, "udp_connect_denied", "EPERM")
	want(t, r, "unix_socketpair", "ok")
	if f.a.AllowTCP6 != 0 {
		want(t, r, "tcp6_allowed", "ok")
		want(t, r, "tcp6_denied", "EPERM")
	}
	want(t, r, "denial", "found")
	want(t, r, "denial_pid_ok", "true")
	want(t, r, "dropped", "0")
	if n, _ := strconv.Atoi(r["denied_connect4"]); n < 2 {
		t.Errorf("denied_connect4 = %q, want >= 2 (tcp and udp connect)", r["denied_connect4"])
	}
	want(t, r, "close", "ok")
	want(t, r, "restored", "true")
	want(t, r, "cgroup_removed", "true")
	want(t, r, "tcp_denied_after_close", "ok")
	if !eventually(func() bool { return strings.Contains(f.allowTCP.String(), "hello") }) {
		t.Errorf("allowed TCP sink got %q, want hello", f.allowTCP.String())
	}
	if !eventually(func() bool { return strings.Contains(f.allowUDP.String(), "udp-hello") }) {
		t.Errorf("allowed UDP sink got %q", f.allowUDP.String())
	}
	if got := f.denyUDP.String(); got != "" {
		t.Errorf("denied UDP sink received %q", got)
	}
}

// Property 2 (control): while a guarded process is denied, an unguarded
// process on the same host reaches the same destination.
func propUnguardedControl(t *testing.T) {
	f := newFixture(t)
	h := startHelper(t, "control", f.a, nil)
	h.Expect(t, "@ready")
	c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", f.a.DenyTCP))
	if err != nil {
		t.Errorf("unguarded test process: %v", err)
	} else {
		c.Close()
	}
	other, err := collect(helperCmd("child", f.a))
	if err != nil {
		t.Fatal(err)
	}
	want(t, other, "tcp_denied", "ok")
	want(t, other, "udp_sendto_denied", "ok")
	h.Send("go")
	r := h.Result(t)
	want(t, r, "install", "ok")
	want(t, r, "tcp_denied", "EPERM")
}

// Properties 3 and 13: sends on connections established while their
// destination was allowed fail after it is removed (send, sendto, sendmsg,
// write on TCP; send on connected UDP), and none of their bytes arrive.
// Replies on an inbound connection to the guarded process's own listener
// continue.
func propEstablished(t *testing.T, variant string) {
	f := newFixture(t)
	a := f.a
	a.Variant = variant
	h := startHelper(t, "established", a, nil)
	port := h.Expect(t, "@listen ")
	in, err := net.DialTimeout("tcp4", "127.0.0.1:"+port, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	inbound := &sink{}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := in.Read(buf)
			inbound.Add(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	r := h.Result(t)
	t.Logf("helper: %v", r)
	want(t, r, "install", "ok")
	want(t, r, "remove", "ok")
	for _, k := range []string{"send", "sendto", "sendmsg", "write"} {
		want(t, r, "before_"+k, "ok")
		want(t, r, "acked_"+k, "ok")
		if variant != "nosweep" {
			wantFailed(t, r, "after_"+k)
		}
	}
	want(t, r, "udp_before", "ok")
	want(t, r, "udp_after", "EPERM")
	want(t, r, "connect_after", "EPERM")
	want(t, r, "inbound_before", "ok")
	want(t, r, "inbound_after", "ok")
	if variant == "nosweep" {
		if n, _ := strconv.Atoi(r["egress_drops"]); n == 0 {
			t.Errorf("egress_drops = %q, want > 0", r["egress_drops"])
		}
	} else if n, _ := strconv.Atoi(r["aborted"]); n < 4 {
		t.Errorf("aborted = %q, want >= 4", r["aborted"])
	}
	if !eventually(func() bool { return strings.Contains(inbound.String(), "pong-after|") }) {
		t.Errorf("inbound connection received %q, want pong-before and pong-after", inbound.String())
	}
	// Give a retransmission time to arrive if the guard let it through;
	// the helper keeps the guard installed until we acknowledge.
	time.Sleep(300 * time.Millisecond)
	got := f.allowTCP.String()
	for _, k := range []string{"send", "sendto", "sendmsg", "write"} {
		if !strings.Contains(got, "before-"+k+"|") {
			t.Errorf("TCP sink lacks before-%s: %q", k, got)
		}
	}
	if strings.Contains(got, "after-") {
		t.Errorf("TCP sink received data sent after removal: %q", got)
	}
	if u := f.allowUDP.String(); !strings.Contains(u, "before-udp") || strings.Contains(u, "after-udp") {
		t.Errorf("UDP sink got %q, want before-udp only", u)
	}
	h.Send("done")
}

// Property 5: a forked+exec'd child and a child started by /bin/sh -c (which
// forks it) are restricted like the parent; a child still running at Close
// is killed rather than left unguarded.
func propInherit(t *testing.T) {
	f := newFixture(t)
	r, err := collect(helperCmd("inherit", f.a))
	if err != nil {
		t.Fatal(err)
	}
	want(t, r, "install", "ok")
	want(t, r, "close", "ok")
	want(t, r, "orphan_killed", "true")
	for _, c := range []string{"exec", "sh"} {
		if e := r[c+"_error"]; e != "" {
			t.Errorf("%s child: %s", c, e)
			continue
		}
		want(t, r, c+"_cgroup", r["guard_path"])
		want(t, r, c+"_tcp_allowed", "ok")
		want(t, r, c+"_tcp_denied", "EPERM")
		want(t, r, c+"_udp_sendto_denied", "EPERM")
	}
}

// Property 8: a rule added at run time applies at once; removing it applies
// at once; removing an absent rule is an error and changes nothing.
func propHotUpdate(t *testing.T) {
	f := newFixture(t)
	r, err := collect(helperCmd("update", f.a))
	if err != nil {
		t.Fatal(err)
	}
	want(t, r, "install", "ok")
	want(t, r, "initial", "EPERM")
	want(t, r, "allow", "ok")
	want(t, r, "after_allow", "ok")
	want(t, r, "remove", "ok")
	want(t, r, "after_remove", "EPERM")
	want(t, r, "remove_absent_invalid", "true")
	want(t, r, "allowed_kept", "ok")
}

// Property 14 (invalid policy): Install refuses, the process stays in its
// cgroup with nothing left behind, and the server never opens its listener.
func propInvalidPolicy(t *testing.T) {
	f := newFixture(t)
	a := f.a
	a.ServePort = freePort(t)
	a.Variant = "invalid"
	cmd := helperCmd("serve", a)
	r, err := collect(cmd)
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, r, "install")
	want(t, r, "is:ErrInvalidPolicy", "true")
	want(t, r, "cgroup_unchanged", "true")
	want(t, r, "leftover_cgroups", "0")
	if _, ok := r["listen"]; ok {
		t.Errorf("helper opened its listener after a failed Install")
	}
	if cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("helper exit code %d, want 3 (refused to start)", cmd.ProcessState.ExitCode())
	}
	wantNotServing(t, a.ServePort)
}

// hostileCgroup makes a cgroup whose connect4 program was attached without
// BPF_F_ALLOW_OVERRIDE/MULTI: the kernel then refuses any attachment below it,
// so a guard installed by a process inside fails to attach.
func hostileCgroup(t *testing.T) *os.File {
	t.Helper()
	place, err := locateCgroup()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(place.orig, fmt.Sprintf("tenantmcp-egresstest-%d-%d", os.Getpid(), rand.Uint32()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.CGroupSockAddr,
		AttachType:   ebpf.AttachCGroupInet4Connect,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()},
		License:      "GPL",
	})
	if err != nil {
		os.Remove(dir)
		t.Fatal(err)
	}
	cg, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := link.RawAttachProgramOptions{Target: int(cg.Fd()), Program: prog, Attach: ebpf.AttachCGroupInet4Connect}
	if err := link.RawAttachProgram(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		link.RawDetachProgram(link.RawDetachProgramOptions{Target: opts.Target, Program: prog, Attach: opts.Attach})
		prog.Close()
		cg.Close()
		eventually(func() bool { return os.Remove(dir) == nil })
	})
	return cg
}

func inCgroup(cg *os.File) func(*exec.Cmd) {
	return func(cmd *exec.Cmd) {
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	}
}

// Property 14 (failed attach): Install fails with ErrAttach, rolls back, and
// the server never opens its listener; with BestEffort chosen explicitly it
// serves, and says the guard is not active.
func propFailedAttach(t *testing.T) {
	f := newFixture(t)
	cg := hostileCgroup(t)

	a := f.a
	a.ServePort = freePort(t)
	cmd := helperCmd("serve", a)
	inCgroup(cg)(cmd)
	r, err := collect(cmd)
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, r, "install")
	want(t, r, "is:ErrAttach", "true")
	want(t, r, "cgroup_unchanged", "true")
	want(t, r, "leftover_cgroups", "0")
	if _, ok := r["listen"]; ok {
		t.Errorf("helper opened its listener after a failed Install")
	}
	wantNotServing(t, a.ServePort)

	a.ServePort = freePort(t)
	a.BestEffort = true
	h := startHelper(t, "serve", a, inCgroup(cg))
	h.Expect(t, "@ready")
	c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", a.ServePort))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "served" {
		t.Errorf("best-effort server answered %q", got)
	}
	r = h.Result(t)
	want(t, r, "install", "ok")
	want(t, r, "active", "false")
}

// A full audit ring buffer never turns a deny into an allow; lost records
// are counted.
func propRingFull(t *testing.T) {
	f := newFixture(t)
	r, err := collect(helperCmd("ringfull", f.a))
	if err != nil {
		t.Fatal(err)
	}
	want(t, r, "install", "ok")
	want(t, r, "denied", r["attempts"])
	want(t, r, "counted", r["attempts"])
	if n, _ := strconv.Atoi(r["kernel_dropped"]); n == 0 {
		t.Errorf("kernel_dropped = 0, want > 0 (the 4 KiB buffer holds far fewer than %s records)", r["attempts"])
	}
	want(t, r, "allowed_still", "ok")
	if f.denyTCP.String() != "" {
		t.Errorf("denied sink received data")
	}
}

var properties = []proptest.Property{
	{Name: "P01-allow-deny-connect-sendto", Run: propAllowDeny},
	{Name: "P02-unguarded-control", Run: propUnguardedControl},
	{Name: "P03+13-established-sends-abort", Run: func(t *testing.T) { propEstablished(t, "") }},
	{Name: "P03+13-established-egress-hook-only", Run: func(t *testing.T) { propEstablished(t, "nosweep") }},
	{Name: "P05-fork-exec-inheritance", Run: propInherit},
	{Name: "P08-hot-update", Run: propHotUpdate},
	{Name: "P14-invalid-policy-not-serving", Run: propInvalidPolicy},
	{Name: "P14-failed-attach-not-serving", Run: propFailedAttach},
	{Name: "audit-full-ringbuf-still-denies", Run: propRingFull},
}

// TestProperties runs every property TENANTMCP_EGRESS_RUNS times (default 3)
// in a fresh random order each round, and logs a pass/run table (go test -v).
func TestProperties(t *testing.T) {
	requireGuard(t)
	proptest.Run(t, "TENANTMCP_EGRESS_RUNS", "", properties)
}

// TestInstallTwiceRefused: a second Install in the same process is refused.
func TestInstallTwiceRefused(t *testing.T) {
	requireGuard(t)
	// Run in a helper: Install must not touch the test process.
	r, err := collect(helperCmd("probe", helperArgs{}))
	if err != nil {
		t.Fatal(err)
	}
	want(t, r, "install", "ok")
	want(t, r, "second_install_refused", "true")
}
