package sandbox

import (
	"errors"
	"fmt"
)

// Errors returned by Install. Each names one reason the sandbox could not be
// put in place as asked; match them with errors.Is. Install wraps the
// underlying system error as well, so errors.Is(err, syscall.EACCES) keeps
// working where it applies.
var (
	// ErrUnsupported: the kernel has no Landlock (not Linux, Landlock not
	// compiled in, or not in the boot-time LSM list). It also matches
	// errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("sandbox: Landlock is not available: %w", errors.ErrUnsupported)

	// ErrABITooOld: the kernel's Landlock ABI is below Options.MinABI, so
	// part of the policy (for example the TCP port rules, ABI 4) could not be
	// enforced.
	ErrABITooOld = errors.New("sandbox: kernel Landlock ABI too old for the policy")

	// ErrInvalidPolicy: a path rule is malformed (relative or unclean path,
	// no access, unknown access bits), a required path does not exist, or a
	// port is out of range. Nothing was changed, and BestEffort does not
	// turn this error into a warning.
	ErrInvalidPolicy = errors.New("sandbox: invalid policy")

	// ErrInvalidOptions: a field of Options is out of range (a negative
	// MinABI). Nothing was changed.
	ErrInvalidOptions = errors.New("sandbox: invalid options")

	// ErrRestrict: building or enforcing the Landlock ruleset failed
	// (landlock_create_ruleset, landlock_add_rule or landlock_restrict_self).
	ErrRestrict = errors.New("sandbox: enforcing the Landlock ruleset failed")

	// ErrNotEnforcing: the ruleset was enforced but the canary showed that a
	// denied access still succeeds. The process may be partly restricted;
	// it must not serve.
	ErrNotEnforcing = errors.New("sandbox: Landlock ruleset enforced but not denying")

	// ErrAlreadyInstalled: Install already ran in this process. Landlock
	// domains only ever narrow and cannot be removed, so a second policy
	// could not widen the first.
	ErrAlreadyInstalled = errors.New("sandbox: already installed in this process")
)
