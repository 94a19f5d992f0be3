package flow

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// SinkKind says what a sink's destination is.
type SinkKind string

// The sink kinds.
const (
	// Email: the destination is one e-mail address, "local@domain".
	Email SinkKind = "email"
	// URL: the destination is an absolute http or https URL; the policy
	// judges its scheme and host.
	URL SinkKind = "url"
)

// ErrDestination is wrapped by the error ParseDestination returns for a
// destination it cannot judge: a list of recipients, a URL with no host,
// an address with characters an e-mail header would interpret.
var ErrDestination = errors.New("flow: invalid destination")

// Destination is a parsed sink destination, in the canonical form the
// policy judges. A sink that really sends must send to this form (Address,
// or Scheme and Host), so that what was checked is what is used.
type Destination struct {
	Kind SinkKind `json:"kind"`
	// Raw is the destination as the call gave it.
	Raw string `json:"raw"`
	// Address is the lowercased e-mail address (Email), and Domain its
	// domain.
	Address string `json:"address,omitempty"`
	// Scheme ("http" or "https") and Host (lowercased, no trailing dot,
	// no port) of a URL; Host is also the domain of an Email.
	Scheme string `json:"scheme,omitempty"`
	Host   string `json:"host,omitempty"`
}

// String is the canonical form: the address, or scheme://host.
func (d Destination) String() string {
	if d.Kind == Email {
		return d.Address
	}
	return d.Scheme + "://" + d.Host
}

// ParseDestination parses raw as a destination of kind k. It refuses
// (ErrDestination) anything it could not judge exactly: several e-mail
// recipients, display names, comments or header syntax; a URL that is not
// absolute http(s), has no host, or percent-encodes its host; a host that
// is not an ASCII DNS name or IP literal.
func ParseDestination(k SinkKind, raw string) (Destination, error) {
	d := Destination{Kind: k, Raw: raw}
	switch k {
	case Email:
		a, domain, err := parseEmail(raw)
		if err != nil {
			return d, err
		}
		d.Address, d.Host = a, domain
	case URL:
		u, err := url.Parse(raw)
		if err != nil {
			return d, fmt.Errorf("%w: %q is not a URL", ErrDestination, raw)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return d, fmt.Errorf("%w: URL scheme %q (want http or https)", ErrDestination, u.Scheme)
		}
		if u.Opaque != "" || u.Host == "" {
			return d, fmt.Errorf("%w: URL %q has no host", ErrDestination, raw)
		}
		if strings.Contains(u.Host, "%") {
			return d, fmt.Errorf("%w: URL host is percent-encoded", ErrDestination)
		}
		h, err := canonicalHost(u.Hostname())
		if err != nil {
			return d, err
		}
		d.Scheme, d.Host = u.Scheme, h
	default:
		return d, fmt.Errorf("%w: unknown sink kind %q", ErrDestination, k)
	}
	return d, nil
}

func parseEmail(raw string) (addr, domain string, err error) {
	if raw == "" || len(raw) > 254 {
		return "", "", fmt.Errorf("%w: e-mail address empty or too long", ErrDestination)
	}
	for _, r := range raw {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`,;<>"()[]\:`, r) {
			return "", "", fmt.Errorf("%w: e-mail address %q holds %q: exactly one plain address is accepted", ErrDestination, raw, r)
		}
	}
	local, dom, ok := strings.Cut(raw, "@")
	if !ok || local == "" || len(local) > 64 || strings.Contains(dom, "@") {
		return "", "", fmt.Errorf("%w: %q is not one address local@domain", ErrDestination, raw)
	}
	h, err := canonicalHost(dom)
	if err != nil {
		return "", "", err
	}
	if isIP(h) {
		return "", "", fmt.Errorf("%w: e-mail domain is an IP address", ErrDestination)
	}
	return strings.ToLower(local) + "@" + h, h, nil
}

// canonicalHost lowercases h, drops one trailing dot, and checks it is an
// IP literal or an ASCII DNS name (labels of letters, digits and hyphens).
func canonicalHost(h string) (string, error) {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("%w: empty or overlong host", ErrDestination)
	}
	if strings.IndexByte(h, ':') >= 0 || strings.Trim(h, "0123456789.") == "" {
		// An IPv6 literal, or all digits and dots: an IPv4 address or
		// nothing.
		if a, err := netip.ParseAddr(h); err == nil && a.Zone() == "" {
			return a.String(), nil
		}
		return "", fmt.Errorf("%w: host %q is not an IP address or a DNS name", ErrDestination, h)
	}
	for rest := h; ; {
		label, tail, more := strings.Cut(rest, ".")
		if !validLabel(label) {
			return "", fmt.Errorf("%w: host %q is not an ASCII DNS name", ErrDestination, h)
		}
		if !more {
			break
		}
		rest = tail
	}
	return h, nil
}

func validLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// patKind is the shape of a destination pattern.
type patKind uint8

const (
	patAny        patKind = iota + 1 // "*": every destination
	patOwner                         // "$owner": the sole data subject
	patEmail                         // "email:local@domain"
	patEmailAt                       // "email:*@domain"
	patEmailAtSub                    // "email:*@*.domain": any subdomain, not domain itself
	patHost                          // "https://host"
	patHostSub                       // "https://*.domain": any subdomain, not domain itself
)

// pattern is a parsed destination pattern of the policy file.
type pattern struct {
	raw    string
	kind   patKind
	scheme string // URL patterns
	value  string // the address, domain, host or suffix (without "*.")
}

// OwnerPattern is the destination pattern that stands for the data
// subject: see the package documentation.
const OwnerPattern = "$owner"

// parsePattern parses a destination pattern:
//
//   - any destination
//     $owner                 the sole data subject of what the session holds
//     email:ann@example.com  that address
//     email:*@example.com    any address at example.com (not its subdomains)
//     email:*@*.example.com  any address at a subdomain of example.com
//     https://api.example.com     that host over https (any port and path)
//     https://*.example.com       any subdomain of example.com over https
//
// "*" is accepted only as a whole leftmost label; the domain after "*." must
// have at least two labels.
func parsePattern(s string) (pattern, error) {
	p := pattern{raw: s}
	switch {
	case s == "*":
		p.kind = patAny
		return p, nil
	case s == OwnerPattern:
		p.kind = patOwner
		return p, nil
	case strings.HasPrefix(s, "email:"):
		rest := strings.TrimPrefix(s, "email:")
		local, dom, ok := strings.Cut(rest, "@")
		if !ok || local == "" || local != "*" && strings.Contains(local, "*") {
			return p, fmt.Errorf("pattern %q: want email:local@domain, email:*@domain or email:*@*.domain", s)
		}
		sub := strings.HasPrefix(dom, "*.")
		dom = strings.TrimPrefix(dom, "*.")
		h, err := patternHost(s, dom, sub)
		if err != nil {
			return p, err
		}
		switch {
		case local == "*" && sub:
			p.kind, p.value = patEmailAtSub, h
		case local == "*":
			p.kind, p.value = patEmailAt, h
		case sub:
			return p, fmt.Errorf("pattern %q: a named local part needs an exact domain", s)
		default:
			a, _, err := parseEmail(rest)
			if err != nil {
				return p, fmt.Errorf("pattern %q: %v", s, err)
			}
			p.kind, p.value = patEmail, a
		}
		return p, nil
	case strings.HasPrefix(s, "https://"), strings.HasPrefix(s, "http://"):
		scheme, host, _ := strings.Cut(s, "://")
		if strings.ContainsAny(host, "/:?#@%") {
			return p, fmt.Errorf("pattern %q: give scheme://host only (no port, path, query or user)", s)
		}
		sub := strings.HasPrefix(host, "*.")
		h, err := patternHost(s, strings.TrimPrefix(host, "*."), sub)
		if err != nil {
			return p, err
		}
		p.scheme, p.value = scheme, h
		p.kind = patHost
		if sub {
			p.kind = patHostSub
		}
		return p, nil
	}
	return p, fmt.Errorf("pattern %q: want *, $owner, email:…, https://… or http://…", s)
}

func patternHost(pat, h string, sub bool) (string, error) {
	if strings.Contains(h, "*") {
		return "", fmt.Errorf("pattern %q: \"*\" is allowed only as the whole leftmost label (\"*.example.com\")", pat)
	}
	if h != strings.ToLower(h) || strings.HasSuffix(h, ".") {
		return "", fmt.Errorf("pattern %q: write the host in lower case without a trailing dot", pat)
	}
	c, err := canonicalHost(h)
	if err != nil {
		return "", fmt.Errorf("pattern %q: %v", pat, err)
	}
	if sub && (isIP(c) || !strings.Contains(c, ".")) {
		return "", fmt.Errorf("pattern %q: a wildcard must sit over a domain of at least two labels", pat)
	}
	return c, nil
}

// match reports whether d matches p. patOwner never matches here: the
// checker decides it from the session's data subjects.
func (p *pattern) match(d *Destination) bool {
	switch p.kind {
	case patAny:
		return true
	case patEmail:
		return d.Kind == Email && d.Address == p.value
	case patEmailAt:
		return d.Kind == Email && d.Host == p.value
	case patEmailAtSub:
		return d.Kind == Email && isSubdomain(d.Host, p.value)
	case patHost:
		return d.Kind == URL && d.Scheme == p.scheme && d.Host == p.value
	case patHostSub:
		return d.Kind == URL && d.Scheme == p.scheme && isSubdomain(d.Host, p.value)
	}
	return false
}

// isSubdomain reports whether host is a proper subdomain of domain: it
// ends in "." + domain and has at least one more label. Both are
// canonical, so "evilexample.com" and "example.com.evil.net" are not
// subdomains of "example.com", and neither is "example.com" itself.
func isSubdomain(host, domain string) bool {
	return len(host) > len(domain)+1 && strings.HasSuffix(host, domain) && host[len(host)-len(domain)-1] == '.' &&
		!isIP(host)
}

// isIP reports whether the canonical host h is an IP address.
func isIP(h string) bool {
	_, err := netip.ParseAddr(h)
	return err == nil
}
