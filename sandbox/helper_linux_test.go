package sandbox

// Landlock restricts the calling process for good, so sandboxed code never
// runs in the test process itself: TestMain turns the test binary into a
// helper when TENANTMCP_SANDBOX_HELPER names a scenario. Helpers run as an
// unprivileged user (uid 65534 when the tests run as root), so a denial seen
// here is Landlock's and not a missing capability's: the fixture files are
// owned by that user and world-writable. A helper prints protocol lines
// starting with "@" on stdout:
//
//	@ready            it serves (or waits) and reads a line on stdin
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
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tenantmcp/tenantmcp/internal/proptest"
)

// ioUringSetup creates (and closes) a one-entry io_uring.
func ioUringSetup() error {
	var params [120]byte // struct io_uring_params
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
	if errno != 0 {
		return errno
	}
	unix.Close(int(fd))
	return nil
}

const (
	helperEnv     = "TENANTMCP_SANDBOX_HELPER"
	helperArgsEnv = "TENANTMCP_SANDBOX_ARGS"
)

// helperArgs describe the fixture the parent test prepared.
type helperArgs struct {
	Base       string // fixture root: protected/, ro/, rw/
	Secret     string // content of protected/secret.txt
	Self       string // the helper binary (granted Execute in "inherit")
	AllowPort  int    // TCP sink the policy allows connecting to
	DenyPort   int    // TCP sink it does not
	DenyPort6  int    // TCP sink on [::1] it does not (0 without IPv6)
	DenyUDP    int    // UDP sink (UDP is not restricted below ABI 10)
	BindPort   int    // the port the policy allows binding (the listen port)
	OtherPort  int    // a free port it does not
	Abstract   string // an abstract Unix socket name served outside the domain
	Sleeper    int    // pid of a process of the same user outside the domain
	Variant    string
	BestEffort bool
	Iterations int
}

func (a helperArgs) path(p ...string) string { return filepath.Join(append([]string{a.Base}, p...)...) }

// policyFor is the policy of every scenario: read-only ro/, read-write rw/,
// nothing on protected/; connect to AllowPort, bind BindPort.
func policyFor(a helperArgs) Policy {
	return Policy{
		Paths:      []PathRule{ReadOnly(a.path("ro")), ReadWriteDirs(a.path("rw"))},
		ConnectTCP: []uint16{uint16(a.AllowPort)},
		BindTCP:    []uint16{uint16(a.BindPort)},
	}
}

// result collects a helper's observations.
type result = proptest.Result

var (
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
		"read":    helperRead,
		"write":   helperWrite,
		"links":   helperLinks,
		"inherit": helperInherit,
		"child":   helperChild,
		"serve":   helperServe,
		"connect": helperConnect,
		"bind":    helperBind,
		"scope":   helperScope,
		"sleep":   helperSleep,
		"bench":   helperBench,
	}[scenario]
	if fn == nil {
		fmt.Fprintln(os.Stderr, "helper: unknown scenario", scenario)
		return 2
	}
	return fn(a)
}

// install installs policyFor(a) and reports it; false means stop.
func install(a helperArgs, r result) bool {
	s, err := Install(context.Background(), policyFor(a), Options{BestEffort: a.BestEffort})
	r.Set("install", err)
	if err != nil {
		proptest.Emit(r)
		return false
	}
	r["active"] = strconv.FormatBool(s.Active())
	r["enforced"] = s.Enforced().String()
	return true
}

// readFile reads path and reports whether the secret leaked.
func readFile(r result, step, path, secret string) {
	b, err := os.ReadFile(path)
	r.Set(step, err)
	if secret != "" && strings.Contains(string(b), secret) {
		r[step+"_leaked"] = "true"
	}
}

// helperRead: a protected file cannot be read or listed by any path, from
// any OS thread — those that existed before Install and those started after.
func helperRead(a helperArgs) int {
	r := result{}
	// Goroutines pinned to their own OS threads, half started before
	// Install and half after; each reports its thread id and its probe.
	type probeResult struct {
		tid int
		err error
	}
	const pinned = 8
	start, done := make(chan struct{}), make(chan probeResult, 2*pinned)
	spawn := func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
			<-start
			fd, err := unix.Open(a.path("protected", "secret.txt"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			done <- probeResult{unix.Gettid(), err}
		}()
	}
	for range pinned {
		spawn()
	}
	time.Sleep(20 * time.Millisecond)
	if !install(a, r) {
		return 0
	}
	for range pinned {
		spawn()
	}
	close(start)
	denied, tids := 0, map[int]bool{}
	for range 2 * pinned {
		p := <-done
		tids[p.tid] = true
		if errors.Is(p.err, unix.EACCES) {
			denied++
		}
	}
	r["threads_denied"] = fmt.Sprintf("%d/%d", denied, 2*pinned)
	r["distinct_threads"] = strconv.Itoa(len(tids))

	readFile(r, "read_protected", a.path("protected", "secret.txt"), a.Secret)
	_, err := os.ReadDir(a.path("protected"))
	r.Set("list_protected", err)
	readFile(r, "read_protected_dotdot", a.path("ro", "..", "protected", "secret.txt"), a.Secret)
	readFile(r, "read_protected_proc_root", "/proc/self/root"+a.path("protected", "secret.txt"), a.Secret)
	// An O_PATH descriptor is not an access; what is opened through it is.
	dfd, err := unix.Open(a.path("protected"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	r.Set("opath_protected_dir", err)
	if err == nil {
		fd, err := unix.Openat(dfd, "secret.txt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		r.Set("openat_via_opath", err)
		if err == nil {
			unix.Close(fd)
		}
		readFile(r, "read_via_proc_fd", "/proc/self/fd/"+strconv.Itoa(dfd)+"/secret.txt", a.Secret)
		unix.Close(dfd)
	}
	readFile(r, "read_ro", a.path("ro", "file.txt"), "")
	_, err = os.ReadDir(a.path("ro"))
	r.Set("list_ro", err)
	proptest.Emit(r)
	return 0
}

// helperWrite: no write, append, create, truncate, rename, unlink, mkdir,
// rmdir, symlink or mkfifo in a read-only or a protected hierarchy. The
// parent compares both trees before and after.
func helperWrite(a helperArgs) int {
	r := result{}
	if !install(a, r) {
		return 0
	}
	for _, dir := range []string{"ro", "protected"} {
		file := a.path(dir, "file.txt")
		if dir == "protected" {
			file = a.path(dir, "secret.txt")
		}
		open := func(step string, name string, flags int) {
			fd, err := unix.Open(name, flags|unix.O_CLOEXEC, 0o666)
			if err == nil {
				unix.Write(fd, []byte("overwritten"))
				unix.Close(fd)
			}
			r.Set(dir+"_"+step, err)
		}
		open("write", file, unix.O_WRONLY)
		open("append", file, unix.O_WRONLY|unix.O_APPEND)
		open("open_trunc", file, unix.O_WRONLY|unix.O_TRUNC)
		open("rdonly_trunc", file, unix.O_RDONLY|unix.O_TRUNC)
		open("create", a.path(dir, "new.txt"), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
		open("tmpfile", a.path(dir), unix.O_WRONLY|unix.O_TMPFILE)
		r.Set(dir+"_truncate", unix.Truncate(file, 0))
		r.Set(dir+"_rename", unix.Rename(file, a.path(dir, "renamed.txt")))
		r.Set(dir+"_rename_to_rw", unix.Rename(file, a.path("rw", "moved.txt")))
		r.Set(dir+"_exchange", unix.Renameat2(unix.AT_FDCWD, file, unix.AT_FDCWD, a.path(dir, "sub"), unix.RENAME_EXCHANGE))
		r.Set(dir+"_unlink", unix.Unlink(file))
		r.Set(dir+"_mkdir", unix.Mkdir(a.path(dir, "newdir"), 0o777))
		r.Set(dir+"_rmdir", unix.Rmdir(a.path(dir, "sub")))
		r.Set(dir+"_symlink", unix.Symlink("/etc/passwd", a.path(dir, "sym")))
		r.Set(dir+"_mkfifo", unix.Mkfifo(a.path(dir, "fifo"), 0o666))
		r.Set(dir+"_mksock", bindUnixPath(a.path(dir, "sock")))
	}
	// Control: the same operations succeed in the read-write hierarchy.
	rw := a.path("rw", "ctl.txt")
	r.Set("rw_create", os.WriteFile(rw, []byte("x"), 0o666))
	r.Set("rw_truncate", unix.Truncate(rw, 0))
	r.Set("rw_rename", os.Rename(rw, rw+".2"))
	r.Set("rw_unlink", os.Remove(rw+".2"))
	r.Set("rw_mkdir", os.Mkdir(a.path("rw", "d"), 0o777))
	r.Set("rw_rmdir", os.Remove(a.path("rw", "d")))
	proptest.Emit(r)
	return 0
}

func bindUnixPath(path string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrUnix{Name: path})
}

// helperLinks: hard links, renames and symbolic links do not carry a
// protected or read-only file into the read-write hierarchy.
func helperLinks(a helperArgs) int {
	r := result{}
	if !install(a, r) {
		return 0
	}
	secret, ro := a.path("protected", "secret.txt"), a.path("ro", "file.txt")
	r.Set("hardlink_protected_into_rw", unix.Link(secret, a.path("rw", "h1")))
	r.Set("hardlink_ro_into_rw", unix.Link(ro, a.path("rw", "h2")))
	r.Set("rename_protected_into_rw", unix.Rename(secret, a.path("rw", "stolen")))
	r.Set("rename_ro_into_rw", unix.Rename(ro, a.path("rw", "writable")))
	r.Set("rename_protected_dir_into_rw", unix.Rename(a.path("protected"), a.path("rw", "p")))
	r.Set("rename_rw_dir_over_protected", unix.Rename(a.path("rw"), a.path("protected2")))
	// An O_PATH descriptor of the protected file, linked through
	// /proc/self/fd (no privilege needed), and an exchange of a rw/ file
	// with a read-only one.
	if pfd, err := unix.Open(secret, unix.O_PATH|unix.O_CLOEXEC, 0); err == nil {
		r.Set("hardlink_via_proc_fd", unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(pfd), unix.AT_FDCWD, a.path("rw", "h3"), unix.AT_SYMLINK_FOLLOW))
		unix.Close(pfd)
	} else {
		r.Set("hardlink_via_proc_fd", err)
	}
	mine := a.path("rw", "mine.txt")
	if err := os.WriteFile(mine, []byte("mine"), 0o666); err == nil {
		r.Set("exchange_rw_with_ro", unix.Renameat2(unix.AT_FDCWD, mine, unix.AT_FDCWD, ro, unix.RENAME_EXCHANGE))
		os.Remove(mine)
	} else {
		r.Set("exchange_rw_with_ro", err)
	}
	// Symbolic links may be created in rw/, but Landlock judges the file
	// they resolve to.
	r.Set("symlink_create", unix.Symlink(secret, a.path("rw", "sl")))
	readFile(r, "read_via_symlink", a.path("rw", "sl"), a.Secret)
	r.Set("symlink_dir_create", unix.Symlink(a.path("protected"), a.path("rw", "sldir")))
	readFile(r, "read_via_dir_symlink", a.path("rw", "sldir", "secret.txt"), a.Secret)
	fd, err := unix.Open(a.path("rw", "sl"), unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	r.Set("truncate_via_symlink", err)
	proptest.Emit(r)
	return 0
}

// helperInherit: processes the sandboxed helper execs are in its domain:
// cat cannot read the protected file, a re-exec'd helper is denied files,
// connect and bind, and a binary not granted Execute cannot run at all.
func helperInherit(a helperArgs) int {
	r := result{}
	p := policyFor(a)
	cat, _ := exec.LookPath("cat")
	cat, _ = filepath.EvalSymlinks(cat)
	p.Paths = append(p.Paths, Executables(a.Self, cat), LibraryDirs())
	p.Paths = append(p.Paths, SystemFiles()...) // os/exec opens /dev/null
	s, err := Install(context.Background(), p, Options{})
	r.Set("install", err)
	if err != nil {
		proptest.Emit(r)
		return 0
	}
	r["enforced"] = s.Enforced().String()
	out, err := exec.Command(cat, a.path("protected", "secret.txt")).CombinedOutput()
	r.Set("cat_protected", err)
	r["cat_protected_leaked"] = strconv.FormatBool(strings.Contains(string(out), a.Secret))
	r["cat_protected_says_denied"] = strconv.FormatBool(strings.Contains(string(out), "Permission denied"))
	out, err = exec.Command(cat, a.path("ro", "file.txt")).CombinedOutput()
	r.Set("cat_ro", err)
	r["cat_ro_output"] = string(out)
	err = exec.Command(truePath(), "").Run()
	r.Set("exec_not_granted", err)

	child := exec.Command(a.Self)
	js, _ := json.Marshal(a)
	child.Env = append(os.Environ(), helperEnv+"=child", helperArgsEnv+"="+string(js))
	out, err = child.Output()
	r.Set("child_run", err)
	if cr, err := proptest.ParseResult(string(out)); err == nil {
		for k, v := range cr {
			r["child_"+k] = v
		}
	}
	proptest.Emit(r)
	return 0
}

func truePath() string {
	p, _ := exec.LookPath("true")
	p, _ = filepath.EvalSymlinks(p)
	return p
}

// helperChild runs in a process exec'd by a sandboxed helper: it does not
// install anything itself.
func helperChild(a helperArgs) int {
	r := result{}
	readFile(r, "read_protected", a.path("protected", "secret.txt"), a.Secret)
	r.Set("create_ro", os.WriteFile(a.path("ro", "child.txt"), []byte("x"), 0o666))
	r.Set("connect_denied", dialTCP(loop4(a.DenyPort)))
	r.Set("connect_allowed", dialTCP(loop4(a.AllowPort)))
	r.Set("bind_other", bindTCP(loop4(a.OtherPort)))
	proptest.Emit(r)
	return 0
}

// socketTo opens a socket of the family of ap with the given type and
// protocol, runs op on it and closes it.
func socketTo(ap netip.AddrPort, typ, proto int, op func(fd int, sa unix.Sockaddr) error) error {
	family, sa := sockaddr(ap)
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return op(fd, sa)
}

// dialTCP connects a plain TCP socket and writes a byte.
func dialTCP(ap netip.AddrPort) error {
	return socketTo(ap, unix.SOCK_STREAM, unix.IPPROTO_TCP, func(fd int, sa unix.Sockaddr) error {
		if err := unix.Connect(fd, sa); err != nil {
			return err
		}
		_, err := unix.Write(fd, []byte("x"))
		return err
	})
}

func bindTCP(ap netip.AddrPort) error {
	return socketTo(ap, unix.SOCK_STREAM, unix.IPPROTO_TCP, func(fd int, sa unix.Sockaddr) error {
		return unix.Bind(fd, sa)
	})
}

// helperServe installs the variant's policy and, only if Install returns
// without error, serves "served" on BindPort. Variants are invalid policies
// and an ABI requirement the kernel cannot meet.
func helperServe(a helperArgs) int {
	r := result{}
	p := policyFor(a)
	opts := Options{BestEffort: a.BestEffort}
	switch a.Variant {
	case "relative":
		p.Paths = append(p.Paths, ReadOnly("etc"))
	case "unclean":
		p.Paths = append(p.Paths, ReadOnly(a.Base+"/ro/../protected"))
	case "missing":
		p.Paths = append(p.Paths, ReadOnly(a.path("no-such-dir")))
	case "noaccess":
		p.Paths = append(p.Paths, PathRule{Paths: []string{a.path("ro")}})
	case "badaccess":
		p.Paths = append(p.Paths, PathRule{Paths: []string{a.path("ro")}, Access: 1 << 6})
	case "port0":
		p.ConnectTCP = append(p.ConnectTCP, 0)
	case "minabi":
		opts.MinABI = 99
	case "nolandlock": // a kernel without Landlock
		opts.kernelABI = -1
	case "abi3": // files and truncation, no TCP rules
		opts.kernelABI = 3
	case "twice":
	default:
		fmt.Fprintln(os.Stderr, "serve: unknown variant", a.Variant)
		return 2
	}
	s, err := Install(context.Background(), p, opts)
	if a.Variant == "twice" && err == nil {
		_, err = Install(context.Background(), p, opts)
	}
	r.Set("install", err)
	for name, sentinel := range sentinels {
		if errors.Is(err, sentinel) {
			r["is:"+name] = "true"
		}
	}
	if err != nil {
		proptest.Emit(r)
		return 0
	}
	r["active"] = strconv.FormatBool(s.Active())
	r["enforced"] = s.Enforced().String()
	for name, sentinel := range sentinels {
		if errors.Is(s.Err(), sentinel) {
			r["err_is:"+name] = "true"
		}
	}
	// What the best-effort sandbox still denies.
	b, err := os.ReadFile(a.path("protected", "secret.txt"))
	r.Set("read_protected", err)
	if strings.Contains(string(b), a.Secret) {
		r["read_protected_leaked"] = "true"
	}
	ln, err := listenTCP(loop4(a.BindPort))
	r.Set("listen", err)
	if err != nil {
		proptest.Emit(r)
		return 0
	}
	defer ln.Close()
	fmt.Println("@ready")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("served"))
			c.Close()
		}
	}()
	bufio.NewReader(os.Stdin).ReadString('\n')
	proptest.Emit(r)
	return 0
}

var sentinels = map[string]error{
	"ErrUnsupported": ErrUnsupported, "ErrABITooOld": ErrABITooOld, "ErrInvalidPolicy": ErrInvalidPolicy,
	"ErrRestrict": ErrRestrict, "ErrNotEnforcing": ErrNotEnforcing, "ErrAlreadyInstalled": ErrAlreadyInstalled,
}

// listenTCP listens on plain TCP (not Go's default Multipath TCP, which
// Landlock does not restrict; see the package documentation).
func listenTCP(ap netip.AddrPort) (net.Listener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	return lc.Listen(context.Background(), "tcp4", ap.String())
}

// helperConnect: TCP connect only to the allowed port, on any address
// (Landlock judges ports); UDP and Multipath TCP are recorded, not
// restricted at ABI < 10.
func helperConnect(a helperArgs) int {
	r := result{}
	if !install(a, r) {
		return 0
	}
	r.Set("connect_allowed", dialTCP(loop4(a.AllowPort)))
	r.Set("connect_denied", dialTCP(loop4(a.DenyPort)))
	var d net.Dialer
	c, err := d.Dial("tcp", loop4(a.DenyPort).String())
	if err == nil {
		c.Close()
	}
	r.Set("net_dial_denied", err)
	mapped := netip.AddrPortFrom(netip.AddrFrom16(netip.MustParseAddr("127.0.0.1").As16()), uint16(a.DenyPort))
	r.Set("connect_denied_v4mapped", dialTCP(mapped))
	if a.DenyPort6 != 0 {
		r.Set("connect_denied_v6", dialTCP(netip.AddrPortFrom(netip.IPv6Loopback(), uint16(a.DenyPort6))))
	}
	// Observed, not asserted: what Landlock does not cover.
	r.Set("udp_sendto_denied_port", socketTo(loop4(a.DenyUDP), unix.SOCK_DGRAM, 0, func(fd int, sa unix.Sockaddr) error {
		return unix.Sendto(fd, []byte("udp"), 0, sa)
	}))
	// Landlock does not judge Multipath TCP or SCTP sockets; the seccomp
	// filter refuses to create them.
	for name, proto := range map[string]int{"mptcp": unix.IPPROTO_MPTCP, "sctp": unix.IPPROTO_SCTP} {
		r.Set(name+"_connect_denied_port", socketTo(loop4(a.DenyPort), unix.SOCK_STREAM, proto, func(fd int, sa unix.Sockaddr) error {
			return unix.Connect(fd, sa)
		}))
	}
	r.Set("io_uring_setup", ioUringSetup())
	// TCP Fast Open connects from sendto(2), not connect(2).
	r.Set("tfo_sendto_denied_port", socketTo(loop4(a.DenyPort), unix.SOCK_STREAM, unix.IPPROTO_TCP, func(fd int, sa unix.Sockaddr) error {
		return unix.Sendto(fd, []byte("tfo"), unix.MSG_FASTOPEN, sa)
	}))
	r.Set("tfo_sendmsg_denied_port", socketTo(loop4(a.DenyPort), unix.SOCK_STREAM, unix.IPPROTO_TCP, func(fd int, sa unix.Sockaddr) error {
		_, err := unix.SendmsgN(fd, []byte("tfo"), nil, sa, unix.MSG_FASTOPEN)
		return err
	}))
	// Go's default listener asks for Multipath TCP and falls back to TCP,
	// which Landlock judges: listening on a port not allowed fails.
	ln, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(a.OtherPort))
	if err == nil {
		ln.Close()
	}
	r.Set("net_listen_other", err)
	proptest.Emit(r)
	return 0
}

// helperBind: bind only the listen port; what is bound there serves.
func helperBind(a helperArgs) int {
	r := result{}
	if !install(a, r) {
		return 0
	}
	r.Set("bind_other", bindTCP(loop4(a.OtherPort)))
	r.Set("bind_ephemeral", bindTCP(loop4(0)))
	r.Set("bind_other_v6", bindTCP(netip.AddrPortFrom(netip.IPv6Loopback(), uint16(a.OtherPort))))
	r.Set("bind_other_any", bindTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(a.OtherPort))))
	// listen(2) on an unbound socket binds an ephemeral port itself.
	r.Set("listen_unbound", socketTo(loop4(0), unix.SOCK_STREAM, unix.IPPROTO_TCP, func(fd int, _ unix.Sockaddr) error {
		if err := unix.Listen(fd, 1); err != nil {
			return err
		}
		sa, err := unix.Getsockname(fd)
		if err == nil {
			r["listen_unbound_port"] = strconv.Itoa(sa.(*unix.SockaddrInet4).Port)
		}
		return nil
	}))
	ln, err := listenTCP(loop4(a.BindPort))
	r.Set("listen_allowed", err)
	if err == nil {
		defer ln.Close()
		fmt.Println("@ready")
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("served"))
			c.Close()
		}
		r.Set("accept", err)
	}
	proptest.Emit(r)
	return 0
}

// helperScope: abstract Unix sockets and signals do not reach processes
// outside the domain (ABI 6+); inside it they still work.
func helperScope(a helperArgs) int {
	r := result{}
	connectAbstract := func(name string) error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + name})
	}
	r.Set("abstract_outside_before", connectAbstract(a.Abstract))
	r.Set("signal_outside_before", unix.Kill(a.Sleeper, 0))
	if !install(a, r) {
		return 0
	}
	r.Set("abstract_outside", connectAbstract(a.Abstract))
	r.Set("signal_outside", unix.Kill(a.Sleeper, 0))
	r.Set("signal_outside_term", unix.Kill(a.Sleeper, unix.SIGTERM))
	// Inside the domain: our own abstract socket and our own process.
	inner := a.Abstract + "-inner"
	ln, err := net.Listen("unix", "@"+inner)
	if err == nil {
		defer ln.Close()
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
			}
		}()
	}
	r.Set("abstract_inside_listen", err)
	r.Set("abstract_inside", connectAbstract(inner))
	r.Set("signal_self", unix.Kill(os.Getpid(), 0))
	proptest.Emit(r)
	return 0
}

// helperSleep is a process of the helper user outside any domain: the
// target of signals in the scope scenario.
func helperSleep(helperArgs) int {
	fmt.Println("@ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}
