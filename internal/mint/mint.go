// Package mint is the module-internal way to create a scope.Scope and attach
// it to a context. Only package claims (minting from a verified token),
// package server (attaching per call) and the test-only scope/scopetest may
// use it; being internal, code outside this module cannot.
package mint

import (
	"context"

	"github.com/tenantmcp/tenantmcp/internal/scopehook"
	"github.com/tenantmcp/tenantmcp/scope"
)

// Scope validates and mints a scope. Grants and roles are copied, sorted and
// de-duplicated. An error wraps scope.ErrInvalid.
func Scope(subject string, grants []scope.Grant, roles []string) (scope.Scope, error) {
	v, err := scopehook.Mint(subject, grants, roles)
	if err != nil {
		return scope.Scope{}, err
	}
	return v.(scope.Scope), nil
}

// NewContext returns ctx carrying s. A zero s is attached as such and reads
// back as "no scope".
func NewContext(ctx context.Context, s scope.Scope) context.Context {
	return scopehook.Attach(ctx, s)
}
