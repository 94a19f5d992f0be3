package claims

import (
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// tokenError is the type of every sentinel that blames the token. It unwraps
// to auth.ErrInvalidToken, so auth.RequireBearerToken answers 401 for it.
// Its message is fixed text: nothing from the token is ever put into an
// error, because the go-sdk middleware writes err.Error() into the response
// body and callers log errors.
type tokenError struct{ msg string }

func (e *tokenError) Error() string { return e.msg }
func (e *tokenError) Unwrap() error { return auth.ErrInvalidToken }

// Errors that reject a token. Each one wraps auth.ErrInvalidToken as well, so
// errors.Is(err, auth.ErrInvalidToken) holds for all of them.
var (
	// ErrMalformed: the token is not a compact JWS with JSON header and
	// claims, a registered claim has the wrong JSON type, a "crit" header is
	// present, or the group/role claim is neither a string nor an array of
	// strings.
	ErrMalformed error = &tokenError{"claims: malformed token"}
	// ErrTooLarge: the token is longer than Options.MaxTokenBytes. Checked
	// before any decoding.
	ErrTooLarge error = &tokenError{"claims: token too large"}
	// ErrAlgNotAllowed: the header's alg is not in Options.Algorithms (this
	// includes "none"), or does not fit the key the kid names (an RS256
	// token naming an EC key, a JWK whose own alg differs, an ES256 token
	// naming a P-384 key).
	ErrAlgNotAllowed error = &tokenError{"claims: signing algorithm not allowed"}
	// ErrUnknownKey: no key in the JWKS has the token's kid, even after the
	// rate-limited refresh, or no key fits a token without kid.
	ErrUnknownKey error = &tokenError{"claims: unknown signing key"}
	// ErrBadSignature: the signature does not verify with the key.
	ErrBadSignature error = &tokenError{"claims: bad signature"}
	// ErrExpired: exp is in the past by more than the leeway.
	ErrExpired error = &tokenError{"claims: token expired"}
	// ErrNotYetValid: nbf (or iat) is in the future by more than the leeway.
	ErrNotYetValid error = &tokenError{"claims: token not yet valid"}
	// ErrMissingExpiry: the token has no exp claim. Tokens that never expire
	// are refused.
	ErrMissingExpiry error = &tokenError{"claims: token has no expiry"}
	// ErrLifetime: the token lives longer than Options.MaxTokenLifetime
	// allows (24 hours by default): exp-iat exceeds it, or exp lies further
	// than it (plus the leeway) in the future.
	ErrLifetime error = &tokenError{"claims: token lifetime exceeds the maximum"}
	// ErrWrongIssuer: iss is missing or not Options.Issuer.
	ErrWrongIssuer error = &tokenError{"claims: wrong issuer"}
	// ErrWrongAudience: aud is missing or names none of Options.Audience.
	ErrWrongAudience error = &tokenError{"claims: wrong audience"}
	// ErrNoSubject: the sub claim is missing, empty or not a string.
	ErrNoSubject error = &tokenError{"claims: token has no subject"}
	// ErrGroupOverage: the identity provider left the groups out of the token
	// and pointed elsewhere instead (Microsoft Entra ID "_claim_names" /
	// "hasgroups"). The scope cannot be resolved from the token, and a
	// partial scope is never minted.
	ErrGroupOverage error = &tokenError{"claims: group overage: groups are not in the token"}
	// ErrNoScope: the token is valid but none of its groups matches a
	// mapping rule, or the matched grants do not form a valid scope (then
	// the error also wraps scope.ErrInvalid). A token never yields an empty
	// scope.
	ErrNoScope error = &tokenError{"claims: token grants no tenant scope"}
)

// Errors that are not the token's fault. They do not wrap
// auth.ErrInvalidToken: auth.RequireBearerToken answers 500 for them rather
// than telling the client to fetch a new token.
var (
	// ErrNotReady: no signing keys have been loaded yet (the first JWKS fetch
	// has not succeeded). Verify refuses every token until it has.
	ErrNotReady = errors.New("claims: verifier not ready: no signing keys loaded")
	// ErrConfig is wrapped by every error New returns for a bad Options.
	ErrConfig = errors.New("claims: invalid configuration")
)

// rejection carries several token errors at once, e.g. a token that is both
// expired and for the wrong audience. errors.Is matches each of them.
type rejection []error

func (r rejection) Error() string {
	msgs := make([]string, len(r))
	for i, e := range r {
		msgs[i] = strings.TrimPrefix(e.Error(), "claims: ")
	}
	return "claims: " + strings.Join(msgs, "; ")
}

func (r rejection) Unwrap() []error { return r }

func reject(errs ...error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return rejection(errs)
}
