package egress

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// preexistingSockets lists the IP sockets this process holds that are not TCP
// listeners. They were created outside the guard cgroup and would escape it.
func preexistingSockets() ([]string, error) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err != nil {
			continue // closed meanwhile
		}
		if ino, ok := strings.CutPrefix(target, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	if len(inodes) == 0 {
		return nil, nil
	}
	var found []string
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6", "udplite", "udplite6", "raw", "raw6"} {
		data, err := os.ReadFile("/proc/self/net/" + table)
		if err != nil {
			continue // protocol not built in
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			f := strings.Fields(sc.Text())
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			const tcpListen = "0A"
			if strings.HasPrefix(table, "tcp") && f[3] == tcpListen {
				continue
			}
			found = append(found, fmt.Sprintf("%s inode %s remote %s", table, f[9], f[2]))
		}
	}
	return found, nil
}
