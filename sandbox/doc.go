// Package sandbox confines the server process, all its threads and every
// process it forks or execs, to the files, TCP ports and IPC peers it needs,
// with Linux Landlock: an unprivileged, stackable security module. It is
// tenantmcp's damage boundary where the eBPF egress guard (package egress)
// cannot be loaded — containers, Kubernetes pods, a developer's laptop —
// and the file half of that boundary everywhere: a tool tricked into
// reading a key file, overwriting a binary or exfiltrating data gets EACCES
// from the kernel, before any side effect.
//
// # Use
//
// Install first thing in main, before any file, database pool, listener or
// client exists, and refuse to start if it fails:
//
//	sqlite, _ := sandbox.SQLiteDir("/var/lib/app/db/app.db")
//	sb, err := sandbox.Install(ctx, sandbox.Policy{
//		Paths:      append(sandbox.SystemFiles(), sqlite, sandbox.ReadWriteDirs(tmp)),
//		ConnectTCP: []uint16{5432, 443}, // database, identity provider
//		BindTCP:    []uint16{8080},      // the listen port
//	}, sandbox.Options{})
//	if err != nil {
//		log.Fatal(err) // errors.Is(err, sandbox.ErrUnsupported) etc.
//	}
//	log.Printf("sandbox: %s", sb.Enforced())
//	// only now: open the DB pool, listen, serve.
//
// Landlock cannot be lifted: there is no Close, and a second [Install] in the
// same process fails with [ErrAlreadyInstalled]. [Options.BestEffort] serves
// anyway when the kernel lacks Landlock (inactive [Sandbox]) or has an ABI
// below [Options.MinABI] (the rights it has are enforced; [Sandbox.Err] says
// what is missing), after a logged warning; an invalid policy is always an
// error.
//
// # What is enforced
//
// Install detects the kernel's Landlock ABI and restricts every right of
// that ABI this package handles; [Sandbox.Enforced] lists them by their kernel
// names and [Install] logs them. On ABI 7 (Linux 6.15+), as on these machines:
//
//	files    execute, write_file, read_file, read_dir, remove_dir,
//	         remove_file, make_char, make_dir, make_reg, make_sock,
//	         make_fifo, make_block, make_sym, refer (ABI 2), truncate
//	         (ABI 3), ioctl_dev (ABI 5)
//	network  bind_tcp, connect_tcp (ABI 4)
//	scopes   abstract_unix_socket, signal (ABI 6): no connecting to an
//	         abstract Unix socket of, and no signal to, a process outside
//	         the sandbox
//	seccomp  socket(2) of IPPROTO_MPTCP and IPPROTO_SCTP fails with
//	         EPROTONOSUPPORT, a send with MSG_FASTOPEN with EOPNOTSUPP,
//	         io_uring_setup(2) and foreign-ABI system calls with ENOSYS
//	         (amd64, arm64)
//
// A [PathRule] grants [Read] (read files, list directories), [Write] (write,
// truncate, create, remove, rename, link; never device nodes) and [Execute]
// beneath a path. Rules attach to the file hierarchy a path resolves to when
// Install runs, not to names: a symbolic link made later does not reach
// what it points to, and a rename or hard link that would give a file more
// rights than it has where it is fails (EXDEV or EACCES). The ports of
// ConnectTCP and BindTCP hold for every address: Landlock judges ports, not
// addresses.
//
// Not restricted, by the kernel's design or this version:
//   - addresses: any host on an allowed port is reachable; the egress guard
//     checks addresses;
//   - UDP (and so DNS) below ABI 10, and ICMP;
//   - listen(2) on a socket never bound: the kernel binds an ephemeral port
//     itself, without bind(2), so a process can listen on a port the kernel
//     picks (never one it chooses); the tests record this;
//   - connecting to pathname Unix sockets (a PostgreSQL socket in
//     /var/run/postgresql stays reachable; Landlock can restrict it from
//     ABI 9, this version does not handle that right yet);
//   - stat, chmod, chown, utimes, xattrs, flock and ioctl on non-device
//     files, and everything on descriptors opened before Install;
//   - a hard link to a protected file that already exists in an allowed
//     hierarchy (Landlock judges paths, not inodes);
//   - rights of later ABIs this package does not name (resolve_unix,
//     bind_udp, connect_send_udp): handling them would deny what a Policy
//     cannot yet grant.
//
// Three ways around Landlock's TCP rules were found by the tests on this
// kernel, each reaching a port the policy denies: Multipath TCP and SCTP
// sockets (the rules apply to IPPROTO_TCP sockets only, and Go's net.Listen
// asks for Multipath TCP by default), and TCP Fast Open, which connects
// from sendto(2) with MSG_FASTOPEN where Landlock's connect hook never
// runs. Install therefore loads a seccomp filter (synchronised to all
// threads) that refuses those sockets and those sends; Go falls back to
// plain TCP, which Landlock judges, and TFO clients to connect(2). It
// refuses io_uring, whose socket operations seccomp cannot see, too.
//
// # Threads and children
//
// Landlock restricts the thread that enforces a ruleset. go-landlock
// (v0.11.2) enforces on every OS thread of the process: with
// LANDLOCK_RESTRICT_SELF_TSYNC from ABI 8, and before that through libpsx
// (cgo) or syscall.AllThreadsSyscall (no cgo), which run the system call on
// all threads the Go runtime owns. It sets no_new_privs on all threads.
// Children inherit the domain across fork and exec, and their denials are
// audited (ABI 7, LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON). The tests check
// every thread, including threads created before [Install], with and
// without cgo.
//
// # Canary
//
// After enforcing, [Install] proves the domain denies from inside: opening
// "/" (unless the policy grants [Read] on it), binding a TCP port BindTCP does
// not hold, and creating a Multipath TCP socket must all fail with the
// expected error. Anything else fails Install with [ErrNotEnforcing]; the
// restriction already applied stays, and the server must not serve.
//
// # With the egress guard
//
// Both can be installed: the egress guard first (it needs root, and its
// cgroup writes), then the sandbox. A connection must then pass both:
// Landlock's port rules and the guard's address-and-port allowlist; UDP and
// other protocols are judged by the guard alone. The guard's Close cannot
// undo its cgroup from inside the sandbox (the cgroup files are not in the
// policy): at exit the kernel detaches its programs with the process, and
// the next egress.Install removes the empty cgroup left behind.
//
// Landlock needs Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK and
// "landlock" in the active LSM list; [DefaultMinABI] (4, Linux 6.7) is required
// unless [Options.MinABI] lowers it. On other systems [Install] returns
// [ErrUnsupported].
package sandbox
