package claims

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Verifier verifies bearer tokens and mints their tenant scope. It is safe
// for concurrent use. A Verifier with a JWKSURL runs a background refresh
// until Close.
type Verifier struct {
	algs          []string
	hmacKey       []byte
	keys          *keySource // nil when only HMACKey is configured
	parser        *jwt.Parser
	mapper        *mapper
	groups        claimPath
	roles         claimPath
	groupRoles    claimPath // nil: no per-group roles claim
	maxTokenBytes int
	leeway        time.Duration
	maxLifetime   time.Duration    // 0: no bound
	cache         *tokenCache      // nil when Options.TokenCacheSize is negative
	now           func() time.Time // the clock of every exp/nbf/iat check; time.Now
}

// Claims is what a verified token said, besides the scope minted from it.
// It never holds the token itself.
type Claims struct {
	Subject   string
	Issuer    string
	Audience  []string
	Expiry    time.Time
	NotBefore time.Time // zero if the token has no nbf
	IssuedAt  time.Time // zero if the token has no iat
	ID        string    // jti; empty if absent
	Algorithm string    // the JWS alg that verified
	KeyID     string    // the kid header; empty if absent

	// Groups are the token's group strings, matched or not.
	Groups []string
	// Roles are the token's roles claim. They are bound to the scope's
	// grant only when the token yields exactly one grant (see Mapping).
	Roles []string
	// OAuthScopes are the OAuth 2 scopes of the token: the space-separated
	// "scope" claim (RFC 9068), or else Entra ID's "scp" (string or array).
	OAuthScopes []string
	// Matches says which group granted what.
	Matches []Match
}

// New checks opts and returns a Verifier. With a JWKSURL it returns at once
// and fetches the keys in the background; until the first fetch succeeds
// the Verifier refuses every token with ErrNotReady (see WaitReady). With a
// static JWKS or only an HMACKey it is ready on return. Every configuration
// error wraps ErrConfig.
func New(opts Options) (*Verifier, error) {
	cfg, err := opts.validate()
	if err != nil {
		return nil, err
	}
	groups, err := parseClaimPath(cfg.GroupsClaim)
	if err != nil {
		return nil, fmt.Errorf("GroupsClaim: %w", err)
	}
	roles, err := parseClaimPath(cfg.RolesClaim)
	if err != nil {
		return nil, fmt.Errorf("RolesClaim: %w", err)
	}
	var groupRoles claimPath
	if cfg.GroupRolesClaim != "" {
		if groupRoles, err = parseClaimPath(cfg.GroupRolesClaim); err != nil {
			return nil, fmt.Errorf("GroupRolesClaim: %w", err)
		}
	}
	mp, err := compileMapping(cfg.Mapping)
	if err != nil {
		return nil, err
	}
	v := &Verifier{
		algs:          cfg.Algorithms,
		hmacKey:       slices.Clone(cfg.HMACKey),
		mapper:        mp,
		groups:        groups,
		roles:         roles,
		groupRoles:    groupRoles,
		maxTokenBytes: cfg.MaxTokenBytes,
		leeway:        cfg.Leeway,
		maxLifetime:   cfg.MaxTokenLifetime,
		now:           time.Now,
	}
	if cfg.TokenCacheSize > 0 {
		v.cache = newTokenCache(cfg.TokenCacheSize)
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(cfg.Algorithms),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience...),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithIssuedAt(),
		jwt.WithStrictDecoding(),
		// The cache re-checks exp/nbf/iat with the same clock.
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	)
	if cfg.JWKS == nil && cfg.JWKSURL == "" {
		return v, nil
	}
	if v.keys, err = newKeySource(cfg.Logger); err != nil {
		return nil, err
	}
	if v.cache != nil {
		v.keys.onChange = v.cache.purge
	}
	if cfg.JWKS != nil {
		if err := v.keys.loadStatic(cfg.JWKS); err != nil {
			return nil, err
		}
		return v, nil
	}
	k := v.keys
	k.url = cfg.JWKSURL
	k.client = cfg.HTTPClient
	k.refreshInterval = cfg.RefreshInterval
	k.minRefresh = cfg.MinRefreshInterval
	k.unknownInterval = cfg.UnknownKIDInterval
	k.negativeTTL = 10 * cfg.UnknownKIDInterval
	k.httpTimeout = cfg.HTTPTimeout
	k.maxJWKSBytes = maxJWKSBytes
	k.start()
	return v, nil
}

// Ready reports whether signing keys are loaded. It never goes back to false:
// once loaded, keys are kept through JWKS outages.
func (v *Verifier) Ready() bool {
	return v.keys == nil || v.keys.ready.Load()
}

// WaitReady blocks until signing keys are loaded or ctx ends; then it
// returns an error wrapping both ErrNotReady and the context's error.
func (v *Verifier) WaitReady(ctx context.Context) error {
	if v.Ready() {
		return nil
	}
	select {
	case <-v.keys.readyCh:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotReady, ctx.Err())
	}
}

// Close stops the background JWKS refresh. Verify keeps working with the
// keys already loaded but never refreshes them again.
func (v *Verifier) Close() error {
	if v.keys != nil {
		v.keys.close()
	}
	return nil
}

// Leeway is the clock-skew tolerance in effect. A server using
// auth.RequireBearerToken should pass it as RequireBearerTokenOptions.ClockSkew
// so that the middleware's own expiry check agrees with Verify.
func (v *Verifier) Leeway() time.Duration { return v.leeway }

// Verify checks token and mints its scope. On success the scope is never
// zero. On failure the error matches one of the token sentinels (and
// auth.ErrInvalidToken), or ErrNotReady; it never contains any part of the
// token. ctx bounds the wait for a JWKS refresh caused by an unknown kid.
//
// Unless Options.TokenCacheSize is negative, a token verified before is
// answered from a cache (see Options.TokenCacheSize) with exactly what a
// fresh verification would give now; the Claims returned are the caller's
// own copy either way.
func (v *Verifier) Verify(ctx context.Context, token string) (scope.Scope, *Claims, error) {
	if !v.Ready() {
		return scope.Scope{}, nil, ErrNotReady
	}
	if len(token) > v.maxTokenBytes {
		return scope.Scope{}, nil, ErrTooLarge
	}
	if v.cache == nil {
		return v.verify(ctx, token)
	}
	key := tokenKey(token)
	// The generation is read before verifying: if the key set changes while
	// this verification runs, the entry is born stale and never hit.
	gen := v.keyGeneration()
	if sc, c, ok := v.cache.get(key, gen, v.now()); ok {
		return sc, c, nil
	}
	sc, c, err := v.verify(ctx, token)
	if err == nil {
		v.cache.put(key, gen, sc, c, v.leeway, v.maxLifetime)
	}
	return sc, c, err
}

// keyGeneration is the key set's generation; constant without a JWKS (the
// HMAC key never changes).
func (v *Verifier) keyGeneration() uint64 {
	if v.keys == nil {
		return 0
	}
	return v.keys.generation()
}

// verify is Verify without the cache.
func (v *Verifier) verify(ctx context.Context, token string) (scope.Scope, *Claims, error) {
	h, err := peekHeader(token)
	if err != nil {
		return scope.Scope{}, nil, err
	}
	if !slices.Contains(v.algs, h.alg) {
		return scope.Scope{}, nil, ErrAlgNotAllowed
	}
	mc := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, mc, func(t *jwt.Token) (any, error) {
		return v.key(ctx, t, h)
	}); err != nil {
		return scope.Scope{}, nil, classify(err, mc)
	}

	sub, _ := mc["sub"].(string)
	if sub == "" {
		return scope.Scope{}, nil, ErrNoSubject
	}
	c := &Claims{Subject: sub, Algorithm: h.alg, KeyID: h.kid}
	c.Issuer, _ = mc.GetIssuer()
	c.Audience, _ = mc.GetAudience()
	if exp, _ := mc.GetExpirationTime(); exp != nil {
		c.Expiry = exp.Time
	}
	if nbf, _ := mc.GetNotBefore(); nbf != nil {
		c.NotBefore = nbf.Time
	}
	if iat, _ := mc.GetIssuedAt(); iat != nil {
		c.IssuedAt = iat.Time
	}
	if err := v.checkLifetime(c); err != nil {
		return scope.Scope{}, nil, err
	}
	c.ID, _ = mc["jti"].(string)
	c.OAuthScopes = oauthScopes(mc)

	if v.groupOverage(mc) {
		return scope.Scope{}, nil, ErrGroupOverage
	}
	if c.Groups, err = v.groups.stringList(mc); err != nil {
		return scope.Scope{}, nil, err
	}
	if c.Roles, err = v.roles.stringList(mc); err != nil {
		return scope.Scope{}, nil, err
	}
	var perGroup map[string][]string
	if v.groupRoles != nil {
		if perGroup, err = v.groupRoles.stringListMap(mc); err != nil {
			return scope.Scope{}, nil, err
		}
	}
	grants, matches, err := v.mapper.mapGroups(c.Groups, c.Roles, perGroup)
	if err != nil {
		return scope.Scope{}, nil, err
	}
	c.Matches = matches
	// The roles are bound per grant by mapGroups (see Mapping).
	s, err := mint.Scope(sub, grants, nil)
	if err != nil {
		return scope.Scope{}, nil, fmt.Errorf("%w: %w", ErrNoScope, err)
	}
	return s, c, nil
}

// checkLifetime enforces Options.MaxTokenLifetime on a token whose
// signature and exp/nbf/iat already passed. Both checks can only get
// easier as time passes (exp-iat is fixed, exp-now shrinks), so a token the
// cache holds still passes them at every hit: the cache's invariant holds.
func (v *Verifier) checkLifetime(c *Claims) error {
	if v.maxLifetime <= 0 {
		return nil
	}
	if !c.IssuedAt.IsZero() && c.Expiry.Sub(c.IssuedAt) > v.maxLifetime {
		return ErrLifetime
	}
	if c.Expiry.Sub(v.now()) > v.maxLifetime+v.leeway {
		return ErrLifetime
	}
	return nil
}

type header struct {
	alg    string
	kid    string
	hasKID bool
}

// peekHeader decodes the JOSE header before golang-jwt does, to tell a
// disallowed alg apart from a bad signature and to refuse "crit".
func peekHeader(token string) (header, error) {
	if strings.Count(token, ".") != 2 {
		return header{}, ErrMalformed
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token[:strings.IndexByte(token, '.')])
	if err != nil {
		return header{}, ErrMalformed
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return header{}, ErrMalformed
	}
	var h header
	alg, ok := m["alg"].(string)
	if !ok {
		return header{}, ErrMalformed
	}
	h.alg = alg
	if kid, present := m["kid"]; present {
		if h.kid, ok = kid.(string); !ok {
			return header{}, ErrMalformed
		}
		h.hasKID = true
	}
	// RFC 7515 §4.1.11: a recipient that does not understand every listed
	// extension must reject the token, and this one understands none.
	if _, present := m["crit"]; present {
		return header{}, ErrMalformed
	}
	return h, nil
}

// key is the jwt.Keyfunc. HMAC algorithms get the configured secret and
// nothing else; the others get a JWKS key that fits the algorithm.
func (v *Verifier) key(ctx context.Context, t *jwt.Token, h header) (any, error) {
	alg := t.Method.Alg()
	if isHMAC(alg) {
		return v.hmacKey, nil // alg is in v.algs, so HMACKey is configured
	}
	if v.keys == nil {
		return nil, ErrUnknownKey
	}
	if !h.hasKID {
		// Without a kid, offer every key that fits the algorithm.
		all, _ := v.keys.store.KeyReadAll(ctx)
		var set jwt.VerificationKeySet
		for _, j := range all {
			if a := j.Marshal().ALG; a != "" && string(a) != alg {
				continue
			}
			if keyFits(alg, j.Key()) {
				set.Keys = append(set.Keys, j.Key())
			}
		}
		if len(set.Keys) == 0 {
			return nil, ErrUnknownKey
		}
		return set, nil
	}
	kf := v.keys.kf.KeyfuncCtx(ctx)
	key, err := kf(t)
	if errors.Is(err, jwkset.ErrKeyNotFound) {
		if !v.keys.refreshForUnknownKID(ctx, h.kid) {
			return nil, ErrUnknownKey
		}
		key, err = kf(t)
		if errors.Is(err, jwkset.ErrKeyNotFound) {
			return nil, ErrUnknownKey
		}
	}
	if err != nil {
		// With the kid and alg already checked to be strings, keyfunc's only
		// remaining refusal is a JWK whose own alg differs from the token's.
		return nil, ErrAlgNotAllowed
	}
	if !keyFits(alg, key) {
		return nil, ErrAlgNotAllowed
	}
	return key, nil
}

// keyFits reports whether key is the kind of key alg verifies with,
// including the curve for ECDSA.
func keyFits(alg string, key any) bool {
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		_, ok := key.(*rsa.PublicKey)
		return ok
	case "ES256", "ES384", "ES512":
		k, ok := key.(*ecdsa.PublicKey)
		if !ok {
			return false
		}
		want := map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()}[alg]
		return k.Curve == want
	case "EdDSA":
		_, ok := key.(ed25519.PublicKey)
		return ok
	}
	return false
}

// classify turns a golang-jwt error into this package's sentinels, dropping
// the library's text (which may quote header values).
func classify(err error, mc jwt.MapClaims) error {
	for _, own := range []error{ErrUnknownKey, ErrAlgNotAllowed} {
		if errors.Is(err, own) {
			return own
		}
	}
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return ErrMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return ErrBadSignature
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
	default:
		return ErrMalformed
	}
	var kinds []error
	add := func(e error) {
		if !slices.Contains(kinds, e) {
			kinds = append(kinds, e)
		}
	}
	if errors.Is(err, jwt.ErrInvalidType) {
		add(ErrMalformed)
	}
	if errors.Is(err, jwt.ErrTokenExpired) {
		add(ErrExpired)
	}
	if errors.Is(err, jwt.ErrTokenNotValidYet) || errors.Is(err, jwt.ErrTokenUsedBeforeIssued) {
		add(ErrNotYetValid)
	}
	if errors.Is(err, jwt.ErrTokenInvalidIssuer) {
		add(ErrWrongIssuer)
	}
	if errors.Is(err, jwt.ErrTokenInvalidAudience) {
		add(ErrWrongAudience)
	}
	if errors.Is(err, jwt.ErrTokenRequiredClaimMissing) {
		if exp, err := mc.GetExpirationTime(); err == nil && exp == nil {
			add(ErrMissingExpiry)
		}
		if iss, err := mc.GetIssuer(); err == nil && iss == "" {
			add(ErrWrongIssuer)
		}
		if aud, err := mc.GetAudience(); err == nil && (len(aud) == 0 || len(aud) == 1 && aud[0] == "") {
			add(ErrWrongAudience)
		}
	}
	if len(kinds) == 0 {
		return ErrMalformed
	}
	return reject(kinds...)
}

// groupOverage detects Entra ID's groups overage: the groups claim is left
// out and "_claim_names" points at a Graph endpoint instead (or, in the
// implicit flow, "hasgroups" is true).
func (v *Verifier) groupOverage(mc jwt.MapClaims) bool {
	top := v.groups[0]
	if names, ok := mc["_claim_names"].(map[string]any); ok {
		if _, ok := names[top]; ok {
			return true
		}
	}
	if top == "groups" {
		if has, ok := mc["hasgroups"].(bool); ok && has {
			return true
		}
	}
	return false
}

func oauthScopes(mc jwt.MapClaims) []string {
	if s, ok := mc["scope"].(string); ok {
		return strings.Fields(s)
	}
	switch s := mc["scp"].(type) {
	case string:
		return strings.Fields(s)
	case []any:
		var out []string
		for _, e := range s {
			if str, ok := e.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}
