//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock's TCP rules judge bind(2) and connect(2) on sockets of protocol
// IPPROTO_TCP only. A Multipath TCP socket (IPPROTO_MPTCP, which Go's
// net.Listen uses by default) or an SCTP socket binds and connects to any
// port, and TCP Fast Open (sendto/sendmsg with MSG_FASTOPEN) connects
// without connect(2) — the tests show each reaching a denied port. Install
// therefore adds a seccomp filter, synchronised to every thread, that
// refuses to create those sockets with EPROTONOSUPPORT (the error of a
// kernel without them; Go falls back to plain TCP), refuses MSG_FASTOPEN
// sends with EOPNOTSUPP (clients fall back to connect), and refuses
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
var blockedSockets = []string{"socket:mptcp", "socket:sctp", "send:msg_fastopen", "io_uring_setup", "foreign-abi-syscalls"}

const x32SyscallBit = 0x40000000

// insn is one classic BPF instruction whose jump targets are labels ("" is
// the next instruction); label names the instruction itself.
type insn struct {
	label  string
	code   uint16
	k      uint32
	jt, jf string
}

// assemble resolves the labels into relative jumps.
func assemble(prog []insn) []unix.SockFilter {
	at := map[string]int{}
	for i, in := range prog {
		if in.label != "" {
			at[in.label] = i
		}
	}
	rel := func(i int, label string) uint8 {
		if label == "" {
			return 0
		}
		return uint8(at[label] - i - 1)
	}
	out := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		out[i] = unix.SockFilter{Code: in.code, K: in.k, Jt: rel(i, in.jt), Jf: rel(i, in.jf)}
	}
	return out
}

func socketFilter() []unix.SockFilter {
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		// struct seccomp_data: nr, arch, instruction pointer, then the
		// six arguments; little-endian, so an argument's low word first.
		offNr, offArch = 0, 4
	)
	arg := func(i uint32) uint32 { return 16 + 8*i }
	var x32 uint32
	if runtime.GOARCH == "amd64" {
		x32 = x32SyscallBit
	}
	return assemble([]insn{
		{code: ldW, k: offArch},
		{code: jeq, k: socketFilterArch, jf: "nosys"},
		{code: ldW, k: offNr},
		{code: jset, k: x32, jt: "nosys"},
		{code: jeq, k: unix.SYS_IO_URING_SETUP, jt: "nosys"},
		{code: jeq, k: unix.SYS_SOCKET, jt: "socket"},
		{code: jeq, k: unix.SYS_SENDTO, jt: "flags3"},
		{code: jeq, k: unix.SYS_SENDMMSG, jt: "flags3"},
		{code: jeq, k: unix.SYS_SENDMSG, jt: "flags2", jf: "allow"},
		// TCP Fast Open connects from a send, which Landlock's connect
		// hook never sees.
		{label: "flags3", code: ldW, k: arg(3)},
		{code: jset, k: unix.MSG_FASTOPEN, jt: "fastopen", jf: "allow"},
		{label: "flags2", code: ldW, k: arg(2)},
		{code: jset, k: unix.MSG_FASTOPEN, jt: "fastopen", jf: "allow"},
		{label: "socket", code: ldW, k: arg(0)},
		{code: jeq, k: unix.AF_INET, jt: "proto"},
		{code: jeq, k: unix.AF_INET6, jt: "proto", jf: "allow"},
		{label: "proto", code: ldW, k: arg(2)},
		{code: jeq, k: unix.IPPROTO_MPTCP, jt: "noproto"},
		{code: jeq, k: unix.IPPROTO_SCTP, jt: "noproto", jf: "allow"},
		{label: "allow", code: ret, k: unix.SECCOMP_RET_ALLOW},
		{label: "noproto", code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(unix.EPROTONOSUPPORT)},
		{label: "fastopen", code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(unix.EOPNOTSUPP)},
		{label: "nosys", code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
	})
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
