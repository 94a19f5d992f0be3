package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Access is a set of rights on a file hierarchy.
type Access uint8

// The rights a PathRule grants beneath its path. Landlock rules apply to the
// whole hierarchy below a directory; on a regular file only the file rights
// (read, write and truncate, execute) apply.
const (
	// Read: open files for reading, list directories.
	Read Access = 1 << iota
	// Write: open files for writing, truncate them, create, remove and
	// rename files, directories, symbolic links, FIFOs and sockets, and
	// move or link files to other hierarchies that grant Write (the
	// kernel refuses a move or link that would give a file more rights
	// than it had). Creating device nodes is never granted.
	Write
	// Execute: execve(2) files.
	Execute

	// ReadWrite is Read|Write, ReadExec is Read|Execute.
	ReadWrite = Read | Write
	ReadExec  = Read | Execute

	allAccess = Read | Write | Execute
)

// String formats the set as "r", "rw", "rx", "rwx".
func (a Access) String() string {
	var b strings.Builder
	for i, c := range "rwx" {
		if a&(1<<i) != 0 {
			b.WriteRune(c)
		}
	}
	if a&^allAccess != 0 {
		fmt.Fprintf(&b, "+%#x", uint8(a&^allAccess))
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

// PathRule grants Access beneath each of Paths.
type PathRule struct {
	// Paths are absolute, clean paths of existing files or directories.
	// Symbolic links are followed when the rule is installed: the rule
	// applies to the hierarchy the link points to.
	Paths []string
	// Access is the set of rights granted; it must not be empty.
	Access Access
	// Optional skips paths that do not exist, instead of failing with
	// ErrInvalidPolicy (for files whose location differs between
	// distributions, such as TLS roots).
	Optional bool
}

// ReadOnly grants Read beneath paths.
func ReadOnly(paths ...string) PathRule { return PathRule{Paths: paths, Access: Read} }

// ReadWriteDirs grants Read and Write beneath paths.
func ReadWriteDirs(paths ...string) PathRule { return PathRule{Paths: paths, Access: ReadWrite} }

// Executables grants Read and Execute beneath paths.
func Executables(paths ...string) PathRule { return PathRule{Paths: paths, Access: ReadExec} }

// Policy is what the sandboxed process (and every process it forks or
// execs) may still do. Everything not granted is denied, within the rights
// the running kernel's Landlock ABI can restrict (see Sandbox.Enforced).
type Policy struct {
	// Paths are the file hierarchies the process may use. With no rules
	// the process can open no file at all (already open descriptors keep
	// working).
	Paths []PathRule

	// ConnectTCP are the destination ports the process may connect(2) to
	// over TCP, on any address (Landlock judges ports, not addresses).
	ConnectTCP []uint16

	// BindTCP are the local ports the process may bind(2) a TCP socket to:
	// its listen port. Port 0 allows binding an ephemeral port (listening
	// on ":0"); it does not allow binding any other fixed port.
	BindTCP []uint16
}

// validate checks p without touching the system beyond stat(2) of the
// paths, and returns the rules with Optional missing paths dropped.
func (p Policy) validate() (Policy, error) {
	bad := func(format string, args ...any) (Policy, error) {
		return Policy{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidPolicy}, args...)...)
	}
	out := Policy{ConnectTCP: slices.Clone(p.ConnectTCP), BindTCP: slices.Clone(p.BindTCP)}
	for _, port := range p.ConnectTCP {
		if port == 0 {
			return bad("ConnectTCP port 0 names no destination")
		}
	}
	for i, r := range p.Paths {
		if r.Access == 0 || r.Access&^allAccess != 0 {
			return bad("path rule %d: access %v: want a non-empty combination of Read, Write, Execute", i, r.Access)
		}
		if len(r.Paths) == 0 {
			return bad("path rule %d: no paths", i)
		}
		kept := PathRule{Access: r.Access, Optional: r.Optional}
		for _, path := range r.Paths {
			if !filepath.IsAbs(path) || filepath.Clean(path) != path {
				return bad("path rule %d: %q is not an absolute, clean path", i, path)
			}
			if _, err := os.Stat(path); err != nil {
				if r.Optional && os.IsNotExist(err) {
					continue
				}
				return bad("path rule %d: %w", i, err)
			}
			kept.Paths = append(kept.Paths, path)
		}
		if len(kept.Paths) > 0 {
			out.Paths = append(out.Paths, kept)
		}
	}
	return out, nil
}

// grants reports whether some rule grants all of a on exactly path or on a
// directory above it.
func (p Policy) grants(path string, a Access) bool {
	for _, r := range p.Paths {
		if r.Access&a != a {
			continue
		}
		for _, q := range r.Paths {
			if q == path || q == "/" || strings.HasPrefix(path, q+"/") {
				return true
			}
		}
	}
	return false
}
