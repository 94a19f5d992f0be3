package egress

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Kernel map bounds (they match guard.bpf.c).
const (
	// MaxPrefixes is the number of distinct prefixes per address family.
	MaxPrefixes = 4096
	// MaxRangesPerPrefix bounds the merged port ranges that apply to one
	// prefix (its own rules' ranges plus those of every rule covering it).
	MaxRangesPerPrefix = 16
)

// PortRange is an inclusive range of destination ports. The zero value
// (0-0) selects no usable port and is rejected; use AllPorts for every port.
type PortRange struct {
	First, Last uint16
}

// AllPorts returns the range 0-65535.
func AllPorts() PortRange { return PortRange{0, 65535} }

// Port returns the range holding the single port p.
func Port(p uint16) PortRange { return PortRange{p, p} }

// String formats the range as "5432", "1000-2000" or "*" for all ports.
func (r PortRange) String() string {
	switch {
	case r == AllPorts():
		return "*"
	case r.First == r.Last:
		return strconv.Itoa(int(r.First))
	default:
		return strconv.Itoa(int(r.First)) + "-" + strconv.Itoa(int(r.Last))
	}
}

func (r PortRange) contains(p uint16) bool { return r.First <= p && p <= r.Last }

// Rule allows TCP and UDP traffic (and, for all-port rules, any other IP
// protocol) to destinations in Prefix whose port lies in Ports.
type Rule struct {
	Prefix netip.Prefix
	Ports  PortRange
}

// AllowAddrPort returns the rule allowing exactly one destination.
func AllowAddrPort(ap netip.AddrPort) Rule {
	a := ap.Addr().Unmap()
	return Rule{Prefix: netip.PrefixFrom(a, a.BitLen()), Ports: Port(ap.Port())}
}

// String formats the rule in the syntax ParseRule accepts.
func (r Rule) String() string {
	if r.Prefix.Addr().Is6() {
		return "[" + r.Prefix.String() + "]:" + r.Ports.String()
	}
	return r.Prefix.String() + ":" + r.Ports.String()
}

// ParseRule parses "ADDR[/BITS][:PORTS]" where PORTS is a port, "LO-HI" or
// "*" (the default). An IPv6 address takes brackets when ports follow:
// "[::1]:8080", "[fd00::/8]:443-444". Examples: "127.0.0.1:5432",
// "10.0.0.0/8", "127.0.0.0/8:1024-65535", "::1".
func ParseRule(s string) (Rule, error) {
	bad := func(why string) (Rule, error) {
		return Rule{}, fmt.Errorf("%w: rule %q: %s", ErrInvalidPolicy, s, why)
	}
	addr, ports := s, "*"
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return bad("missing ']'")
		}
		addr = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return bad("expected ':' after ']'")
			}
			ports = rest[1:]
		}
	} else if strings.Count(s, ":") == 1 {
		i := strings.IndexByte(s, ':')
		addr, ports = s[:i], s[i+1:]
	}
	var pfx netip.Prefix
	if strings.Contains(addr, "/") {
		p, err := netip.ParsePrefix(addr)
		if err != nil {
			return bad(err.Error())
		}
		pfx = p
	} else {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return bad(err.Error())
		}
		if a.Zone() != "" {
			return bad("zones are not supported")
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	pr, err := parsePorts(ports)
	if err != nil {
		return bad(err.Error())
	}
	r := Rule{Prefix: pfx, Ports: pr}
	if _, err := r.normalize(); err != nil {
		return Rule{}, err
	}
	return r, nil
}

func parsePorts(s string) (PortRange, error) {
	if s == "*" {
		return AllPorts(), nil
	}
	lo, hi, isRange := strings.Cut(s, "-")
	first, err := strconv.ParseUint(lo, 10, 16)
	if err != nil {
		return PortRange{}, fmt.Errorf("bad port %q", lo)
	}
	last := first
	if isRange {
		if last, err = strconv.ParseUint(hi, 10, 16); err != nil {
			return PortRange{}, fmt.Errorf("bad port %q", hi)
		}
	}
	return PortRange{uint16(first), uint16(last)}, nil
}

// normalize validates r and maps an IPv4-mapped IPv6 prefix to IPv4, the way
// the kernel side judges v4-mapped destinations.
func (r Rule) normalize() (Rule, error) {
	bad := func(why string) (Rule, error) {
		return Rule{}, fmt.Errorf("%w: rule %v: %s", ErrInvalidPolicy, r, why)
	}
	if !r.Prefix.IsValid() {
		return bad("invalid prefix")
	}
	if r.Prefix.Masked() != r.Prefix {
		return bad(fmt.Sprintf("prefix has host bits set (did you mean %v or %v/%d?)",
			r.Prefix.Masked(), r.Prefix.Addr(), r.Prefix.Addr().BitLen()))
	}
	if r.Ports.First > r.Ports.Last {
		return bad("port range is reversed")
	}
	if r.Ports == (PortRange{}) {
		return bad("port range 0-0 selects no usable port (use AllPorts for every port)")
	}
	a := r.Prefix.Addr()
	if a.Is4In6() && r.Prefix.Bits() >= 96 {
		r.Prefix = netip.PrefixFrom(a.Unmap(), r.Prefix.Bits()-96)
	}
	return r, nil
}

// Policy is an allowlist of destinations. Every IPv4 and IPv6 destination not
// allowed by some rule is denied; the zero Policy denies all IP egress (inbound
// connections stay served). AF_UNIX sockets are not affected.
//
// An IPv4-mapped IPv6 destination (::ffff:a.b.c.d) is judged by the IPv4 rules,
// since that is how it leaves; "::/0" therefore does not allow IPv4.
type Policy struct {
	Allow []Rule
}

// Validate reports whether every rule is well formed and the compiled policy
// fits the kernel maps. Errors match ErrInvalidPolicy.
func (p Policy) Validate() error {
	_, err := compile(p.Allow)
	return err
}

// Allows reports whether the policy allows a TCP or UDP packet to dst. It is
// the same decision the kernel side makes.
func (p Policy) Allows(dst netip.AddrPort) bool {
	a := dst.Addr().Unmap()
	for _, r := range p.Allow {
		n, err := r.normalize()
		if err != nil {
			continue
		}
		if n.Prefix.Contains(a) && n.Ports.contains(dst.Port()) {
			return true
		}
	}
	return false
}

// compiled is the map content: for each prefix, the sorted, merged port
// ranges of every rule whose prefix contains it.
type compiled struct {
	v4, v6 map[netip.Prefix][]PortRange
}

func compile(rules []Rule) (compiled, error) {
	own := map[netip.Prefix][]PortRange{}
	for _, r := range rules {
		n, err := r.normalize()
		if err != nil {
			return compiled{}, err
		}
		own[n.Prefix] = append(own[n.Prefix], n.Ports)
	}
	c := compiled{v4: map[netip.Prefix][]PortRange{}, v6: map[netip.Prefix][]PortRange{}}
	for p := range own {
		var all []PortRange
		for q, rs := range own {
			if q.Addr().Is4() == p.Addr().Is4() && q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
				all = append(all, rs...)
			}
		}
		merged := mergeRanges(all)
		if len(merged) > MaxRangesPerPrefix {
			return compiled{}, fmt.Errorf("%w: prefix %v has %d disjoint port ranges (with those of covering prefixes); at most %d",
				ErrInvalidPolicy, p, len(merged), MaxRangesPerPrefix)
		}
		if p.Addr().Is4() {
			c.v4[p] = merged
		} else {
			c.v6[p] = merged
		}
	}
	if len(c.v4) > MaxPrefixes || len(c.v6) > MaxPrefixes {
		return compiled{}, fmt.Errorf("%w: %d IPv4 and %d IPv6 prefixes; at most %d per family",
			ErrInvalidPolicy, len(c.v4), len(c.v6), MaxPrefixes)
	}
	return c, nil
}

// mergeRanges sorts ranges and joins overlapping or adjacent ones.
func mergeRanges(rs []PortRange) []PortRange {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b PortRange) int { return int(a.First) - int(b.First) })
	var out []PortRange
	for _, r := range rs {
		if n := len(out); n > 0 && int(r.First) <= int(out[n-1].Last)+1 {
			out[n-1].Last = max(out[n-1].Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return out
}

// without returns rules minus one occurrence of each rule in drop, or an
// error naming a rule that is not present.
func without(rules, drop []Rule) ([]Rule, error) {
	out := slices.Clone(rules)
	for _, d := range drop {
		i := slices.Index(out, d)
		if i < 0 {
			return nil, fmt.Errorf("%w: rule %v is not in the policy", ErrInvalidPolicy, d)
		}
		out = slices.Delete(out, i, i+1)
	}
	return out, nil
}

// allows is the kernel's decision on compiled maps: the longest prefix
// containing the address decides.
func (c compiled) allows(dst netip.AddrPort) bool {
	a := dst.Addr().Unmap()
	m := c.v6
	if a.Is4() {
		m = c.v4
	}
	best, bits := []PortRange(nil), -1
	for p, rs := range m {
		if p.Bits() > bits && p.Contains(a) {
			best, bits = rs, p.Bits()
		}
	}
	for _, r := range best {
		if r.contains(dst.Port()) {
			return true
		}
	}
	return false
}

// uncovered finds a destination near base that the policy denies.
func (c compiled) uncovered(base netip.Addr) (netip.AddrPort, bool) {
	for i := range 256 {
		addr := base
		if base.Is4() && i >= 64 {
			addr = netip.AddrFrom4([4]byte{127, byte(rand.IntN(256)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
		}
		dst := netip.AddrPortFrom(addr, uint16(1024+rand.IntN(64511)))
		if !c.allows(dst) {
			return dst, true
		}
	}
	return netip.AddrPort{}, false
}
