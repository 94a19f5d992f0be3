package redact

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"

	"github.com/tenantmcp/tenantmcp/scope"
)

// Errors. Every error returned by this package wraps one of them.
var (
	// ErrConfig: New refused the configuration.
	ErrConfig = errors.New("redact: invalid configuration")
	// ErrTag: a type carries a pii tag this package cannot enforce: an
	// unknown category, a ",keys" option on a non-map field, or pii tags
	// inside a type whose MarshalJSON or MarshalText would bypass them.
	ErrTag = errors.New("redact: invalid pii tag")
	// ErrUnsupported: the value cannot be encoded as JSON (channels,
	// functions, complex numbers, NaN and infinities, nesting deeper than
	// MaxDepth, usually a cycle), or its MarshalJSON/MarshalText failed or
	// returned invalid JSON.
	ErrUnsupported = errors.New("redact: unsupported value")
)

// MinTokenKeyLen is the minimum length of Options.TokenKey.
const MinTokenKeyLen = 32

// Options configures a Redactor. The zero Options is the default policy:
// every category is masked (Secret dropped) for every role, and no tokens.
type Options struct {
	// Operators chooses how each category is redacted. A category that is
	// not listed uses Mask. Secret must be absent or Drop.
	Operators map[Category]Operator

	// Reveal lists, per scope role, the categories that a caller holding
	// the role sees in clear, e.g. {"front_desk": {Phone, Name}}. A caller
	// with several roles sees the union. Secret cannot be revealed. Reveal
	// applies to results only, never to log records.
	Reveal map[string][]Category

	// TokenKey is the master secret from which per-tenant token keys are
	// derived. It is required, at least MinTokenKeyLen bytes of random data,
	// when any operator is Token. Rotating it changes every token.
	TokenKey []byte
}

// Redactor holds a validated redaction policy. It is immutable and safe for
// concurrent use. A nil *Redactor behaves as New(Options{}).
type Redactor struct {
	ops    actions           // operator per category, as actions
	reveal map[string]uint16 // role → bit set of revealed categories
	key    []byte            // master token key, nil if no Token operator
}

var defaultRedactor = func() *Redactor {
	r, err := New(Options{})
	if err != nil {
		panic(err)
	}
	return r
}()

// Default returns the Redactor of the default policy, New(Options{}).
func Default() *Redactor { return defaultRedactor }

// New validates opts and returns a Redactor.
func New(opts Options) (*Redactor, error) {
	r := &Redactor{reveal: make(map[string]uint16, len(opts.Reveal))}
	for i := range r.ops {
		r.ops[i] = actMask
	}
	r.ops[ciSecret] = actDrop
	needKey := false
	for c, op := range opts.Operators {
		ci, ok := indexOf(c)
		if !ok {
			return nil, fmt.Errorf("%w: operator for unknown category %q", ErrConfig, c)
		}
		switch op {
		case Mask:
			r.ops[ci] = actMask
		case Drop:
			r.ops[ci] = actDrop
		case Token:
			r.ops[ci] = actToken
			needKey = true
		default:
			return nil, fmt.Errorf("%w: unknown operator %v for category %q", ErrConfig, op, c)
		}
		if ci == ciSecret && op != Drop {
			return nil, fmt.Errorf("%w: category %q is always dropped, operator %v not allowed", ErrConfig, Secret, op)
		}
	}
	for role, cats := range opts.Reveal {
		if role == "" {
			return nil, fmt.Errorf("%w: reveal rule for an empty role", ErrConfig)
		}
		var bits uint16
		for _, c := range cats {
			ci, ok := indexOf(c)
			if !ok {
				return nil, fmt.Errorf("%w: role %q reveals unknown category %q", ErrConfig, role, c)
			}
			if ci == ciSecret {
				return nil, fmt.Errorf("%w: role %q: category %q can never be revealed", ErrConfig, role, Secret)
			}
			bits |= 1 << ci
		}
		r.reveal[role] = bits
	}
	if needKey {
		if len(opts.TokenKey) < MinTokenKeyLen {
			return nil, fmt.Errorf("%w: the Token operator needs a TokenKey of at least %d bytes, got %d",
				ErrConfig, MinTokenKeyLen, len(opts.TokenKey))
		}
		r.key = slices.Clone(opts.TokenKey)
	}
	return r, nil
}

// For returns the redaction of one request whose scope is carried by ctx
// (scope.FromContext). A context without a scope gets the most restrictive
// treatment: every category is dropped, nothing is revealed, no token is
// minted.
func (r *Redactor) For(ctx context.Context) *Scoped {
	var s scope.Scope
	if ctx != nil {
		s, _ = scope.FromContext(ctx)
	}
	return r.ForScope(s)
}

// ForScope is For with an explicit scope. The zero Scope is most
// restrictive, as in For.
func (r *Redactor) ForScope(s scope.Scope) *Scoped {
	if r == nil {
		r = defaultRedactor
	}
	sc := &Scoped{r: r, scope: s}
	if s.IsZero() {
		return sc // zero actions: drop everything
	}
	sc.act = r.ops
	for role, bits := range r.reveal {
		if !s.HasRole(role) {
			continue
		}
		for c := catIndex(0); c < nCat; c++ {
			if bits&(1<<c) != 0 {
				sc.act[c] = actReveal
			}
		}
	}
	return sc
}

// forLog is the redaction of a log record: the policy's operators with the
// tenant key of the scope in ctx, but no role reveals anything, because the
// reader of a log is an operator, not the caller.
func (r *Redactor) forLog(ctx context.Context) *Scoped {
	if r == nil {
		r = defaultRedactor
	}
	var s scope.Scope
	if ctx != nil {
		s, _ = scope.FromContext(ctx)
	}
	sc := &Scoped{r: r, scope: s}
	if !s.IsZero() {
		sc.act = r.ops
	}
	return sc
}

// tenantKeyLabel separates the tenant-key derivation from any other use of
// the master key.
const tenantKeyLabel = "tenantmcp/redact/tenant-token-key/v1\x00"

// tenantKey derives the token key of a tenant:
//
//	HMAC-SHA256(master, label || GrantJSON)
//
// The tenant is the scope's canonical grant set: exactly the rows the
// request can reach. Two requests share a key if and only if they have the
// same grants, whoever the subject, so tokens are stable across users and
// sessions of one tenant. HMAC is a PRF, so keys derived for different grant
// sets are independent: without the master key, tokens of one tenant say
// nothing about tokens of another. Using the whole grant set rather than a
// "root" grant needs no knowledge of the tenant hierarchy (a hotel-level
// scope carries no chain grant), and errs on the side of unlinkability: a
// chain-level and a hotel-level user of the same chain get different tokens.
func tenantKey(master []byte, s scope.Scope) [32]byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte(tenantKeyLabel))
	m.Write(s.GrantJSON())
	var k [32]byte
	m.Sum(k[:0])
	return k
}
