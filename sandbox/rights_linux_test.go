package sandbox

import (
	"slices"
	"testing"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// The rights named for each ABI are the ones handled at that ABI: nothing
// newer (it would fail or deny what no rule can grant), nothing missing.
func TestConfigForABI(t *testing.T) {
	for _, c := range []struct {
		abi            int
		fs, net, scope []string
	}{
		{1, []string{"execute", "make_sym"}, nil, nil},
		{3, []string{"refer", "truncate"}, nil, nil},
		{4, []string{"truncate"}, []string{"bind_tcp", "connect_tcp"}, nil},
		{5, []string{"ioctl_dev"}, []string{"connect_tcp"}, nil},
		{7, []string{"ioctl_dev"}, []string{"bind_tcp"}, []string{"abstract_unix_socket", "signal"}},
		{11, []string{"ioctl_dev"}, []string{"bind_tcp"}, []string{"signal"}},
	} {
		r := rightsOf(c.abi, configFor(c.abi))
		for _, n := range c.fs {
			if !slices.Contains(r.FS, n) {
				t.Errorf("ABI %d: fs %v lacks %s", c.abi, r.FS, n)
			}
		}
		for _, n := range c.net {
			if !slices.Contains(r.Net, n) {
				t.Errorf("ABI %d: net %v lacks %s", c.abi, r.Net, n)
			}
		}
		for _, n := range c.scope {
			if !slices.Contains(r.Scoped, n) {
				t.Errorf("ABI %d: scoped %v lacks %s", c.abi, r.Scoped, n)
			}
		}
		if c.net == nil && len(r.Net) != 0 || c.scope == nil && len(r.Scoped) != 0 {
			t.Errorf("ABI %d: rights the ABI lacks: %v", c.abi, r)
		}
		for _, never := range []string{"resolve_unix", "bind_udp", "connect_send_udp"} {
			if slices.Contains(r.FS, never) || slices.Contains(r.Net, never) {
				t.Errorf("ABI %d handles %s, which no Policy can grant", c.abi, never)
			}
		}
	}
	if configFor(2).HandledAccessFS&ll.AccessFSTruncate != 0 {
		t.Error("ABI 2 handles truncate")
	}
}

// Read/Write/Execute map to file rights only on files (directory rights on
// a file make landlock_add_rule fail), and Write never grants device nodes.
func TestFSAccess(t *testing.T) {
	dirOnly := uint64(ll.AccessFSReadDir | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeDir |
		ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeSym | ll.AccessFSRefer)
	for _, a := range []Access{Read, Write, Execute, ReadWrite, ReadExec, Read | Write | Execute} {
		if got := uint64(fsAccess(a, false)); got&dirOnly != 0 {
			t.Errorf("%v on a file grants directory rights %#x", a, got&dirOnly)
		}
		if got := uint64(fsAccess(a, true)); got&(ll.AccessFSMakeChar|ll.AccessFSMakeBlock) != 0 {
			t.Errorf("%v grants device node creation", a)
		}
	}
	if fsAccess(Read, true)&(ll.AccessFSWriteFile|ll.AccessFSTruncate|ll.AccessFSExecute) != 0 {
		t.Error("Read grants more than reading")
	}
	if fsAccess(Write, false)&ll.AccessFSTruncate == 0 {
		t.Error("Write on a file does not grant truncate (opening with O_TRUNC would fail)")
	}
}
