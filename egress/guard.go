package egress

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Hook names the kernel enforcement point that denied a destination.
type Hook uint8

// The enforcement points. HookAbort is not a syscall hook: it reports an
// established outbound TCP connection that a policy change aborted.
const (
	HookConnect4 Hook = iota // connect(2) on an IPv4 TCP/UDP socket
	HookConnect6             // connect(2) on an IPv6 TCP/UDP socket
	HookSendmsg4             // sendto/sendmsg with an IPv4 address (UDP)
	HookSendmsg6             // sendto/sendmsg with an IPv6 address (UDP)
	HookEgress               // a packet leaving an established or unhooked socket
	HookAbort                // established TCP connection aborted after its destination was removed
	numHooks
)

var hookNames = [...]string{"connect4", "connect6", "sendmsg4", "sendmsg6", "egress", "abort"}

func (h Hook) String() string {
	if int(h) < len(hookNames) {
		return hookNames[h]
	}
	return fmt.Sprintf("hook(%d)", uint8(h))
}

// Denial is one audit record of a denied destination.
type Denial struct {
	// Time is when the kernel made the decision.
	Time time.Time
	// PID and Comm identify the process: the caller of the syscall for the
	// connect/sendmsg hooks, the process that connected the socket for
	// HookEgress and HookAbort (when the socket passed a connect hook).
	PID  int
	Comm string
	Hook Hook
	// Network is "tcp", "udp" or "ip:N" for another protocol number.
	Network string
	// Dest is the denied destination. Its port is 0 for protocols without
	// ports.
	Dest netip.AddrPort
}

// LogValue renders a Denial as structured attributes for log/slog.
func (d Denial) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("hook", d.Hook.String()),
		slog.String("network", d.Network),
		slog.String("dest", d.Dest.String()),
		slog.Int("pid", d.PID),
		slog.String("comm", d.Comm),
		slog.Time("time", d.Time),
	)
}

// Stats are the guard's counters since Install.
type Stats struct {
	// Denied counts denials per hook. HookEgress counts every dropped
	// packet (a TCP segment may be retransmitted several times), while only
	// the first per socket and policy change is reported as a Denial.
	Denied [numHooks]uint64
	// Dropped counts denials that were enforced but whose audit record was
	// lost: the kernel ring buffer was full (KernelDropped) or the Denials
	// channel was full (QueueDropped). Dropped = KernelDropped + QueueDropped.
	Dropped, KernelDropped, QueueDropped uint64
}

// Options tune Install, which takes them by value. The zero Options means:
// fail closed, log to slog.Default, 256 KiB audit ring buffer, 1024 queued
// denials, and refuse a process that already holds non-listening IP
// sockets; the zero value of each field is its default, and a negative
// size is refused (ErrInvalidOptions).
type Options struct {
	// BestEffort makes Install return an inactive guard and a nil error,
	// after logging a warning, when the guard cannot be installed. Leave it
	// false for a server that must not run unguarded.
	BestEffort bool

	// Logger receives warnings. Nil means slog.Default().
	Logger *slog.Logger

	// AuditBufferSize is the kernel ring buffer size in bytes; it is rounded
	// up to a power of two of at least one page. Zero means 256 KiB;
	// negative is refused.
	AuditBufferSize int

	// DenialQueue is the capacity of the channel returned by Denials. Zero
	// means 1024; negative is refused.
	DenialQueue int

	// AllowPreexistingSockets lets Install proceed although the process
	// holds IP sockets (other than TCP listeners) created before it; those
	// sockets are not guarded.
	AllowPreexistingSockets bool

	// holdAudit (tests only) leaves the ring buffer undrained after the
	// canary, to prove a full buffer does not weaken enforcement.
	holdAudit bool
}

func (o *Options) logger() *slog.Logger {
	if o != nil && o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

// Guard is an installed egress guard. Its methods are safe for concurrent
// use. A Guard returned by a best-effort Install that failed is inactive:
// Active reports false, Err says why, updates return ErrNotActive, and
// Denials returns a closed channel.
type Guard struct {
	mu      sync.Mutex
	policy  []Rule
	err     error // why the guard is not active; nil while active
	impl    *platformGuard
	denials chan Denial
}

// Active reports whether the guard is enforcing.
func (g *Guard) Active() bool {
	if g == nil { // readiness may ask before, or without, Install
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err == nil
}

// Err returns nil while the guard is active, and otherwise why it is not.
func (g *Guard) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Policy returns a copy of the rules in force.
func (g *Guard) Policy() Policy {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Policy{Allow: slices.Clone(g.policy)}
}

// Allow adds rules to the policy.
func (g *Guard) Allow(rules ...Rule) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.setLocked(append(slices.Clone(g.policy), rules...))
}

// Remove takes rules out of the policy; each must be present exactly as given
// (else nothing changes and the error matches ErrInvalidPolicy). Outbound TCP
// connections whose destination is no longer allowed are aborted, and no
// further packet of theirs leaves; replies on inbound connections continue.
func (g *Guard) Remove(rules ...Rule) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	next, err := without(g.policy, rules)
	if err != nil {
		return err
	}
	return g.setLocked(next)
}

// Update replaces the policy. Each kernel map entry changes atomically, so
// while the update is applied a destination is judged by its old or its new
// entry: nothing is allowed that neither policy allows. After the update,
// established outbound TCP connections to destinations the new policy denies
// are aborted.
func (g *Guard) Update(p Policy) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.setLocked(slices.Clone(p.Allow))
}

func (g *Guard) setLocked(rules []Rule) error {
	if g.err != nil {
		return fmt.Errorf("%w: %w", ErrNotActive, g.err)
	}
	c, err := compile(rules)
	if err != nil {
		return err
	}
	if err := g.impl.apply(c); err != nil {
		return err
	}
	g.policy = rules
	return nil
}

// Denials returns the audit stream. Every denial the kernel reports is sent on
// it; if the channel is full the record is dropped and counted in
// Stats.QueueDropped (the denial itself is still enforced). The channel is
// closed by Close. Drain it into the audit log from one goroutine.
func (g *Guard) Denials() <-chan Denial { return g.denials }

// Stats returns the counters.
func (g *Guard) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.impl == nil {
		return Stats{}
	}
	return g.impl.stats()
}

// Dropped returns the number of denials whose audit record was lost.
func (g *Guard) Dropped() uint64 { return g.Stats().Dropped }

// Cgroup returns the path of the guard's cgroup directory, or "" if the
// guard is not active.
func (g *Guard) Cgroup() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil || g.impl == nil {
		return ""
	}
	return g.impl.cgroupDir()
}

// Close removes the guard: it moves the calling process back to its original
// cgroup, kills any process still left in the guard cgroup (children the
// server forked and did not reap; letting them run on unguarded would fail
// open), detaches the programs and removes the cgroup. Nothing stays pinned.
// Close is idempotent.
func (g *Guard) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.impl == nil {
		return nil
	}
	err := g.impl.close() // stops the ring buffer reader
	g.impl = nil
	close(g.denials)
	if g.err == nil {
		g.err = errClosed
	}
	return err
}

var errClosed = fmt.Errorf("%w: closed", ErrNotActive)

// Install puts the calling process under the egress guard: it validates p,
// loads the BPF programs, creates a dedicated cgroup under the process's own
// cgroup v2, attaches the programs to it and reads the attachment back, moves
// the whole process (all threads) into it, and proves enforcement with a
// canary connect that must fail with EPERM. Processes the server forks or
// execs afterwards inherit the cgroup.
//
// Call it before the process opens any listener or connection: sockets belong
// to the cgroup they were created in, so sockets created earlier are not
// guarded (Install refuses a process holding such sockets unless
// Options.AllowPreexistingSockets is set).
//
// On failure Install undoes everything and returns an error matching one of
// ErrInvalidPolicy, ErrNoCgroup2, ErrNotPermitted, ErrLoad (ErrVerifier),
// ErrAttach, ErrNotEnforcing, ErrPreexistingSockets, ErrAlreadyInstalled or
// ErrUnsupported — unless opts.BestEffort is set, in which case it logs a
// warning and returns an inactive Guard with a nil error. An invalid policy
// (ErrInvalidPolicy) or invalid opts (ErrInvalidOptions) is always an
// error.
func Install(ctx context.Context, p Policy, opts Options) (*Guard, error) {
	rules := slices.Clone(p.Allow)
	c, err := compile(rules)
	if err != nil {
		return nil, err
	}
	if opts.AuditBufferSize < 0 || opts.DenialQueue < 0 {
		return nil, fmt.Errorf("%w: Options.AuditBufferSize and Options.DenialQueue must not be negative (zero is their default)", ErrInvalidOptions)
	}
	queue := 1024
	if opts.DenialQueue > 0 {
		queue = opts.DenialQueue
	}
	g := &Guard{policy: rules, denials: make(chan Denial, queue)}
	impl, err := install(ctx, c, &opts, g.denials)
	if err != nil {
		close(g.denials) // install stopped its reader before returning
		if opts.BestEffort {
			opts.logger().Warn("egress guard not installed; continuing unguarded (best effort)", "err", err)
			g.err = err
			return g, nil
		}
		return nil, err
	}
	g.impl = impl
	return g, nil
}
