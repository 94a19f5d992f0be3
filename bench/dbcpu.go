package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The database's side of a P5 call. A server child's own CPU does not show
// what its calls cost PostgreSQL: the hotel's transaction (signed scope,
// row-level security policies, the guard's predicates) runs in backend
// processes of the database, on the same cores. So for PostgreSQL the
// timed windows also sum the CPU of the backends serving the child's
// connections (issue 30: at one client, about a millisecond per call of
// the hotel's gap to the bare server was there, not in the server).

// pgBackends finds the PostgreSQL backends serving pid's TCP connections
// to the database at port dbPort: the child's sockets (/proc/PID/fd) give
// their local ports (/proc/net/tcp, tcp6), which pg_stat_activity lists
// as the backends' client_port. admin is a connection that may read every
// row of pg_stat_activity.
func pgBackends(ctx context.Context, admin *pgxpool.Pool, pid, dbPort int) ([]int, error) {
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	ports := map[int32]bool{}
	for _, f := range []string{"tcp", "tcp6"} {
		if err := tcpPorts(fmt.Sprintf("/proc/%d/net/%s", pid, f), inodes, dbPort, ports); err != nil {
			return nil, err
		}
	}
	if len(ports) == 0 {
		return nil, nil
	}
	rows, err := admin.Query(ctx, `SELECT pid, client_port FROM pg_catalog.pg_stat_activity WHERE client_port IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var bp, port int32
		if err := rows.Scan(&bp, &port); err != nil {
			return nil, err
		}
		if ports[port] {
			out = append(out, int(bp))
		}
	}
	return out, rows.Err()
}

// tcpPorts adds to ports the local ports of the sockets of path (a
// /proc/net/tcp table) whose inode is in inodes and whose remote port is
// dbPort.
func tcpPorts(path string, inodes map[string]bool, dbPort int, ports map[int32]bool) error {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || !inodes[fs[9]] {
			continue
		}
		lp, ok1 := hexPort(fs[1])
		rp, ok2 := hexPort(fs[2])
		if ok1 && ok2 && rp == dbPort {
			ports[int32(lp)] = true
		}
	}
	return sc.Err()
}

// hexPort is the port of a /proc/net/tcp address ("0100007F:1538").
func hexPort(addr string) (int, bool) {
	_, h, ok := strings.Cut(addr, ":")
	if !ok {
		return 0, false
	}
	p, err := strconv.ParseUint(h, 16, 16)
	return int(p), err == nil
}

// backendsCPU sums the CPU seconds (user+system) of the backends; false
// when one of them is gone (its connection closed: the sum would
// undercount).
func backendsCPU(pids []int) (float64, bool) {
	var sum float64
	for _, p := range pids {
		c, err := procCPU(p)
		if err != nil {
			return 0, false
		}
		sum += c
	}
	return sum, true
}
