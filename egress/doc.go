// Package egress confines the network egress of the server process, and of
// every process it forks or execs, to an allowlist of destinations, enforced
// by the Linux kernel with eBPF programs on a dedicated cgroup v2.
//
// It is tenantmcp's network boundary in the sense of ContractWarden (gate
// before serve, pre-side-effect denial with EPERM, send-stage enforcement,
// fail-closed setup, audit that cannot weaken a denial): a tool that was
// tricked into exfiltrating data cannot open a connection, or keep using one,
// to a destination the operator did not allow.
//
// # Use
//
// Install the guard first thing in main, before any listener, database pool
// or HTTP client exists, and refuse to start if it fails:
//
//	g, err := egress.Install(ctx, egress.Policy{Allow: []egress.Rule{
//		egress.AllowAddrPort(dbAddr),   // e.g. 127.0.0.1:5432
//		egress.AllowAddrPort(jwksAddr), // the identity provider
//	}}, egress.Options{})
//	if err != nil {
//		log.Fatal(err) // errors.Is(err, egress.ErrNotPermitted) etc.
//	}
//	defer g.Close()
//	go func() {
//		for d := range g.Denials() {
//			auditLog.Warn("egress denied", "denial", d)
//		}
//	}()
//	// only now: open the DB pool, listen, serve.
//
// Rules name addresses, not host names: resolve names (and allow the resolver,
// e.g. 127.0.0.53:53, if the server resolves at run time) before [Install].
// [Options.BestEffort] turns every installation failure except an invalid
// policy into a logged warning and an inactive [Guard]; choose it only where
// running unguarded is acceptable.
//
// # What is enforced
//
// A destination is allowed when some rule's prefix contains its address and
// its port range contains its port; everything else is denied, for IPv4 and
// IPv6 (IPv4-mapped IPv6 destinations are judged by the IPv4 rules). AF_UNIX
// sockets are not affected. Inbound connections are always served: the
// kernel tags sockets created by accept(2) on a listener of the guarded
// process, and their replies leave whatever the allowlist says. UDP has no
// such notion, so a UDP reply is an ordinary send and needs an allow rule.
//
// Programs attached to the guard cgroup, and what each stops:
//
//	cgroup/connect4, connect6  connect(2) on TCP and UDP sockets: EPERM
//	cgroup/sendmsg4, sendmsg6  sendto/sendmsg with an address (UDP): EPERM
//	cgroup_skb/egress          every IP packet of the cgroup's sockets: drop.
//	                           It stops established connections whose
//	                           destination was removed (connected UDP send
//	                           fails with EPERM) and covers raw and ping
//	                           sockets no other hook sees.
//	sockops                    tags accepted (inbound) sockets
//	iter/tcp                   run after each policy change: aborts outbound
//	                           TCP connections the new policy denies, so their
//	                           next send/write fails (ECONNABORTED, then EPIPE)
//	                           instead of queueing data that cannot leave.
//	                           Needs bpf_sock_destroy (Linux 6.5+); without it
//	                           the egress hook still drops their packets.
//
// Policy changes ([Guard.Allow], Remove, Update) rewrite kernel map entries one
// at a time, each atomically; at every moment a destination is judged by its
// old or its new entry, so nothing is allowed that neither policy allows.
//
// # Installation, read-back and canary
//
// Install validates the policy, loads the programs, creates a child cgroup of
// the process's own cgroup v2 directory (found from /proc/self/mountinfo and
// the "0::" line of /proc/self/cgroup, so hybrid layouts work), attaches the
// programs to it while it is still empty, reads the attachment back from the
// kernel, moves the whole process into it (all threads; children inherit it),
// and finally proves enforcement from inside: a connect to an armed canary
// destination and to loopback destinations outside the allowlist must fail
// with EPERM (ECONNREFUSED would mean "attached but not enforcing"), and
// their audit records must arrive. Any failure rolls everything back.
//
// Sockets belong to the cgroup they were created in. Sockets the process
// opened before [Install] are therefore not guarded, which is why Install
// refuses a process that holds IP sockets other than TCP listeners
// ([ErrPreexistingSockets]) unless [Options.AllowPreexistingSockets] is set.
//
// # Audit
//
// Denials are reported through a BPF ring buffer (pid, comm, destination,
// hook) and delivered on [Guard.Denials]. The verdict is decided before the
// record is reserved: when the ring buffer or the channel is full the record
// is dropped and counted ([Guard.Dropped], [Stats]), and the denial stands.
//
// # Lifetime and limits
//
// [Guard.Close] moves the process back to its original cgroup, kills processes
// still left in the guard cgroup (so no child outlives the guard unguarded),
// detaches the programs and removes the cgroup; nothing is pinned. If the
// process dies without Close, the kernel detaches the programs with the last
// file descriptor and the next [Install] removes the empty cgroup left behind.
//
// The guard binds code that lacks privilege over cgroups and BPF. A process
// that keeps CAP_SYS_ADMIN or CAP_BPF (for example, a server running as root)
// could move itself out of the cgroup or detach the programs; drop those
// capabilities after [Install] where tools run untrusted code.
//
// Where the guard cannot be loaded, or to confine files as well, use package
// sandbox (Landlock, unprivileged): it restricts TCP by port only, so with
// both installed the guard adds the address checks and covers UDP.
//
// Install needs Linux with cgroup v2, BTF and privilege to load BPF programs
// and to create a cgroup under the process's own (root, or CAP_BPF,
// CAP_NET_ADMIN and a delegated cgroup). On other systems it returns
// [ErrUnsupported]. The BPF objects are generated by bpf2go from
// internal/kern/guard.bpf.c and committed; gen-check.sh verifies they are
// current.
package egress
