//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The rights this package restricts, by the ABI that introduced them. Rights
// of later ABIs (resolve_unix, ABI 9: connecting to pathname Unix sockets;
// bind_udp and connect_send_udp, ABI 10) are not handled yet: the Policy has
// no vocabulary for them, and handling them would deny what it cannot grant.
var (
	fsByABI = []struct {
		abi    int
		rights landlock.AccessFSSet
	}{
		{1, ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSReadDir |
			ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir |
			ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym},
		{2, ll.AccessFSRefer},
		{3, ll.AccessFSTruncate},
		{5, ll.AccessFSIoctlDev},
	}
	netRights    landlock.AccessNetSet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP // ABI 4
	scopedRights landlock.ScopedSet    = ll.ScopeAbstractUnixSocket | ll.ScopeSignal  // ABI 6
)

// detectABI returns the running kernel's Landlock ABI, 0 without Landlock.
// Like go-landlock, it treats ABI 6+ as 5 on kernels whose signal scoping
// still has erratum 2, so the rights reported are the rights enforced.
func detectABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	if v >= 6 {
		errata, err := ll.LandlockGetErrata()
		if err != nil || errata&0x2 == 0 {
			v = 5
		}
	}
	return v
}

// configFor returns the ruleset attributes handled at ABI abi.
func configFor(abi int) landlock.Config {
	var c landlock.Config
	for _, f := range fsByABI {
		if abi >= f.abi {
			c.HandledAccessFS |= f.rights
		}
	}
	if abi >= 4 {
		c.HandledAccessNet = netRights
	}
	if abi >= 6 {
		c.Scoped = scopedRights
	}
	if abi >= 7 {
		// Denials of programs the server execs are audited too (the kernel
		// logs only the creating program's by default).
		c = c.EnableLoggingForSubprocesses()
	}
	return c
}

// names splits a go-landlock set rendering "{a,b}" into its names.
func names(s fmt.Stringer) []string {
	str := strings.Trim(s.String(), "{}")
	if str == "" || str == "∅" {
		return nil
	}
	return strings.Split(str, ",")
}

func rightsOf(abi int, c landlock.Config) Rights {
	return Rights{ABI: abi, FS: names(c.HandledAccessFS), Net: names(c.HandledAccessNet), Scoped: names(c.Scoped)}
}

// fsAccess maps Access to the Landlock rights granted on one path.
func fsAccess(a Access, dir bool) landlock.AccessFSSet {
	var s landlock.AccessFSSet
	if a&Read != 0 {
		s |= ll.AccessFSReadFile
		if dir {
			s |= ll.AccessFSReadDir
		}
	}
	if a&Write != 0 {
		s |= ll.AccessFSWriteFile | ll.AccessFSTruncate
		if dir {
			// Never make_char/make_block: device nodes are no server's
			// business. refer lets files move between Write hierarchies;
			// the kernel refuses any move that would widen a file's rights.
			s |= ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeDir | ll.AccessFSMakeReg |
				ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeSym | ll.AccessFSRefer
		}
	}
	if a&Execute != 0 {
		s |= ll.AccessFSExecute
	}
	return s
}

// restrict enforces p with the rights of ABI abi (the kernel's, from
// detectABI).
func restrict(p Policy, abi, minABI int, bestEffort bool) (Rights, error) {
	if abi == 0 {
		return Rights{}, ErrUnsupported
	}
	var short error
	if abi < minABI {
		short = fmt.Errorf("%w: kernel has ABI %d, policy needs %d", ErrABITooOld, abi, minABI)
		if !bestEffort {
			return Rights{ABI: abi}, short
		}
	}
	cfg := configFor(abi)
	var rules []landlock.Rule
	for _, r := range p.Paths {
		for _, path := range r.Paths {
			fi, err := os.Stat(path)
			if err != nil {
				if r.Optional && os.IsNotExist(err) {
					continue
				}
				return Rights{ABI: abi}, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
			}
			set := fsAccess(r.Access, fi.IsDir()) & cfg.HandledAccessFS
			if set == 0 {
				continue
			}
			rule := landlock.PathAccess(set, path)
			if r.Optional {
				rule = rule.IgnoreIfMissing()
			}
			rules = append(rules, rule)
		}
	}
	if cfg.HandledAccessNet != 0 {
		for _, port := range p.ConnectTCP {
			rules = append(rules, landlock.ConnectTCP(port))
		}
		for _, port := range p.BindTCP {
			rules = append(rules, landlock.BindTCP(port))
		}
	}
	// Invariant: from here on, every OS thread of the process runs in the
	// domain or Restrict failed; go-landlock applies landlock_restrict_self
	// to all threads (TSYNC on ABI 8+, psx before) and sets no_new_privs.
	if err := cfg.Restrict(rules...); err != nil {
		return Rights{ABI: abi}, fmt.Errorf("%w: %w", ErrRestrict, err)
	}
	enforced := rightsOf(abi, cfg)
	if cfg.HandledAccessNet != 0 && socketFilterArch != 0 {
		if err := installSocketFilter(); err != nil {
			return enforced, fmt.Errorf("%w: %w", ErrRestrict, err)
		}
		enforced.Blocked = blockedSockets
	}
	if err := canary(p, cfg); err != nil {
		return enforced, err
	}
	return enforced, short
}

// canary proves from inside the domain that denials happen: a directory
// listing of "/" (when the policy does not grant it) and a bind to a TCP
// port the policy does not allow must fail with EACCES. Landlock's hooks run
// before the usual permission and address-in-use checks succeed, so any
// other outcome means the domain is not enforcing.
func canary(p Policy, cfg landlock.Config) error {
	if cfg.HandledAccessFS&ll.AccessFSReadDir != 0 && !p.grants("/", Read) {
		fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		if !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%w: listing / returned %v, want EACCES", ErrNotEnforcing, errOrOK(err))
		}
	}
	if cfg.HandledAccessNet&ll.AccessNetBindTCP != 0 {
		port := 65535
		for slices.Contains(p.BindTCP, uint16(port)) {
			port--
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		if err != nil {
			return fmt.Errorf("%w: canary socket: %w", ErrNotEnforcing, err)
		}
		err = unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
		unix.Close(fd)
		if !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%w: bind to denied port %d returned %v, want EACCES", ErrNotEnforcing, port, errOrOK(err))
		}
		if socketFilterArch != 0 {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_MPTCP)
			if err == nil {
				unix.Close(fd)
			}
			if !errors.Is(err, unix.EPROTONOSUPPORT) {
				return fmt.Errorf("%w: Multipath TCP socket returned %v, want EPROTONOSUPPORT", ErrNotEnforcing, errOrOK(err))
			}
		}
	}
	return nil
}

func errOrOK(err error) any {
	if err == nil {
		return "success"
	}
	return err
}
