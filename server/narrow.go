package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/scope"
)

// NarrowProperty is the input property a Narrowable tool gains: the one
// grant of the caller's token the call is narrowed to, written as
// scope.Grant's String writes it ("company:4", or
// "chain:initech/hotel:acme-paris" for a grant confined to ancestors).
const NarrowProperty = "within"

// OutcomeAmbiguous: a statement meant for one row matched several
// (guardedsql.ErrAmbiguous); the client reads "ambiguous: …" and may
// narrow the call. The audit record's "within" names the grant a call was
// narrowed to.
const OutcomeAmbiguous = "ambiguous"

// Messages the caller reads. The refusal of a selector is the same for
// every selector that is not one of the caller's grants — another
// tenant's, one that does not exist, an ancestor or a malformed path — so
// it reveals nothing but the caller's own grants, which the caller knows.
const (
	msgNotGranted     = `not found: "within" names none of your grants`
	msgAmbiguous      = "ambiguous: more than one row matched"
	msgAmbiguousHint  = msgAmbiguous + `; narrow the call with "within" set to one of your grants, written "level:id" (e.g. "company:4")`
	narrowDescription = `Optional. Narrow this call to one of your grants, written "level:id" (e.g. "company:4"; ` +
		`"chain:acme/hotel:paris" for a grant within an ancestor). Needed when you hold several grants and the call ` +
		`names a row by an id that more than one of them has.`
)

// addNarrowProperty adds NarrowProperty to the input schema of tool. The
// tool's own input may not have it: the handler never sees the selector.
// It runs after checkTenantFree: the selector is not a tenant key the
// caller chooses freely but a choice among the token's own grants.
func addNarrowProperty(tool string, in *jsonschema.Schema) error {
	// encoding/json matches field names case-insensitively: a "Within"
	// of the tool's own would read the selector.
	for name := range in.Properties {
		if strings.EqualFold(name, NarrowProperty) {
			return fmt.Errorf("%w: tool %q is Narrowable, but its input has a property %q of its own", ErrConfig, tool, name)
		}
	}
	if in.Properties == nil {
		in.Properties = map[string]*jsonschema.Schema{}
	}
	in.Properties[NarrowProperty] = &jsonschema.Schema{Type: "string", Description: narrowDescription}
	return nil
}

// narrow takes the selector out of the validated arguments and narrows sc
// to the grant it names. Without a selector sc and args are returned as
// they are. A selector naming none of sc's grants is refused with res (the
// tool error the caller reads) before anything reaches the database.
//
// Invariant: the returned scope holds one of sc's own grants or is sc; a
// selector is only ever compared with sc's grants (scope.Scope.NarrowPath),
// so it cannot widen the call.
func (s *Server) narrow(a *request, sc scope.Scope, args json.RawMessage) (scope.Scope, json.RawMessage, *mcp.CallToolResult) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		// validateArgs decoded the same bytes as an object already.
		return scope.Scope{}, nil, s.internal(a, fmt.Errorf("arguments: %w", err))
	}
	raw, ok := m[NarrowProperty]
	if !ok {
		return sc, args, nil
	}
	delete(m, NarrowProperty)
	rest, err := json.Marshal(m)
	if err != nil {
		return scope.Scope{}, nil, s.internal(a, fmt.Errorf("arguments: %w", err))
	}
	var path string
	if err := json.Unmarshal(raw, &path); err != nil {
		// The schema says string; validation let nothing else through.
		return scope.Scope{}, nil, s.internal(a, fmt.Errorf("selector: %w", err))
	}
	narrowed, err := sc.NarrowPath(path)
	if err != nil {
		if !errors.Is(err, scope.ErrNotGranted) {
			return scope.Scope{}, nil, s.internal(a, err)
		}
		a.outcome = OutcomeNotFound
		a.rule = "within.not_granted"
		return scope.Scope{}, nil, toolError(msgNotGranted)
	}
	a.within = path
	return narrowed, rest, nil
}

// ambiguous is the tool error of guardedsql.ErrAmbiguous: it tells the
// caller of a Narrowable tool how to narrow.
func ambiguous(a *request) *mcp.CallToolResult {
	a.outcome = OutcomeAmbiguous
	if a.narrowable {
		return toolError(msgAmbiguousHint)
	}
	return toolError(msgAmbiguous)
}
