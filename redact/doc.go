// Package redact is the one serializer for everything that leaves a
// tenantmcp server: tool results (structured content and its text
// rendering), error messages and audit log records. Package server routes
// all of them through it, so a tool author cannot send a value out any other
// way.
//
// # Structure: pii tags
//
// A struct field declares what personal data it holds with a pii tag:
//
//	type Guest struct {
//		ID      string         `json:"id"`
//		Name    string         `json:"name" pii:"name"`
//		Email   string         `json:"email" pii:"email"`
//		Phones  []string       `json:"phones" pii:"phone"`
//		Address Address        `json:"address" pii:"address"`
//		Card    string         `json:"card,omitempty" pii:"card"`
//		PIN     string         `json:"pin" pii:"secret"`
//		Rooms   map[string]int `json:"rooms" pii:"name,keys"` // keys are guest names
//	}
//
// The categories are email, phone, name, card, address, iban, ssn, ip and
// secret. A tag applies to the field's value through pointers and
// interfaces, to each element of a slice or array, to each value of a map
// (with ",keys", to each key instead), and to a struct or other composite as
// a whole. A tag on an embedded struct applies to every field promoted from
// it. An unknown category, or ",keys" on a non-map, is an error wrapping
// [ErrTag]. [CategoriesOf] and [TaggedFields] list the tags a type carries, so a
// server can check a tool's output type when it is registered, derive flow
// labels from it, and relax its output schema (a redacted field becomes a
// string, a dropped one disappears).
//
// Everything else follows encoding/json, byte for byte when nothing is
// redacted: json tag names and options (omitempty, omitzero, string, "-"),
// embedding and name conflicts, map key order, []byte as base64, time.Time
// as RFC 3339, json.Number, json.RawMessage, json.Marshaler and
// encoding.TextMarshaler, HTML-safe escaping.
//
// # Free text: detectors
//
// Every string that carries no tag is scanned: untagged fields, map keys,
// elements of []any and map[string]any, the decoded bytes of a []byte, the
// output of MarshalText, every string (keys included) inside the output of
// MarshalJSON, error messages and log attributes. The detectors recognise
// e-mail addresses, phone numbers (E.164 and common national forms),
// payment card numbers (Luhn), IBANs (mod-97), US SSNs, IPv4 and IPv6
// addresses, and secrets: JWTs, bearer and basic credentials, API keys of
// well-known formats, high-entropy strings, password and key assignments,
// private key blocks and passwords in URLs. Text that spells any of these
// with look-alikes is scanned in normalised form and the spans mapped back
// onto its own bytes: Unicode NFKC (a full-width '＠' or digits), HTML
// character references ("&#64;", "&commat;"), Unicode dashes, no-break and
// zero-width characters; the detectors themselves accept the international
// prefix 00, dotted card groups, spaced SSNs, lower-case IBANs and quoted
// local parts ("q"@example.com). Each detector has a documented
// false-positive guard (internal/detect), so order numbers, dates,
// timestamps, version strings, UUIDs and hashes stay readable. There is no
// detector for names or postal addresses: fields holding them must be
// tagged. Numbers (integers, floats, json.Number) are not scanned either,
// because a Luhn-valid 16-digit integer is as often an id as a card: a card
// or phone number held in a numeric field must be tagged too. Redacted text
// is a fixed point: no detector finds anything in it
// that the caller may not see, and redacting it again changes nothing.
//
// The cost is paid once per type and once per distinct string: the
// encoder of each type (field names, tags, options) is built on first use
// and cached, as encoding/json caches its own, and within one JSON call a
// short string in which the detectors found nothing is not scanned again
// when it repeats (a hotel's name on every row). That memo is exact, since
// detection depends on the string alone, and it is emptied when the call
// returns.
//
// A type that implements json.Marshaler or encoding.TextMarshaler encodes
// itself, so only the detectors see its output; such a type that also has
// pii tags anywhere inside it is refused with [ErrTag], because its tags could
// not be enforced. Keep PII-bearing types plain structs.
//
// # Policy: operators and reveal
//
// An [Options] chooses an [Operator] per category — [Mask] (keep a safe hint: the
// e-mail domain, the last four digits of a phone or card, the country and
// last four characters of an [IBAN]), [Drop] (omit the field; in text, a
// "[redacted:<category>]" placeholder), or [Token] (a keyed HMAC-SHA256 token,
// equal for equal values within a tenant, unlinkable across tenants) — and
// which scope roles may see which categories in clear. Default: every
// category masked, nothing revealed. Secret is always dropped and never
// revealed.
//
// # Scope
//
// The policy is applied to one request with [Redactor.For] (scope from the
// context) or [Redactor.ForScope], giving a [Scoped]. The scope supplies the
// roles and the tenant of tokens. The roles are the scope's effective roles
// ([scope.Scope.Roles]): those bound to every grant, so a role the identity
// provider gave for one tenant reveals nothing of another tenant the token
// also reaches. A missing or zero scope is the most restrictive case: every
// category is dropped, nothing revealed, no token minted.
//
// Token keys are derived per tenant as HMAC-SHA256(master key, label ||
// [scope.GrantJSON]()): the tenant is the request's exact grant set, a
// grant's ancestors included (hotel acme-paris within chain acme is not the
// plain grant of acme-paris). Requests
// with the same grants share tokens whoever the subject; any other grant
// set gets an independent key, so tokens cannot be linked across tenants
// without the master key. The grant set needs no knowledge of the tenant
// hierarchy, and errs towards unlinkability: a chain-level and a
// hotel-level user of the same chain see different tokens.
//
// # Report and logs
//
// A [Scoped] counts what it redacted and revealed per category; [Report] returns
// the counts, never the values, for the audit record. [Redactor.Handler] wraps
// a slog.Handler so that log records pass through the same detectors and
// tags, with no role revealing anything.
//
// # Use from a server
//
//	red := redactor.For(ctx)               // one per tool call
//	b, err := red.JSON(out)                // structured content
//	text := string(b)                      // its text rendering (or red.Text(v) for a bare value)
//	msg := red.Error(toolErr)              // an error message for the client
//	audit.InfoContext(ctx, "tool call", "scope", s, "redactions", red.Report())
package redact
