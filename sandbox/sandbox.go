package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
)

// DefaultMinABI is the Landlock ABI Install requires unless Options.MinABI
// says otherwise: ABI 4 is the first that restricts TCP bind and connect,
// and it includes truncation (ABI 3) and cross-directory rename and link
// control (ABI 2). Below it the network half of a Policy would silently
// not apply.
const DefaultMinABI = 4

// Options tune Install, which takes them by value. The zero Options means:
// fail closed, require DefaultMinABI, log to slog.Default; the zero value
// of each field is its default.
type Options struct {
	// BestEffort makes Install log a warning and return a Sandbox with a
	// nil error when the sandbox cannot be installed as asked: with no
	// Landlock the Sandbox is inactive; with an ABI below MinABI the rights
	// the kernel has are enforced and Sandbox.Err says what is missing.
	// An invalid policy is always an error. Leave it false for a server
	// that must not run unconfined.
	BestEffort bool

	// MinABI is the lowest Landlock ABI accepted; zero means
	// DefaultMinABI, negative is refused (ErrInvalidOptions). Set 1 to
	// accept a filesystem-only sandbox.
	MinABI int

	// Logger receives the start-up line (ABI and enforced rights) and
	// warnings. Nil means slog.Default().
	Logger *slog.Logger

	// kernelABI (tests only) makes Install act as on a kernel with this
	// Landlock ABI, at most the real one; -1 means no Landlock.
	kernelABI int
}

func (o *Options) logger() *slog.Logger {
	if o != nil && o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

func (o *Options) minABI() int {
	if o != nil && o.MinABI > 0 {
		return o.MinABI
	}
	return DefaultMinABI
}

// Rights are the access rights a Landlock domain restricts, by the kernel's
// names (LANDLOCK_ACCESS_FS_READ_FILE is "read_file" and so on). A right
// listed here is denied everywhere the Policy does not grant it; a right
// not listed is not restricted at all.
type Rights struct {
	// ABI is the kernel's Landlock ABI version (0: no Landlock).
	ABI int
	// FS are the restricted filesystem rights.
	FS []string
	// Net are the restricted network rights ("bind_tcp", "connect_tcp").
	Net []string
	// Scoped are the IPC scopes ("abstract_unix_socket", "signal"): the
	// process cannot connect to abstract Unix sockets of, or send signals
	// to, processes outside its domain.
	Scoped []string
	// Blocked are the socket kinds and system calls a seccomp filter
	// refuses because they would bypass the TCP rules (see the package
	// documentation); empty when the network is not restricted or the
	// architecture has no filter.
	Blocked []string
}

// String formats the rights on one line.
func (r Rights) String() string {
	list := func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, ",")
	}
	return fmt.Sprintf("Landlock ABI %d; fs: %s; net: %s; scoped: %s; blocked: %s", r.ABI, list(r.FS), list(r.Net), list(r.Scoped), list(r.Blocked))
}

// LogValue renders the rights for log/slog.
func (r Rights) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("abi", r.ABI),
		slog.Any("fs", r.FS), slog.Any("net", r.Net), slog.Any("scoped", r.Scoped), slog.Any("blocked", r.Blocked),
	)
}

// Sandbox is the result of Install. Landlock cannot be lifted, so a Sandbox
// has no Close: the restriction lasts for the life of the process and of
// every process it forks or execs.
type Sandbox struct {
	policy   Policy
	enforced Rights
	active   bool
	err      error
}

// Active reports whether a Landlock domain restricts the process.
func (s *Sandbox) Active() bool { return s.active }

// Err returns nil when everything Install was asked for is enforced, and
// otherwise why not (only with Options.BestEffort).
func (s *Sandbox) Err() error { return s.err }

// Enforced returns the ABI and the rights restricted; all empty when the
// sandbox is not active.
func (s *Sandbox) Enforced() Rights { return s.enforced }

// Policy returns the policy in force, without Optional paths that did not
// exist.
func (s *Sandbox) Policy() Policy { return s.policy }

var installed atomic.Bool

// Install restricts the calling process, all its threads, and every process
// it forks or execs afterwards, to p, with Linux Landlock. It validates p,
// detects the kernel's Landlock ABI, builds a ruleset restricting every
// right that ABI and this package handle (see Rights), enforces it on all
// OS threads, adds a seccomp filter against the sockets that would bypass
// the TCP rules (see the package documentation), and proves it from inside
// with canaries: listing "/" (unless p grants Read on "/") and binding a TCP
// port p does not allow (ABI 4+) must fail with EACCES, and creating a
// Multipath TCP socket with EPROTONOSUPPORT.
//
// Call it first thing, before any file, pool, listener or client exists:
// Landlock checks accesses when a file is opened or a socket is bound or
// connected, so descriptors opened earlier keep what they had.
//
// On failure Install returns an error matching ErrInvalidPolicy,
// ErrUnsupported, ErrABITooOld, ErrRestrict, ErrNotEnforcing or
// ErrAlreadyInstalled — unless opts.BestEffort is set, in which case it logs
// a warning and returns a Sandbox (see Options.BestEffort). An invalid
// policy (ErrInvalidPolicy) or invalid opts (ErrInvalidOptions) is always
// an error.
func Install(ctx context.Context, p Policy, opts Options) (*Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := p.validate()
	if err != nil {
		return nil, err
	}
	if opts.MinABI < 0 {
		return nil, fmt.Errorf("%w: Options.MinABI must not be negative (zero is DefaultMinABI)", ErrInvalidOptions)
	}
	if !installed.CompareAndSwap(false, true) {
		return nil, ErrAlreadyInstalled
	}
	s := &Sandbox{policy: p}
	log := opts.logger()
	abi := detectABI()
	if opts.kernelABI != 0 {
		abi = min(abi, max(opts.kernelABI, 0))
	}
	enforced, err := restrict(p, abi, opts.minABI(), opts.BestEffort)
	if enforced.ABI > 0 && (len(enforced.FS) > 0 || len(enforced.Net) > 0 || len(enforced.Scoped) > 0) {
		s.active, s.enforced = true, enforced
	} else {
		installed.Store(false) // nothing was restricted; a later Install may try again
	}
	// Fail closed: without BestEffort a Sandbox is returned only when every
	// right the policy asked for is enforced and the canaries were denied.
	if err != nil {
		if !opts.BestEffort {
			return nil, err
		}
		log.Warn("sandbox: not installed as asked; continuing (best effort)", "err", err, "enforced", s.enforced)
		s.err = err
		return s, nil
	}
	log.Info("sandbox: Landlock domain enforced", "enforced", enforced)
	return s, nil
}
