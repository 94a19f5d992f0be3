package egress

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rule
	}{
		{"127.0.0.1:5432", Rule{netip.MustParsePrefix("127.0.0.1/32"), Port(5432)}},
		{"127.0.0.0/8", Rule{netip.MustParsePrefix("127.0.0.0/8"), AllPorts()}},
		{"127.0.0.0/8:1024-65535", Rule{netip.MustParsePrefix("127.0.0.0/8"), PortRange{1024, 65535}}},
		{"10.0.0.0/8:*", Rule{netip.MustParsePrefix("10.0.0.0/8"), AllPorts()}},
		{"::1", Rule{netip.MustParsePrefix("::1/128"), AllPorts()}},
		{"[::1]:443", Rule{netip.MustParsePrefix("::1/128"), Port(443)}},
		{"[fd00::/8]:443-444", Rule{netip.MustParsePrefix("fd00::/8"), PortRange{443, 444}}},
		{"fd00::/8", Rule{netip.MustParsePrefix("fd00::/8"), AllPorts()}},
	} {
		got, err := ParseRule(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseRule(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		// String round-trips.
		back, err := ParseRule(got.String())
		if err != nil || back != got {
			t.Errorf("ParseRule(%q.String() = %q) = %v, %v", tc.in, got.String(), back, err)
		}
	}
	for _, bad := range []string{
		"", "localhost:80", "127.0.0.1/8", "127.0.0.1:0", "127.0.0.1:80-79", "127.0.0.1:65536",
		"[::1", "[::1]x", "fe80::1%eth0", "1.2.3.4/33", "[::1]:http",
	} {
		if r, err := ParseRule(bad); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("ParseRule(%q) = %v, %v; want ErrInvalidPolicy", bad, r, err)
		}
	}
}

func TestValidate(t *testing.T) {
	for name, p := range map[string]Policy{
		"zero rule":     {Allow: []Rule{{}}},
		"zero ports":    {Allow: []Rule{{Prefix: netip.MustParsePrefix("127.0.0.1/32")}}},
		"host bits":     {Allow: []Rule{{Prefix: netip.MustParsePrefix("10.1.2.3/8"), Ports: AllPorts()}}},
		"reversed":      {Allow: []Rule{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Ports: PortRange{9, 8}}}},
		"too many runs": {Allow: manyRanges(MaxRangesPerPrefix + 1)},
	} {
		if err := p.Validate(); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: Validate = %v, want ErrInvalidPolicy", name, err)
		}
	}
	if err := (Policy{}).Validate(); err != nil {
		t.Errorf("empty policy: %v", err)
	}
	if err := (Policy{Allow: manyRanges(MaxRangesPerPrefix)}).Validate(); err != nil {
		t.Errorf("%d ranges: %v", MaxRangesPerPrefix, err)
	}
}

// manyRanges returns n disjoint single-port rules on one prefix.
func manyRanges(n int) []Rule {
	var rs []Rule
	for i := range n {
		rs = append(rs, Rule{netip.MustParsePrefix("127.0.0.1/32"), Port(uint16(1000 + 2*i))})
	}
	return rs
}

func TestMergeRanges(t *testing.T) {
	got := mergeRanges([]PortRange{{10, 20}, {21, 30}, {5, 6}, {25, 40}, {100, 100}})
	want := []PortRange{{5, 6}, {10, 40}, {100, 100}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// TestCompiledMatchesPolicy: the longest-prefix map content user space
// writes gives the same decision as "some rule allows it" — including for
// nested prefixes whose port ranges differ, which a plain LPM lookup of the
// rules would get wrong.
func TestCompiledMatchesPolicy(t *testing.T) {
	p := Policy{Allow: []Rule{
		{netip.MustParsePrefix("127.0.0.0/8"), Port(80)},
		{netip.MustParsePrefix("127.0.0.0/16"), PortRange{1000, 2000}},
		{netip.MustParsePrefix("127.0.0.1/32"), Port(443)},
		{netip.MustParsePrefix("::1/128"), Port(8443)},
		{netip.MustParsePrefix("::ffff:10.0.0.0/104"), Port(53)}, // v4-mapped: judged as 10.0.0.0/8
	}}
	c, err := compile(p.Allow)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.v4[netip.MustParsePrefix("127.0.0.1/32")]; len(got) != 3 {
		t.Errorf("127.0.0.1/32 ranges = %v, want its own plus both covering rules'", got)
	}
	if _, ok := c.v4[netip.MustParsePrefix("10.0.0.0/8")]; !ok {
		t.Errorf("v4-mapped rule not normalised to IPv4: %v", c.v4)
	}
	addrs := []string{"127.0.0.1", "127.0.5.5", "127.9.9.9", "128.0.0.1", "::1", "::2", "::ffff:127.0.0.1", "10.1.1.1", "::ffff:10.1.1.1"}
	ports := []uint16{53, 80, 443, 999, 1000, 1500, 2000, 2001, 8443}
	for _, a := range addrs {
		for _, port := range ports {
			dst := netip.AddrPortFrom(netip.MustParseAddr(a), port)
			if p.Allows(dst) != c.allows(dst) {
				t.Errorf("%v: Policy.Allows=%v, compiled=%v", dst, p.Allows(dst), c.allows(dst))
			}
		}
	}
	for _, tc := range []struct {
		dst  string
		want bool
	}{
		{"127.0.0.1:80", true}, {"127.0.0.1:1500", true}, {"127.0.0.1:443", true},
		{"127.1.0.1:1500", false}, {"127.1.0.1:80", true}, {"127.0.0.2:443", false},
		{"[::ffff:127.0.0.1]:443", true}, {"[::1]:8443", true}, {"[::1]:80", false},
		{"10.2.3.4:53", true}, {"10.2.3.4:54", false},
	} {
		if got := c.allows(netip.MustParseAddrPort(tc.dst)); got != tc.want {
			t.Errorf("allows(%s) = %v, want %v", tc.dst, got, tc.want)
		}
	}
}

func TestCompiledRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var p Policy
		for range 1 + r.IntN(6) {
			bits := 8 + r.IntN(25)
			a := netip.AddrFrom4([4]byte{127, byte(r.IntN(4)), byte(r.IntN(4)), byte(r.IntN(4))})
			lo := uint16(1 + r.IntN(100))
			p.Allow = append(p.Allow, Rule{netip.PrefixFrom(a, bits).Masked(), PortRange{lo, lo + uint16(r.IntN(20))}})
		}
		c, err := compile(p.Allow)
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, byte(r.IntN(4)), byte(r.IntN(4)), byte(r.IntN(4))}), uint16(r.IntN(130)))
			if p.Allows(dst) != c.allows(dst) {
				t.Fatalf("%v under %v: Policy.Allows=%v, compiled=%v", dst, p.Allow, p.Allows(dst), c.allows(dst))
			}
		}
		if dst, ok := c.uncovered(netip.MustParseAddr("127.0.0.1")); ok && p.Allows(dst) {
			t.Fatalf("uncovered returned allowed %v", dst)
		}
	}
}

func TestWithout(t *testing.T) {
	a, b := AllowAddrPort(netip.MustParseAddrPort("127.0.0.1:1")), AllowAddrPort(netip.MustParseAddrPort("127.0.0.1:2"))
	got, err := without([]Rule{a, b, a}, []Rule{a})
	if err != nil || len(got) != 2 || got[0] != b || got[1] != a {
		t.Errorf("without = %v, %v", got, err)
	}
	if _, err := without([]Rule{a}, []Rule{b}); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("removing an absent rule: %v, want ErrInvalidPolicy", err)
	}
}

func TestInvalidPolicyAlwaysFails(t *testing.T) {
	// Even best effort does not accept a policy it cannot express.
	_, err := Install(t.Context(), Policy{Allow: []Rule{{}}}, Options{BestEffort: true})
	if !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("Install = %v, want ErrInvalidPolicy", err)
	}
}

// TestInvalidOptionsAlwaysFail: a negative size is refused, naming the
// field, even with BestEffort, before anything is loaded or attached.
func TestInvalidOptionsAlwaysFail(t *testing.T) {
	for field, o := range map[string]Options{
		"Options.AuditBufferSize": {AuditBufferSize: -1, BestEffort: true},
		"Options.DenialQueue":     {DenialQueue: -1, BestEffort: true},
	} {
		g, err := Install(t.Context(), Policy{}, o)
		if !errors.Is(err, ErrInvalidOptions) || g != nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s negative: Install = %v, %v; want ErrInvalidOptions naming it", field, g, err)
		}
	}
}
