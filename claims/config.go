package claims

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults applied by New to zero Options fields.
const (
	DefaultLeeway        = 30 * time.Second
	DefaultMaxTokenBytes = 16 << 10
	DefaultGroupsClaim   = "groups"
	DefaultRolesClaim    = "roles"
	DefaultHTTPTimeout   = 10 * time.Second

	// DefaultRefreshInterval bounds how long a key the identity provider
	// retired keeps verifying (see Options.RefreshInterval).
	DefaultRefreshInterval = time.Minute
	// DefaultMinRefreshInterval is the shortest wait between two regular
	// JWKS fetches, whatever Cache-Control max-age the endpoint sends.
	DefaultMinRefreshInterval = 5 * time.Second
	// DefaultUnknownKIDInterval is the least time between two fetches
	// caused by tokens naming an unknown kid: the longest a token signed
	// with a newly published key waits (see Options.UnknownKIDInterval).
	DefaultUnknownKIDInterval = 2 * time.Second
	// DefaultMaxTokenLifetime bounds a token's lifetime (exp-iat, and
	// exp-now) when Options.MaxTokenLifetime is zero.
	DefaultMaxTokenLifetime = 24 * time.Hour
)

// MaxLeeway is the largest clock-skew leeway New accepts.
const MaxLeeway = 5 * time.Minute

const maxJWKSBytes = 1 << 20

// defaultAlgorithms are the signing algorithms accepted when
// Options.Algorithms is empty.
var defaultAlgorithms = []string{"RS256", "ES256", "EdDSA"}

var supportedAlgorithms = []string{
	"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "EdDSA",
	"HS256", "HS384", "HS512",
}

// Options configures a Verifier. Issuer, Audience, Mapping and one key source
// (JWKSURL, JWKS or HMACKey) are required; every other field has a default.
type Options struct {
	// Issuer is the exact iss every token must carry.
	Issuer string
	// Audience lists the accepted aud values; a token must name at least one
	// (RFC 8707: the token is for this resource server).
	Audience []string

	// JWKSURL is the identity provider's JWKS endpoint. It must be https,
	// except for loopback hosts or with AllowInsecureHTTP. The keys are
	// fetched in the background: see Verifier.WaitReady.
	JWKSURL string
	// JWKS is a static JWKS document (JSON), for tests and air-gapped
	// deployments. It is parsed once by New and never refreshed.
	JWKS []byte
	// HMACKey enables the HS256/HS384/HS512 algorithms, which must also be
	// listed in Algorithms. The key must be at least as long as the hash
	// (32/48/64 bytes). HMAC-signed tokens are verified with this key only,
	// never with anything from a JWKS.
	HMACKey []byte

	// Algorithms lists the accepted JWS alg values; default
	// RS256, ES256 and EdDSA. Supported: RS256/384/512, PS256/384/512,
	// ES256/384/512, EdDSA, and HS256/384/512 with HMACKey. "none" never is.
	Algorithms []string
	// Leeway is the clock-skew tolerance for exp, nbf and iat. Zero means
	// DefaultLeeway; a negative value means none. At most MaxLeeway.
	Leeway time.Duration
	// MaxTokenBytes is the longest token accepted, checked before any
	// decoding. Zero means DefaultMaxTokenBytes.
	MaxTokenBytes int

	// GroupsClaim is the path of the claim holding the group strings;
	// default "groups". RolesClaim is the path of the claim holding the
	// roles; default "roles". Path syntax: segments separated by '.', and a
	// segment that contains anything but letters, digits, '_', '-' or '$'
	// written as a JSON string:
	//
	//	realm_access.roles
	//	"https://example.com/groups"
	//	resource_access."tenant-app".roles
	//
	// Either claim may hold a string or an array of strings.
	GroupsClaim string
	RolesClaim  string
	// GroupRolesClaim, if set, is the path of a claim holding the roles per
	// group: an object from a group string (as in the groups claim) to a
	// role or an array of roles, e.g. {"/tenants/acme/hotels/acme-paris":
	// ["front_desk"]}. Those roles are bound to the grant that group makes,
	// and to no other (see Mapping). An entry for a group the token does
	// not hold, or that grants nothing, is ignored; any other shape is
	// ErrMalformed.
	GroupRolesClaim string

	// Mapping turns group strings into grants. See Mapping.
	Mapping Mapping

	// HTTPClient fetches the JWKS. The default has HTTPTimeout and refuses
	// redirects to URLs that JWKSURL itself could not be; a client given here
	// brings its own policy.
	HTTPClient *http.Client
	// AllowInsecureHTTP permits an http JWKSURL on a non-loopback host. Only
	// for development: whoever can alter the response can mint any scope.
	AllowInsecureHTTP bool
	// RefreshInterval is the longest time between two JWKS fetches; default
	// DefaultRefreshInterval (one minute). It bounds how long a key keeps
	// verifying after the identity provider removed it from the JWKS: at
	// most RefreshInterval plus HTTPTimeout, while the endpoint answers.
	// (During an outage the keys already loaded are kept.) Within that
	// bound the JWKS response's Cache-Control max-age (less its Age) is
	// honoured: the next fetch comes after max-age, but never sooner than
	// MinRefreshInterval nor later than RefreshInterval; no-cache and
	// no-store count as max-age=0. A failed fetch is retried sooner, with
	// jittered exponential backoff from one second.
	RefreshInterval time.Duration
	// MinRefreshInterval is the shortest wait between two regular fetches
	// that a small Cache-Control max-age can ask for; default
	// DefaultMinRefreshInterval, and never more than RefreshInterval.
	MinRefreshInterval time.Duration
	// UnknownKIDInterval is the least time between two fetches triggered by
	// tokens naming an unknown kid; default DefaultUnknownKIDInterval (two
	// seconds). A token naming an unknown kid waits for the next such fetch
	// that starts after it arrived (all tokens waiting at one time share
	// it), so a flood of random kids costs one fetch per interval and a key
	// published in the middle of the flood is picked up within one interval
	// plus the fetch. A token is refused at once, without waiting, when that
	// fetch is more than five seconds off (a longer interval, or a backoff
	// after failed fetches) or after its context's deadline. A kid that a
	// successful fetch lacked is refused at once for ten intervals (the
	// background refresh still picks it up). A failed fetch remembers
	// nothing about the kid, and the next one may start after a jittered
	// backoff shorter than the interval.
	UnknownKIDInterval time.Duration
	// HTTPTimeout bounds one JWKS fetch; default DefaultHTTPTimeout.
	HTTPTimeout time.Duration

	// MaxTokenLifetime bounds how long a token may live: a token whose exp
	// lies more than MaxTokenLifetime after its iat, or (with or without
	// iat) more than MaxTokenLifetime plus Leeway after now, is refused with
	// ErrLifetime. Zero means DefaultMaxTokenLifetime (24 hours); negative
	// means no bound. A stolen token is then useful for at most this long
	// even when the identity provider mints long-lived ones. Tokens without
	// exp are always refused (ErrMissingExpiry).
	MaxTokenLifetime time.Duration

	// TokenCacheSize bounds the cache of verified tokens: how many distinct
	// tokens Verify remembers, least recently used evicted first. Zero means
	// DefaultTokenCacheSize; a negative value disables the cache. A client
	// sends the same bearer token on every call until it expires, so the
	// cache saves the signature check and the claim mapping on all calls
	// but the first. It is keyed by the token's SHA-256, never the token;
	// it keeps only successes; a hit is served only while the token's
	// exp/nbf/iat still pass with the current clock and Leeway and the key
	// set is the one that verified it, so an expired token or one whose key
	// left the JWKS is refused exactly as without the cache.
	TokenCacheSize int

	// Logger receives JWKS refresh failures and skipped keys; default
	// slog.Default(). Nothing from a token is ever logged.
	Logger *slog.Logger
}

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// validate checks cfg and fills in defaults on the copy it returns.
func (cfg Options) validate() (Options, error) {
	if cfg.Issuer == "" {
		return cfg, configErr("Issuer is required")
	}
	if len(cfg.Audience) == 0 {
		return cfg, configErr("Audience is required: a token must be meant for this server")
	}
	if slices.Contains(cfg.Audience, "") {
		return cfg, configErr("Audience contains an empty string")
	}
	remote, static, hmac := cfg.JWKSURL != "", cfg.JWKS != nil, cfg.HMACKey != nil
	if remote && static {
		return cfg, configErr("set JWKSURL or JWKS, not both")
	}
	if !remote && !static && !hmac {
		return cfg, configErr("no key source: set JWKSURL, JWKS or HMACKey")
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = defaultAlgorithms
	}
	cfg.Algorithms = slices.Clone(cfg.Algorithms)
	hasHS := false
	for _, a := range cfg.Algorithms {
		if !slices.Contains(supportedAlgorithms, a) {
			return cfg, configErr("algorithm %q is not supported (supported: %s)", a, strings.Join(supportedAlgorithms, ", "))
		}
		if isHMAC(a) {
			hasHS = true
			if !hmac {
				return cfg, configErr("algorithm %s needs HMACKey", a)
			}
			if need := hmacKeyLen(a); len(cfg.HMACKey) < need {
				return cfg, configErr("HMACKey is %d bytes; %s needs at least %d", len(cfg.HMACKey), a, need)
			}
		} else if !remote && !static {
			return cfg, configErr("algorithm %s needs JWKSURL or JWKS", a)
		}
	}
	if hmac && !hasHS {
		return cfg, configErr("HMACKey is set but Algorithms lists no HS256/HS384/HS512; HMAC is never enabled implicitly")
	}
	if hmac && bytes.Contains(cfg.HMACKey, []byte("-----BEGIN")) {
		return cfg, configErr("HMACKey looks like a PEM key; an HMAC secret must not be a public key")
	}
	switch {
	case cfg.Leeway == 0:
		cfg.Leeway = DefaultLeeway
	case cfg.Leeway < 0:
		cfg.Leeway = 0
	case cfg.Leeway > MaxLeeway:
		return cfg, configErr("Leeway %s exceeds %s", cfg.Leeway, MaxLeeway)
	}
	switch {
	case cfg.MaxTokenBytes == 0:
		cfg.MaxTokenBytes = DefaultMaxTokenBytes
	case cfg.MaxTokenBytes < 0:
		return cfg, configErr("MaxTokenBytes is negative")
	}
	switch {
	case cfg.MaxTokenLifetime == 0:
		cfg.MaxTokenLifetime = DefaultMaxTokenLifetime
	case cfg.MaxTokenLifetime < 0:
		cfg.MaxTokenLifetime = 0 // no bound
	}
	if cfg.TokenCacheSize == 0 {
		cfg.TokenCacheSize = DefaultTokenCacheSize
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = DefaultGroupsClaim
	}
	if cfg.RolesClaim == "" {
		cfg.RolesClaim = DefaultRolesClaim
	}
	if remote {
		u, err := url.Parse(cfg.JWKSURL)
		if err != nil || u.Host == "" {
			return cfg, configErr("JWKSURL %q is not an absolute URL", cfg.JWKSURL)
		}
		if !secureEnough(u, cfg.AllowInsecureHTTP) {
			return cfg, configErr("JWKSURL %q must be https (http only for loopback hosts or with AllowInsecureHTTP)", cfg.JWKSURL)
		}
		if cfg.RefreshInterval == 0 {
			cfg.RefreshInterval = DefaultRefreshInterval
		}
		if cfg.UnknownKIDInterval == 0 {
			cfg.UnknownKIDInterval = DefaultUnknownKIDInterval
		}
		if cfg.HTTPTimeout == 0 {
			cfg.HTTPTimeout = DefaultHTTPTimeout
		}
		if cfg.MinRefreshInterval == 0 {
			cfg.MinRefreshInterval = DefaultMinRefreshInterval
		}
		if cfg.RefreshInterval < 0 || cfg.MinRefreshInterval < 0 || cfg.UnknownKIDInterval < 0 || cfg.HTTPTimeout < 0 {
			return cfg, configErr("RefreshInterval, MinRefreshInterval, UnknownKIDInterval and HTTPTimeout must not be negative")
		}
		cfg.MinRefreshInterval = min(cfg.MinRefreshInterval, cfg.RefreshInterval)
		if cfg.HTTPClient == nil {
			allowInsecure := cfg.AllowInsecureHTTP
			cfg.HTTPClient = &http.Client{
				Timeout: cfg.HTTPTimeout,
				// A redirect must meet the same rule as JWKSURL: no
				// downgrade from https to http.
				CheckRedirect: func(req *http.Request, via []*http.Request) error {
					if len(via) >= 5 {
						return errors.New("too many redirects")
					}
					if !secureEnough(req.URL, allowInsecure) {
						return errors.New("redirect to a JWKS URL that is not https")
					}
					return nil
				},
			}
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

func isHMAC(alg string) bool { return strings.HasPrefix(alg, "HS") }

func hmacKeyLen(alg string) int {
	switch alg {
	case "HS384":
		return 48
	case "HS512":
		return 64
	}
	return 32
}

// secureEnough: https, or http to a loopback host or when explicitly allowed.
func secureEnough(u *url.URL, allowInsecure bool) bool {
	switch u.Scheme {
	case "https":
		return true
	case "http":
		return allowInsecure || isLoopback(u.Hostname())
	}
	return false
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
