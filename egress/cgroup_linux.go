package egress

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupNamePrefix starts the name of every guard cgroup; the pid of the
// installing process follows, so leftovers of dead processes can be removed.
const cgroupNamePrefix = "tenantmcp-egress-"

// cgroupPlacement is where the guard lives: a child of the process's own
// cgroup v2 directory.
type cgroupPlacement struct {
	ownPath string // the process's cgroup v2 path, as /proc/self/cgroup shows it
	orig    string // the process's cgroup directory before Install
	dir     string // the guard cgroup directory
	created bool
	entered bool
}

// locateCgroup finds the cgroup2 mount (from /proc/self/mountinfo, so hybrid
// layouts such as /sys/fs/cgroup/unified work) and the process's directory
// under it (from the "0::" line of /proc/self/cgroup).
func locateCgroup() (*cgroupPlacement, error) {
	mountRoot, mountPoint, err := cgroup2Mount()
	if err != nil {
		return nil, err
	}
	own, err := ownCgroup2Path("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	rel, ok := strings.CutPrefix(own, mountRoot)
	if mountRoot == "/" {
		rel, ok = own, true
	}
	if !ok || strings.Contains(own, "/..") {
		return nil, fmt.Errorf("%w: process cgroup %q is outside the cgroup2 mount (root %q at %s)", ErrNoCgroup2, own, mountRoot, mountPoint)
	}
	dir := filepath.Join(mountPoint, rel)
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoCgroup2, dir, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil, fmt.Errorf("%w: %s is not a cgroup2 file system", ErrNoCgroup2, dir)
	}
	return &cgroupPlacement{ownPath: own, orig: dir}, nil
}

func cgroup2Mount() (root, mountPoint string, err error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrNoCgroup2, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 1 || g[0] != "cgroup2" {
			continue
		}
		return unescapeMountinfo(f[3]), unescapeMountinfo(f[4]), nil
	}
	return "", "", fmt.Errorf("%w: no cgroup2 mount in /proc/self/mountinfo", ErrNoCgroup2)
}

// unescapeMountinfo decodes the octal escapes (\040 for space) of mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroup2Path returns the cgroup v2 path from a /proc/<pid>/cgroup file.
func ownCgroup2Path(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoCgroup2, err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: no cgroup v2 entry (\"0::\") in %s", ErrNoCgroup2, file)
}

// create makes the guard cgroup, after removing empty guard cgroups left
// behind by processes that died without Close.
func (c *cgroupPlacement) create() error {
	removeStale(c.orig)
	var rnd [4]byte
	rand.Read(rnd[:])
	c.dir = filepath.Join(c.orig, fmt.Sprintf("%s%d-%s", cgroupNamePrefix, os.Getpid(), hex.EncodeToString(rnd[:])))
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EROFS) {
			return fmt.Errorf("%w: creating cgroup %s: %w", ErrNotPermitted, c.dir, err)
		}
		return fmt.Errorf("%w: creating cgroup %s: %w", ErrAttach, c.dir, err)
	}
	c.created = true
	return nil
}

func removeStale(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), cgroupNamePrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			os.Remove(filepath.Join(parent, e.Name())) // fails harmlessly if not empty
		}
	}
}

// enter moves the whole process (every thread) into the guard cgroup and
// checks that every thread arrived.
func (c *cgroupPlacement) enter() error {
	if err := writeProcs(c.dir, os.Getpid()); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%w: %w: moving process into %s: %w", ErrAttach, ErrNotPermitted, c.dir, err)
		}
		return fmt.Errorf("%w: moving process into %s: %w", ErrAttach, c.dir, err)
	}
	c.entered = true
	want := path.Join(c.ownPath, filepath.Base(c.dir))
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("%w: listing threads: %w", ErrAttach, err)
	}
	for _, t := range tasks {
		p, err := ownCgroup2Path("/proc/self/task/" + t.Name() + "/cgroup")
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // the thread exited
			}
			return fmt.Errorf("%w: %w", ErrAttach, err)
		}
		if p != want {
			return fmt.Errorf("%w: thread %s is in cgroup %q, not in %s", ErrAttach, t.Name(), p, c.dir)
		}
	}
	return nil
}

// leave moves the process back to its original cgroup.
func (c *cgroupPlacement) leave() error {
	if !c.entered {
		return nil
	}
	if err := writeProcs(c.orig, os.Getpid()); err != nil {
		return fmt.Errorf("egress: moving process back to %s: %w", c.orig, err)
	}
	c.entered = false
	return nil
}

// evict kills what is left in the guard cgroup: processes the server forked
// and did not reap must not outlive the guard unguarded.
func (c *cgroupPlacement) evict() error {
	if !c.created {
		return nil
	}
	if populated(c.dir) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		// cgroup.kill needs Linux 5.14; fall back to signalling each pid.
		for _, pid := range procs(c.dir) {
			unix.Kill(pid, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for populated(c.dir) != 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("egress: processes remain in %s after SIGKILL", c.dir)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// remove deletes the guard cgroup.
func (c *cgroupPlacement) remove() error {
	if !c.created {
		return nil
	}
	var err error
	for range 100 { // a killed process may take a moment to leave
		if err = os.Remove(c.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			c.created = false
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("egress: removing cgroup %s: %w", c.dir, err)
}

func writeProcs(dir string, pid int) error {
	f, err := os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(strconv.Itoa(pid))
	cerr := f.Close()
	return errors.Join(werr, cerr)
}

// populated returns 1 if the cgroup (or a descendant) holds a process, 0 if
// not, and -1 if it cannot tell.
func populated(dir string) int {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			if v == "0" {
				return 0
			}
			return 1
		}
	}
	return -1
}

func procs(dir string) []int {
	data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var out []int
	for f := range strings.FieldsSeq(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}
