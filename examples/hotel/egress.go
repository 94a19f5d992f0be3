package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/tenantmcp/tenantmcp/egress"
	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
)

// installEgress allows exactly the endpoints the server needs: its
// database (for postgres:// and mysql:// DSNs) and its JWKS URL, resolved
// now, plus the system's DNS resolvers if a host name must be resolved
// again at run time, plus anything given with -egress-allow. The embedded
// SQLite and the development issuer need no outbound connection at all.
func installEgress(ctx context.Context, cfg hotel.Options, extra []string, bestEffort bool, log *slog.Logger) (*egress.Guard, error) {
	var p egress.Policy
	needDNS := false
	add := func(hostport string) error {
		host, portStr, err := net.SplitHostPort(hostport)
		if err != nil {
			return err
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			return fmt.Errorf("port in %q: %w", hostport, err)
		}
		addrs := []string{host}
		if _, err := netip.ParseAddr(host); err != nil {
			needDNS = true
			if addrs, err = net.DefaultResolver.LookupHost(ctx, host); err != nil {
				return fmt.Errorf("resolving %s: %w", host, err)
			}
		}
		for _, a := range addrs {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				return err
			}
			p.Allow = append(p.Allow, egress.AllowAddrPort(netip.AddrPortFrom(ip.Unmap(), uint16(port))))
		}
		return nil
	}
	eps, err := endpoints(cfg.JWKSURL, cfg.DB)
	if err != nil {
		return nil, err
	}
	for _, hp := range eps {
		if err := add(hp); err != nil {
			return nil, fmt.Errorf("endpoint %s: %w", hp, err)
		}
	}
	if needDNS {
		for _, ns := range nameservers() {
			p.Allow = append(p.Allow, egress.AllowAddrPort(netip.AddrPortFrom(ns, 53)))
		}
	}
	for _, e := range extra {
		r, err := egress.ParseRule(e)
		if err != nil {
			return nil, err
		}
		p.Allow = append(p.Allow, r)
	}
	return egress.Install(ctx, p, egress.Options{BestEffort: bestEffort, Logger: log})
}

// endpoints are the host:port the server connects to: the databases of
// dsns (postgres:// and mysql://) and the JWKS URL.
func endpoints(jwksURL string, dsns ...string) ([]string, error) {
	var out []string
	for _, dsn := range dsns {
		if hp, ok := dbHostPort(dsn); ok {
			out = append(out, hp)
		}
	}
	if jwksURL != "" {
		u, err := url.Parse(jwksURL)
		if err != nil {
			return nil, fmt.Errorf("JWKS URL: %w", err)
		}
		out = append(out, urlHostPort(u, map[string]string{"https": "443", "http": "80"}[u.Scheme]))
	}
	return out, nil
}

// urlHostPort is u's host:port, with port def if u names none.
func urlHostPort(u *url.URL, def string) string {
	if u.Port() != "" {
		def = u.Port()
	}
	return net.JoinHostPort(u.Hostname(), def)
}

// dbHostPort finds host:port in a postgres:// or mysql://…@tcp(host:port)/
// DSN.
func dbHostPort(dsn string) (string, bool) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		u, err := url.Parse(dsn)
		if err != nil || u.Hostname() == "" {
			return "", false
		}
		return urlHostPort(u, "5432"), true
	case strings.HasPrefix(dsn, "mysql://"):
		if i := strings.Index(dsn, "tcp("); i >= 0 {
			if j := strings.Index(dsn[i:], ")"); j > 0 {
				hp := dsn[i+4 : i+j]
				if _, _, err := net.SplitHostPort(hp); err != nil {
					hp = net.JoinHostPort(hp, "3306")
				}
				return hp, true
			}
		}
		if u, err := url.Parse(dsn); err == nil && u.Hostname() != "" {
			return urlHostPort(u, "3306"), true
		}
	}
	return "", false
}

// nameservers reads the resolvers of /etc/resolv.conf.
func nameservers() []netip.Addr {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil {
				out = append(out, a.Unmap())
			}
		}
	}
	return out
}
