package egress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/tenantmcp/tenantmcp/egress/internal/kern"
)

// openAudit opens the ring buffer reader. Install reads it synchronously to
// collect the canary's events, then hands it to forward.
func (g *platformGuard) openAudit() error {
	r, err := ringbuf.NewReader(g.objs.Events)
	if err != nil {
		return fmt.Errorf("%w: opening the audit ring buffer: %w", ErrLoad, err)
	}
	g.reader = r
	var mono unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	g.bootOffset = time.Now().Add(-time.Duration(mono.Nano()))
	return nil
}

// readEvent returns the next audit record; the reader's deadline applies.
func (g *platformGuard) readEvent(rec *ringbuf.Record) (kern.GuardEvent, error) {
	var ev kern.GuardEvent
	if err := g.reader.ReadInto(rec); err != nil {
		return ev, err
	}
	if err := binary.Read(bytes.NewReader(rec.RawSample), binary.NativeEndian, &ev); err != nil {
		return ev, fmt.Errorf("short audit record: %w", err)
	}
	return ev, nil
}

// forward drains the ring buffer into denials until the reader is closed. A
// full channel drops the record (counted); the kernel already enforced the
// denial.
func (g *platformGuard) forward(denials chan<- Denial) {
	g.readerW.Add(1)
	go func() {
		defer g.readerW.Done()
		var rec ringbuf.Record
		for {
			ev, err := g.readEvent(&rec)
			if errors.Is(err, ringbuf.ErrClosed) {
				return
			}
			if err != nil {
				g.log.Warn("egress guard: reading audit ring buffer", "err", err)
				continue
			}
			g.deliver(denials, decodeEvent(&ev, g.bootOffset))
		}
	}()
}

func (g *platformGuard) deliver(denials chan<- Denial, d Denial) {
	select {
	case denials <- d:
	default:
		g.queueDrops.Add(1)
	}
}

func decodeEvent(ev *kern.GuardEvent, bootOffset time.Time) Denial {
	var addr netip.Addr
	if ev.Family == unix.AF_INET {
		addr = netip.AddrFrom4([4]byte(ev.Addr[:4]))
	} else {
		addr = netip.AddrFrom16(ev.Addr).Unmap()
	}
	var comm strings.Builder
	for _, c := range ev.Comm {
		if c == 0 {
			break
		}
		comm.WriteByte(byte(c))
	}
	network := "ip:" + strconv.Itoa(int(ev.Protocol))
	switch ev.Protocol {
	case unix.IPPROTO_TCP:
		network = "tcp"
	case unix.IPPROTO_UDP:
		network = "udp"
	}
	return Denial{
		Time:    bootOffset.Add(time.Duration(ev.KtimeNs)),
		PID:     int(ev.Pid),
		Comm:    comm.String(),
		Hook:    Hook(ev.Hook),
		Network: network,
		Dest:    netip.AddrPortFrom(addr, ev.Port),
	}
}
