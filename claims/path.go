package claims

import (
	"encoding/json"
	"fmt"
	"strings"
)

// A claim path names a claim, possibly nested inside JSON objects.
//
//	path    = segment *( "." segment )
//	segment = bare / quoted
//	bare    = 1*( ALPHA / DIGIT / "_" / "-" / "$" )
//	quoted  = a JSON string literal, e.g. "https://example.com/groups"
//
// A bare segment is an object key as written. Any key that contains other
// characters (dots, slashes, colons: namespaced claim URLs) must be quoted,
// so the one separator, ".", is never ambiguous:
//
//	groups                          → claims["groups"]
//	realm_access.roles              → claims["realm_access"]["roles"]
//	"https://example.com/groups"    → claims["https://example.com/groups"]
//	resource_access."my.app".roles  → claims["resource_access"]["my.app"]["roles"]
type claimPath []string

const maxPathSegments = 16

func parseClaimPath(s string) (claimPath, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: empty claim path", ErrConfig)
	}
	var segs claimPath
	i := 0
	for {
		if len(segs) == maxPathSegments {
			return nil, fmt.Errorf("%w: claim path %q has more than %d segments", ErrConfig, s, maxPathSegments)
		}
		if i >= len(s) || s[i] == '.' {
			return nil, fmt.Errorf("%w: claim path %q has an empty segment at offset %d", ErrConfig, s, i)
		}
		if s[i] == '"' {
			end := closingQuote(s, i)
			if end < 0 {
				return nil, fmt.Errorf("%w: claim path %q: unterminated quoted segment at offset %d", ErrConfig, s, i)
			}
			var seg string
			if err := json.Unmarshal([]byte(s[i:end+1]), &seg); err != nil {
				return nil, fmt.Errorf("%w: claim path %q: quoted segment at offset %d is not a valid JSON string", ErrConfig, s, i)
			}
			if seg == "" {
				return nil, fmt.Errorf("%w: claim path %q has an empty quoted segment at offset %d", ErrConfig, s, i)
			}
			segs = append(segs, seg)
			i = end + 1
		} else {
			start := i
			for i < len(s) && s[i] != '.' {
				if !bareByte(s[i]) {
					return nil, fmt.Errorf(`%w: claim path %q: character %q at offset %d must be inside a quoted segment, e.g. "\"https://example.com/groups\""`,
						ErrConfig, s, rune(s[i]), i)
				}
				i++
			}
			segs = append(segs, s[start:i])
		}
		if i == len(s) {
			return segs, nil
		}
		if s[i] != '.' {
			return nil, fmt.Errorf("%w: claim path %q: expected '.' at offset %d after a quoted segment", ErrConfig, s, i)
		}
		i++
	}
}

// closingQuote returns the index of the quote closing the JSON string that
// opens at s[open], or -1.
func closingQuote(s string, open int) int {
	for i := open + 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

func bareByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '$'
}

// String renders the path in the syntax parseClaimPath reads.
func (p claimPath) String() string {
	var b strings.Builder
	for i, seg := range p {
		if i > 0 {
			b.WriteByte('.')
		}
		bare := true
		for j := 0; j < len(seg); j++ {
			if !bareByte(seg[j]) {
				bare = false
				break
			}
		}
		if bare {
			b.WriteString(seg)
		} else {
			q, _ := json.Marshal(seg)
			b.Write(q)
		}
	}
	return b.String()
}

// lookup walks m along the path. It reports false if a segment is missing or
// an intermediate value is not a JSON object.
func (p claimPath) lookup(m map[string]any) (any, bool) {
	var cur any = m
	for _, seg := range p {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// stringList reads a claim that holds either one string or an array of
// strings. A missing claim or JSON null is an empty list; any other shape is
// ErrMalformed.
func (p claimPath) stringListMap(m map[string]any) (map[string][]string, error) {
	v, ok := p.lookup(m)
	if !ok || v == nil {
		return nil, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, ErrMalformed
	}
	out := make(map[string][]string, len(obj))
	for k := range obj {
		l, err := claimPath{k}.stringList(obj)
		if err != nil {
			return nil, err
		}
		out[k] = l
	}
	return out, nil
}

// stringList reads a string or an array of strings at p; absent or null
// is no strings, anything else ErrMalformed.
func (p claimPath) stringList(m map[string]any) ([]string, error) {
	v, ok := p.lookup(m)
	if !ok || v == nil {
		return nil, nil
	}
	switch v := v.(type) {
	case string:
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, ErrMalformed
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, ErrMalformed
	}
}
