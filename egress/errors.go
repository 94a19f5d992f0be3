package egress

import (
	"errors"
	"fmt"
)

// Errors returned by Install and by a Guard. Each names one reason the guard
// could not be put in place or changed; match them with errors.Is. Install
// wraps the underlying system error as well, so errors.Is(err, syscall.EPERM)
// keeps working where it applies.
var (
	// ErrUnsupported: the platform has no cgroup eBPF socket hooks (any OS
	// but Linux). It also matches errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("egress: guard needs Linux with cgroup v2 and eBPF: %w", errors.ErrUnsupported)

	// ErrInvalidPolicy: a rule is malformed (invalid or non-canonical prefix,
	// empty or reversed port range), or the policy exceeds the kernel maps'
	// bounds, or Remove named a rule the policy does not hold. Nothing was
	// changed.
	ErrInvalidPolicy = errors.New("egress: invalid policy")

	// ErrInvalidOptions: a field of Options is out of range (a negative
	// size). Nothing was changed.
	ErrInvalidOptions = errors.New("egress: invalid options")

	// ErrNoCgroup2: no cgroup v2 hierarchy is mounted, or the process's
	// cgroup v2 path cannot be resolved under it.
	ErrNoCgroup2 = errors.New("egress: no usable cgroup v2 hierarchy")

	// ErrNotPermitted: the kernel refused for lack of privilege (loading BPF
	// programs, creating the cgroup, or moving the process). Install needs
	// root, or CAP_BPF, CAP_NET_ADMIN and write access to the process's
	// cgroup.
	ErrNotPermitted = errors.New("egress: not permitted")

	// ErrLoad: the BPF objects could not be loaded into the kernel.
	ErrLoad = errors.New("egress: loading BPF programs failed")

	// ErrVerifier: the kernel's verifier rejected a program. Errors that
	// match ErrVerifier also match ErrLoad; the verifier log is in the
	// message.
	ErrVerifier = errors.New("egress: BPF verifier rejected a program")

	// ErrAttach: attaching a program to the guard cgroup, reading the
	// attachment back, or moving the process into the cgroup failed.
	ErrAttach = errors.New("egress: attaching the guard failed")

	// ErrNotEnforcing: the guard was attached but the enforcement canary
	// showed it does not deny (a denied connect did not fail with EPERM, or
	// the audit event of the denial never arrived).
	ErrNotEnforcing = errors.New("egress: guard attached but not enforcing")

	// ErrPreexistingSockets: the process already holds IP sockets other than
	// TCP listeners. Sockets belong to the cgroup they were created in, so
	// these would escape the guard; install it before opening connections,
	// or set Options.AllowPreexistingSockets.
	ErrPreexistingSockets = errors.New("egress: process holds IP sockets created before the guard")

	// ErrAlreadyInstalled: a guard is already installed in this process.
	ErrAlreadyInstalled = errors.New("egress: a guard is already installed in this process")

	// ErrNotActive: the method needs an active guard, and this one is not
	// (best-effort installation failed, or the guard was closed). The reason
	// is wrapped as well.
	ErrNotActive = errors.New("egress: guard is not active")
)
