package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The files a Go server reads lazily, after start-up, wherever they exist.
var (
	// tlsRoots are where crypto/x509 looks for system roots on Linux, and
	// where the certificate links of /etc/ssl/certs point (Landlock judges
	// the file a link resolves to).
	tlsRoots = []string{
		"/etc/ssl/certs", "/etc/ssl/cert.pem", "/etc/ssl/ca-bundle.pem",
		"/etc/pki/tls/certs", "/etc/pki/tls/cacert.pem", "/etc/pki/ca-trust/extracted",
		"/usr/share/ca-certificates", "/usr/local/share/ca-certificates", "/etc/ca-certificates",
	}
	// resolverFiles are what the Go resolver (and the libc one) read.
	resolverFiles = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf", "/run/systemd/resolve"}
	// timeFiles are what package time loads for time.Local and LoadLocation.
	timeFiles = []string{"/etc/localtime", "/usr/share/zoneinfo"}
)

// SystemFiles returns read-only, Optional rules for what a Go server reads
// after start-up: the TLS roots ($SSL_CERT_FILE and $SSL_CERT_DIR too), the
// resolver's configuration, time zones, and /dev/urandom; plus read-write on
// /dev/null, which os/exec gives a child's unset standard streams.
func SystemFiles() []PathRule {
	roots := append([]string(nil), tlsRoots...)
	for _, env := range []string{"SSL_CERT_FILE", "SSL_CERT_DIR"} {
		for _, p := range filepath.SplitList(os.Getenv(env)) {
			if filepath.IsAbs(p) {
				roots = append(roots, filepath.Clean(p))
			}
		}
	}
	var read []string
	read = append(read, roots...)
	read = append(read, resolverFiles...)
	read = append(read, timeFiles...)
	read = append(read, "/dev/urandom")
	return []PathRule{
		{Paths: read, Access: Read, Optional: true},
		{Paths: []string{"/dev/null"}, Access: ReadWrite, Optional: true},
	}
}

// SQLiteDir returns the rule a SQLite database at dbPath needs: read-write
// on its directory, where SQLite creates and removes the rollback journal,
// the WAL and the shared-memory file next to the database. Keep the
// database in a directory of its own: everything in it is writable.
func SQLiteDir(dbPath string) (PathRule, error) {
	abs, err := filepath.Abs(dbPath)
	if err != nil {
		return PathRule{}, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	return ReadWriteDirs(filepath.Dir(abs)), nil
}

// Self returns Read and Execute on the running binary, for a server that
// re-executes itself. A dynamically linked binary (cgo) also needs its
// loader and libraries: see LibraryDirs.
func Self() (PathRule, error) {
	exe, err := os.Executable()
	if err != nil {
		return PathRule{}, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return Executables(exe), nil
}

// LibraryDirs returns Read and Execute, Optional, on the usual shared
// library directories and the loader cache, for executing dynamically
// linked programs.
func LibraryDirs() PathRule {
	return PathRule{Paths: []string{"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/etc/ld.so.cache"}, Access: ReadExec, Optional: true}
}

// String formats the rule as "rw /a /b" ("?" marks Optional).
func (r PathRule) String() string {
	opt := ""
	if r.Optional {
		opt = "?"
	}
	return r.Access.String() + opt + " " + strings.Join(r.Paths, " ")
}
