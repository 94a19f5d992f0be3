//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock's TCP rules apply to sockets of protocol IPPROTO_TCP only: a
// Multipath TCP socket (IPPROTO_MPTCP, which Go's net.Listen uses by
// default) or an SCTP socket binds and connects to any port, as the tests
// show. Install therefore adds a seccomp filter, synchronised to every
// thread, that refuses to create those sockets with EPROTONOSUPPORT (the
// error of a kernel without them; Go falls back to plain TCP) and refuses
// io_uring_setup, whose socket operations seccomp cannot see. It also
// refuses system calls of a foreign ABI (i386 or x32 on amd64), which the
// filter cannot judge by number; no Go program makes them.

// socketFilterArch is the audit architecture of the filter, 0 where the
// filter is not available.
var socketFilterArch = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64,
	"arm64": unix.AUDIT_ARCH_AARCH64,
}[runtime.GOARCH]

// blockedSockets names what the filter refuses, as Rights.Blocked lists it.
var blockedSockets = []string{"socket:mptcp", "socket:sctp", "io_uring_setup", "foreign-abi-syscalls"}

const x32SyscallBit = 0x40000000

func socketFilter() []unix.SockFilter {
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		// struct seccomp_data offsets (little-endian: low word first)
		offNr, offArch, offArg0, offArg2 = 0, 4, 16, 32
	)
	var x32 uint32
	if runtime.GOARCH == "amd64" {
		x32 = x32SyscallBit
	}
	const allow, proto, nosys = 12, 13, 14 // indexes of the return instructions
	prog := []unix.SockFilter{
		/* 0 */ {Code: ldW, K: offArch},
		/* 1 */ {Code: jeq, K: socketFilterArch, Jt: 0, Jf: nosys - 2},
		/* 2 */ {Code: ldW, K: offNr},
		/* 3 */ {Code: jset, K: x32, Jt: nosys - 4, Jf: 0},
		/* 4 */ {Code: jeq, K: unix.SYS_IO_URING_SETUP, Jt: nosys - 5, Jf: 0},
		/* 5 */ {Code: jeq, K: unix.SYS_SOCKET, Jt: 0, Jf: allow - 6},
		/* 6 */ {Code: ldW, K: offArg0},
		/* 7 */ {Code: jeq, K: unix.AF_INET, Jt: 1, Jf: 0},
		/* 8 */ {Code: jeq, K: unix.AF_INET6, Jt: 0, Jf: allow - 9},
		/* 9 */ {Code: ldW, K: offArg2},
		/* 10 */ {Code: jeq, K: unix.IPPROTO_MPTCP, Jt: proto - 11, Jf: 0},
		/* 11 */ {Code: jeq, K: unix.IPPROTO_SCTP, Jt: proto - 12, Jf: allow - 12},
		/* 12 */ {Code: ret, K: unix.SECCOMP_RET_ALLOW},
		/* 13 */ {Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPROTONOSUPPORT)},
		/* 14 */ {Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
	}
	return prog
}

// installSocketFilter loads the filter on all threads. It needs
// no_new_privs, which the Landlock enforcement has set on every thread.
func installSocketFilter() error {
	if socketFilterArch == 0 {
		return nil
	}
	prog := socketFilter()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	if r != 0 {
		return fmt.Errorf("seccomp: thread %d could not be synchronised", r)
	}
	return nil
}
