package main

import (
	"os"
	"path/filepath"
	"testing"
)

// tcpPorts must pick exactly the child's sockets (by inode) that talk to
// the database's port, and report their local ports: a wrong match would
// add another process's backend to the database CPU per call.
func TestTCPPortsPicksTheChildsDatabaseSockets(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:8CA0 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 20 4 30 10 -1
   1: 0100007F:8CA1 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:8CA2 0100007F:0CEA 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:1538 0100007F:8CA0 01 00000000:00000000 00:00000000 00000000     0        0 444 1 0000000000000000 20 4 30 10 -1
`
	path := filepath.Join(t.TempDir(), "tcp")
	if err := os.WriteFile(path, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	// 111 and 333 are the child's; 222 talks to the database but is
	// another process's; 333 talks to port 3306; 444 is the server side.
	ports := map[int32]bool{}
	if err := tcpPorts(path, map[string]bool{"111": true, "333": true}, 5432, ports); err != nil {
		t.Fatal(err)
	}
	if len(ports) != 1 || !ports[0x8CA0] {
		t.Fatalf("ports = %v, want only %d", ports, 0x8CA0)
	}
	// A missing table (no IPv6) is no error.
	if err := tcpPorts(filepath.Join(t.TempDir(), "tcp6"), nil, 5432, ports); err != nil {
		t.Fatal(err)
	}
	if _, ok := hexPort("0100007F"); ok {
		t.Fatal("hexPort accepted an address without a port")
	}
}
