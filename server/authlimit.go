package server

import (
	"container/list"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/time/rate"
)

// Defaults of FailedTokenLimit (fields left zero).
const (
	// DefaultFailedTokenBurst is how many failed bearer tokens one client
	// address may present in a row before it is answered 429.
	DefaultFailedTokenBurst = 10
	// DefaultFailedTokenRate is how many failed attempts per second a
	// client address regains: one every ten seconds.
	DefaultFailedTokenRate = 0.1
	// DefaultFailedTokenClients bounds the client addresses remembered.
	DefaultFailedTokenClients = 10000
)

// FailedTokenLimit limits, per client address, the bearer tokens that fail
// verification on the HTTP endpoint (HTTPOptions.FailedTokens). Each failed
// token (any refusal that is the token's fault: bad signature, unknown key,
// expired, wrong audience, too long a lifetime...) takes one from the
// address's token bucket; while the bucket is empty, every request of that
// address that carries an Authorization header is answered 429 with
// Retry-After before its token is even looked at, valid or not. A request
// without a token is never counted (clients probe that way to discover the
// authorization server). This bounds what one address can make the server
// spend on tokens it must refuse: signature checks, JWKS fetches for unknown
// key ids, audit lines. ON by default.
//
// The address is the connection's peer (IPv4 address, or the /64 of an IPv6
// address, which one host usually holds whole). Behind a reverse proxy
// every client would share the proxy's address: set ClientIPHeader (such as
// "X-Forwarded-For") and TrustedProxies, and the header is used, but only
// for connections from a trusted proxy; the address taken is the right-most
// one in the header that is not itself a trusted proxy (the one the
// nearest trusted proxy saw). A header from any other peer is ignored, so a
// client cannot pick its own address.
type FailedTokenLimit struct {
	// Rate is the failed attempts per second an address regains; zero
	// means DefaultFailedTokenRate; negative disables the limit.
	Rate float64
	// Burst is the failed attempts an address may make in a row; zero
	// means DefaultFailedTokenBurst.
	Burst int
	// MaxClients bounds the addresses remembered, least recently failed
	// forgotten first; zero means DefaultFailedTokenClients. (An address
	// forgotten starts again with a full bucket: an attacker with many
	// addresses has many buckets anyway.)
	MaxClients int
	// ClientIPHeader names a header carrying the client address set by a
	// trusted reverse proxy ("X-Forwarded-For", "X-Real-IP"); used only
	// with TrustedProxies.
	ClientIPHeader string
	// TrustedProxies are the addresses or CIDR prefixes of the reverse
	// proxies whose ClientIPHeader is believed.
	TrustedProxies []string
}

// failedTokens is the limiter of FailedTokenLimit.
type failedTokens struct {
	rate    rate.Limit
	burst   int
	max     int
	header  string
	proxies []netip.Prefix
	now     func() time.Time

	mu  sync.Mutex
	lru list.List // of *failEntry, most recently failed first
	m   map[netip.Prefix]*list.Element
}

type failEntry struct {
	key netip.Prefix
	lim *rate.Limiter
}

// newFailedTokens validates l; nil when the limit is disabled.
func newFailedTokens(l FailedTokenLimit, now func() time.Time) (*failedTokens, error) {
	if l.Rate < 0 {
		return nil, nil
	}
	if l.Burst < 0 || l.MaxClients < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) {
		return nil, fmt.Errorf("%w: FailedTokens: Burst and MaxClients must not be negative, Rate must be a number", ErrConfig)
	}
	ft := &failedTokens{rate: rate.Limit(l.Rate), burst: l.Burst, max: l.MaxClients, header: http.CanonicalHeaderKey(l.ClientIPHeader), now: now,
		m: map[netip.Prefix]*list.Element{}}
	if ft.rate == 0 {
		ft.rate = DefaultFailedTokenRate
	}
	if ft.burst == 0 {
		ft.burst = DefaultFailedTokenBurst
	}
	if ft.max == 0 {
		ft.max = DefaultFailedTokenClients
	}
	for _, p := range l.TrustedProxies {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			a, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return nil, fmt.Errorf("%w: FailedTokens.TrustedProxies entry %q is neither an address nor a CIDR prefix", ErrConfig, p)
			}
			pfx = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		ft.proxies = append(ft.proxies, pfx.Masked())
	}
	if (ft.header == "") != (len(ft.proxies) == 0) {
		return nil, fmt.Errorf("%w: FailedTokens.ClientIPHeader and TrustedProxies go together", ErrConfig)
	}
	return ft, nil
}

func (ft *failedTokens) trusted(a netip.Addr) bool {
	for _, p := range ft.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// client is the key of r's client address; ok is false when it cannot be
// told (then the request is not limited: failing open here costs only the
// limit, never access).
func (ft *failedTokens) client(r *http.Request) (netip.Prefix, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Prefix{}, false
	}
	a := ap.Addr().Unmap()
	if ft.header != "" && ft.trusted(a) {
		vals := r.Header.Values(ft.header)
		var hops []string
		for _, v := range vals {
			hops = append(hops, strings.Split(v, ",")...)
		}
		for i := len(hops) - 1; i >= 0; i-- {
			h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // a hop no proxy of ours wrote: stop at what we know
			}
			a = h.Unmap()
			if !ft.trusted(a) {
				break
			}
		}
	}
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, err := a.Prefix(bits)
	return p, err == nil
}

// blocked reports whether key's bucket is empty, and how long until it
// holds one attempt again.
func (ft *failedTokens) blocked(key netip.Prefix) (time.Duration, bool) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	el, ok := ft.m[key]
	if !ok {
		return 0, false
	}
	tokens := el.Value.(*failEntry).lim.TokensAt(ft.now())
	if tokens >= 1 {
		return 0, false
	}
	return time.Duration((1 - tokens) / float64(ft.rate) * float64(time.Second)), true
}

// fail charges one failed attempt to key.
func (ft *failedTokens) fail(key netip.Prefix) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	el, ok := ft.m[key]
	if ok {
		ft.lru.MoveToFront(el)
	} else {
		for ft.lru.Len() >= ft.max {
			old := ft.lru.Back()
			ft.lru.Remove(old)
			delete(ft.m, old.Value.(*failEntry).key)
		}
		el = ft.lru.PushFront(&failEntry{key: key, lim: rate.NewLimiter(ft.rate, ft.burst)})
		ft.m[key] = el
	}
	el.Value.(*failEntry).lim.AllowN(ft.now(), 1)
}

func (ft *failedTokens) len() int {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.lru.Len()
}

// guard answers 429 to a request carrying a token from an address whose
// failed-token bucket is empty, before verification; otherwise it passes
// the address on for the verifier to charge if the token fails.
func (ft *failedTokens) guard(next http.Handler) http.Handler {
	if ft == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := ft.client(r)
		if !ok || r.Header.Get("Authorization") == "" {
			next.ServeHTTP(w, r)
			return
		}
		if wait, blocked := ft.blocked(key); blocked {
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
			w.Header().Set("Connection", "close")
			http.Error(w, "too many failed token attempts from this address", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// charge records a failed verification for r's client address when err
// is the token's fault (it matches auth.ErrInvalidToken); an error of the
// server's own (keys not loaded yet) is not the client's to pay.
func (ft *failedTokens) charge(r *http.Request, err error) {
	if ft == nil || r == nil || !errors.Is(err, auth.ErrInvalidToken) {
		return
	}
	if key, ok := ft.client(r); ok {
		ft.fail(key)
	}
}
