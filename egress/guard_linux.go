package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/tenantmcp/tenantmcp/egress/internal/kern"
)

// installed is set while a guard holds this process.
var installed atomic.Bool

// coreObjects are the enforcing programs and the maps; sweepObjects the
// optional iterator that aborts connections (it needs bpf_sock_destroy,
// Linux 6.5+). They are loaded separately so an older kernel still enforces.
type coreObjects struct {
	Connect4 *ebpf.Program `ebpf:"guard_connect4"`
	Connect6 *ebpf.Program `ebpf:"guard_connect6"`
	Sendmsg4 *ebpf.Program `ebpf:"guard_sendmsg4"`
	Sendmsg6 *ebpf.Program `ebpf:"guard_sendmsg6"`
	Egress   *ebpf.Program `ebpf:"guard_egress"`
	Sockops  *ebpf.Program `ebpf:"guard_sockops"`

	Allow4   *ebpf.Map `ebpf:"allow4"`
	Allow6   *ebpf.Map `ebpf:"allow6"`
	Config   *ebpf.Map `ebpf:"guard_config"`
	SkTags   *ebpf.Map `ebpf:"sk_tags"`
	Counters *ebpf.Map `ebpf:"counters"`
	Events   *ebpf.Map `ebpf:"events"`
}

type sweepObjects struct {
	SweepTCP *ebpf.Program `ebpf:"guard_sweep_tcp"`
}

// Indexes into the counters map beyond the public hooks (guard.bpf.c).
const (
	hookCanary      = 6
	cntRingbufDrops = 7
	numCounters     = 8
)

// platformGuard is the Linux state of an active guard. Its methods are called
// with Guard.mu held.
type platformGuard struct {
	log     *slog.Logger
	objs    coreObjects
	sweep   *ebpf.Program
	iter    *link.Iter
	links   []link.Link
	cg      *cgroupPlacement
	reader  *ringbuf.Reader
	readerW sync.WaitGroup

	current    compiled
	generation uint32
	baseline   [numCounters]uint64
	queueDrops atomic.Uint64
	bootOffset time.Time // wall-clock time of CLOCK_MONOTONIC zero
}

// attachment pairs a program with its cgroup attach type.
type attachment struct {
	prog *ebpf.Program
	typ  ebpf.AttachType
}

func (o *coreObjects) attachments() []attachment {
	return []attachment{
		{o.Connect4, ebpf.AttachCGroupInet4Connect},
		{o.Connect6, ebpf.AttachCGroupInet6Connect},
		{o.Sendmsg4, ebpf.AttachCGroupUDP4Sendmsg},
		{o.Sendmsg6, ebpf.AttachCGroupUDP6Sendmsg},
		{o.Egress, ebpf.AttachCGroupInetEgress},
		{o.Sockops, ebpf.AttachCGroupSockOps},
	}
}

func (o *coreObjects) close() {
	for _, p := range []*ebpf.Program{o.Connect4, o.Connect6, o.Sendmsg4, o.Sendmsg6, o.Egress, o.Sockops} {
		if p != nil {
			p.Close()
		}
	}
	for _, m := range []*ebpf.Map{o.Allow4, o.Allow6, o.Config, o.SkTags, o.Counters, o.Events} {
		if m != nil {
			m.Close()
		}
	}
	*o = coreObjects{}
}

func install(ctx context.Context, c compiled, opts *Options, denials chan<- Denial) (_ *platformGuard, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !installed.CompareAndSwap(false, true) {
		return nil, ErrAlreadyInstalled
	}
	g := &platformGuard{log: opts.logger()}
	defer func() {
		if err != nil {
			g.teardown()
			installed.Store(false)
		}
	}()

	if opts == nil || !opts.AllowPreexistingSockets {
		if desc, err := preexistingSockets(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPreexistingSockets, err)
		} else if len(desc) > 0 {
			return nil, fmt.Errorf("%w: %d socket(s): %v", ErrPreexistingSockets, len(desc), desc)
		}
	}

	// Find the cgroup first: without it there is nothing to attach to.
	place, err := locateCgroup()
	if err != nil {
		return nil, err
	}

	if err := g.load(opts); err != nil {
		return nil, err
	}
	g.current = compiled{v4: map[netip.Prefix][]PortRange{}, v6: map[netip.Prefix][]PortRange{}}
	if err := g.apply(c); err != nil {
		return nil, err
	}

	// Attach to an empty cgroup, read the attachment back, and only then
	// move the process in: no socket of the process exists in the cgroup
	// without the programs.
	if err := place.create(); err != nil {
		return nil, err
	}
	g.cg = place
	if err := g.attach(); err != nil {
		return nil, err
	}
	if err := g.readBack(); err != nil {
		return nil, err
	}
	if err := g.openAudit(); err != nil {
		return nil, err
	}
	if err := place.enter(); err != nil {
		return nil, err
	}
	if err := g.canary(ctx, denials); err != nil {
		return nil, err
	}
	if opts == nil || !opts.holdAudit {
		g.forward(denials)
	}
	g.baseline, err = g.readCounters()
	if err != nil {
		return nil, fmt.Errorf("%w: reading counters: %w", ErrLoad, err)
	}
	return g, nil
}

func (g *platformGuard) load(opts *Options) error {
	if err := rlimit.RemoveMemlock(); err != nil {
		return classifyLoad(err)
	}
	spec, err := kern.LoadGuard()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrLoad, err)
	}
	size := 256 << 10
	if opts != nil && opts.AuditBufferSize > 0 {
		size = opts.AuditBufferSize
	}
	spec.Maps[kern.GuardMapEvents].MaxEntries = ringSize(size)

	if err := spec.LoadAndAssign(&g.objs, nil); err != nil {
		return classifyLoad(err)
	}
	var sw sweepObjects
	err = spec.LoadAndAssign(&sw, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		kern.GuardMapAllow4:      g.objs.Allow4,
		kern.GuardMapAllow6:      g.objs.Allow6,
		kern.GuardMapGuardConfig: g.objs.Config,
		kern.GuardMapSkTags:      g.objs.SkTags,
		kern.GuardMapCounters:    g.objs.Counters,
		kern.GuardMapEvents:      g.objs.Events,
	}})
	if err == nil {
		g.iter, err = link.AttachIter(link.IterOptions{Program: sw.SweepTCP})
		if err != nil {
			sw.SweepTCP.Close()
		}
	}
	if err != nil {
		// Enforcement does not depend on the sweep: the egress hook still
		// drops every packet of such a connection; only the syscalls on it
		// stop failing fast.
		g.log.Warn("egress guard: cannot abort established connections on policy changes (needs bpf_sock_destroy, Linux 6.5+); their packets are still dropped", "err", err)
		g.iter = nil
		return nil
	}
	g.sweep = sw.SweepTCP
	return nil
}

// ringSize rounds n up to a power of two of at least one page.
func ringSize(n int) uint32 {
	size := os.Getpagesize()
	for size < n {
		size <<= 1
	}
	return uint32(size)
}

func classifyLoad(err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w: %w: %w", ErrNotPermitted, ErrLoad, err)
	}
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return fmt.Errorf("%w: %w: %+v", ErrLoad, ErrVerifier, ve)
	}
	return fmt.Errorf("%w: %w", ErrLoad, err)
}

func (g *platformGuard) attach() error {
	for _, a := range g.objs.attachments() {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: g.cg.dir, Attach: a.typ, Program: a.prog})
		if err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
				return fmt.Errorf("%w: %w: %v to %s: %w", ErrAttach, ErrNotPermitted, a.typ, g.cg.dir, err)
			}
			return fmt.Errorf("%w: %v to %s: %w", ErrAttach, a.typ, g.cg.dir, err)
		}
		g.links = append(g.links, l)
	}
	return nil
}

// readBack asks the kernel which programs are attached to the guard cgroup
// and requires each of ours to be there.
func (g *platformGuard) readBack() error {
	dir, err := os.Open(g.cg.dir)
	if err != nil {
		return fmt.Errorf("%w: read-back: %w", ErrAttach, err)
	}
	defer dir.Close()
	for _, a := range g.objs.attachments() {
		info, err := a.prog.Info()
		if err != nil {
			return fmt.Errorf("%w: read-back: %w", ErrAttach, err)
		}
		id, ok := info.ID()
		if !ok {
			return fmt.Errorf("%w: read-back: kernel does not report program IDs", ErrAttach)
		}
		res, err := link.QueryPrograms(link.QueryOptions{Target: int(dir.Fd()), Attach: a.typ, QueryFlags: unix.BPF_F_QUERY_EFFECTIVE})
		if err != nil {
			return fmt.Errorf("%w: read-back %v: %w", ErrAttach, a.typ, err)
		}
		found := false
		for _, p := range res.Programs {
			found = found || p.ID == id
		}
		if !found {
			return fmt.Errorf("%w: read-back: program %d is not among the effective %v programs of %s", ErrAttach, id, a.typ, g.cg.dir)
		}
	}
	return nil
}

// apply makes the kernel maps hold c, key by key, then aborts outbound TCP
// connections the new policy denies. If a map update fails, the keys already
// written are restored from the previous policy (ContractWarden's snapshot and
// restore), so the guard keeps enforcing the old policy.
func (g *platformGuard) apply(c compiled) error {
	if err := syncMap(g.objs.Allow4, g.current.v4, c.v4); err != nil {
		return errors.Join(err, restoreMap(g.objs.Allow4, c.v4, g.current.v4))
	}
	if err := syncMap(g.objs.Allow6, g.current.v6, c.v6); err != nil {
		return errors.Join(err,
			restoreMap(g.objs.Allow6, c.v6, g.current.v6),
			restoreMap(g.objs.Allow4, c.v4, g.current.v4))
	}
	g.current = c
	g.generation++
	if err := g.objs.Config.Put(uint32(0), kern.GuardConfig{Generation: g.generation}); err != nil {
		g.log.Warn("egress guard: updating generation (audit de-duplication only)", "err", err)
	}
	if err := g.runSweep(); err != nil {
		// The policy is in force; the egress hook drops the packets of
		// connections the sweep could not abort.
		g.log.Warn("egress guard: aborting connections to removed destinations", "err", err)
	}
	return nil
}

// restoreMap rewrites every entry of old and deletes entries of attempted
// that old lacks.
func restoreMap(m *ebpf.Map, attempted, old map[netip.Prefix][]PortRange) error {
	var errs []error
	for p, rs := range old {
		if err := m.Put(lpmKey(p), allowVal(rs)); err != nil {
			errs = append(errs, err)
		}
	}
	for p := range attempted {
		if _, ok := old[p]; ok {
			continue
		}
		if err := m.Delete(lpmKey(p)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("egress: restoring the previous policy failed: %w", errors.Join(errs...))
	}
	return nil
}

func allowVal(rs []PortRange) *kern.GuardAllowVal {
	var val kern.GuardAllowVal
	val.Count = uint32(len(rs))
	for i, r := range rs {
		val.Ranges[i].First, val.Ranges[i].Last = r.First, r.Last
	}
	return &val
}

func syncMap(m *ebpf.Map, old, next map[netip.Prefix][]PortRange) error {
	for p, rs := range next {
		if prev, ok := old[p]; ok && equalRanges(prev, rs) {
			continue
		}
		if err := m.Put(lpmKey(p), allowVal(rs)); err != nil {
			return fmt.Errorf("egress: updating allowlist entry %v: %w", p, err)
		}
	}
	for p := range old {
		if _, ok := next[p]; ok {
			continue
		}
		if err := m.Delete(lpmKey(p)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("egress: deleting allowlist entry %v: %w", p, err)
		}
	}
	return nil
}

func equalRanges(a, b []PortRange) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func lpmKey(p netip.Prefix) any {
	if p.Addr().Is4() {
		return kern.GuardLpm4Key{Prefixlen: uint32(p.Bits()), Addr: p.Addr().As4()}
	}
	return kern.GuardLpm6Key{Prefixlen: uint32(p.Bits()), Addr: p.Addr().As16()}
}

// runSweep runs the TCP iterator once over all TCP sockets; the program
// aborts tagged outbound connections whose destination is now denied.
func (g *platformGuard) runSweep() error {
	if g.iter == nil || g.cg == nil {
		return nil
	}
	r, err := g.iter.Open()
	if err != nil {
		return fmt.Errorf("egress: sweeping connections: %w", err)
	}
	defer r.Close()
	if _, err := io.Copy(io.Discard, r); err != nil {
		return fmt.Errorf("egress: sweeping connections: %w", err)
	}
	return nil
}

func (g *platformGuard) readCounters() ([numCounters]uint64, error) {
	var out [numCounters]uint64
	for i := range uint32(numCounters) {
		var perCPU []uint64
		if err := g.objs.Counters.Lookup(i, &perCPU); err != nil {
			return out, err
		}
		for _, v := range perCPU {
			out[i] += v
		}
	}
	return out, nil
}

func (g *platformGuard) stats() Stats {
	now, err := g.readCounters()
	if err != nil {
		g.log.Warn("egress guard: reading counters", "err", err)
	}
	var s Stats
	for h := range numHooks {
		s.Denied[h] = now[h] - g.baseline[h]
	}
	s.KernelDropped = now[cntRingbufDrops] - g.baseline[cntRingbufDrops]
	s.QueueDropped = g.queueDrops.Load()
	s.Dropped = s.KernelDropped + s.QueueDropped
	return s
}

func (g *platformGuard) cgroupDir() string { return g.cg.dir }

func (g *platformGuard) close() error {
	err := g.teardown()
	installed.Store(false)
	return err
}

// teardown undoes whatever install did, in reverse: leave the cgroup, empty
// it, detach, remove it, stop the reader, free the objects.
func (g *platformGuard) teardown() error {
	var errs []error
	if g.cg != nil {
		errs = append(errs, g.cg.leave())
		errs = append(errs, g.cg.evict())
	}
	for _, l := range g.links {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("egress: detaching: %w", err))
		}
	}
	g.links = nil
	if g.cg != nil {
		errs = append(errs, g.cg.remove())
		g.cg = nil
	}
	if g.iter != nil {
		g.iter.Close()
		g.iter = nil
	}
	if g.sweep != nil {
		g.sweep.Close()
		g.sweep = nil
	}
	if g.reader != nil {
		g.reader.Close()
		g.readerW.Wait()
		g.reader = nil
	}
	g.objs.close()
	return errors.Join(errs...)
}
