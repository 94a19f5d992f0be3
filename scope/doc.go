// Package scope defines the tenant scope of a request: who is calling (the
// subject), which tenants they may reach (grants), and what they may do
// (roles).
//
// A [Scope] is the single value the rest of tenantmcp consults to decide which
// rows a request may see. It is immutable, and it cannot be fabricated by code
// outside this module: the type has only unexported fields, there is no
// exported constructor, and the zero value means "no scope", which every
// consumer treats as deny. Scopes are minted only by package claims, from a
// verified bearer token, and attached to the request context by package
// server. Tool code can read the scope with [FromContext] but cannot put one
// there.
//
// A grant is a (level, id) pair such as (chain, acme) or (hotel, h-17).
// Levels are names the application defines, ordered from the root of its
// tenant hierarchy down; the schema graph in package builder says which
// column each level lives in, so a chain grant admits every hotel of the
// chain while a hotel grant admits only that hotel.
//
// A grant may be confined to ancestors ([Grant.Within]): the group path
// /tenants/initech/hotels/acme-paris grants "hotel acme-paris within chain
// initech", which admits a row only if the row's hotel is acme-paris and its
// chain is initech. It is not the plain grant of acme-paris: Has and
// GrantsAt do not report it, and it is part of GrantJSON (and so of the
// redaction tenant key). Every level it names must agree with the data; a
// path whose ancestors disagree grants nothing.
//
// Roles belong to grants ([Grant.Roles]): the roles the identity provider gave
// the caller for that tenant. The scope's effective roles (Roles, HasRole),
// which decide what package redact reveals, are those bound to every grant:
// where it is not known which grant covers a row, the most restrictive
// choice, so a role given for one tenant never reveals another's data.
// GrantRoles reports the roles of one grant.
//
// A scope only ever narrows. Scope.Narrow and Scope.NarrowPath return the
// scope of one of its own grants (with that grant's roles), refusing any
// other selector with ErrNotGranted; package server uses NarrowPath for
// the "within" selector of a Narrowable tool, so that a caller holding
// several grants can name the one a call is about. Neither can add a grant,
// and a narrowed scope reaches a tool only through the context the server
// builds.
//
// Unit tests of tool code that need a scope use package scope/scopetest,
// which refuses to work outside a test binary.
package scope
