package builder

import "github.com/tenantmcp/tenantmcp/internal/sqlast"

// Must returns v, panicking if err is not nil. It suits statements and
// schemas built once at start-up: q := builder.Must(builder.Select(...).Build()).
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func init() {
	sqlast.Unseal = func(v any) (s sqlast.Stmt, ok bool) {
		switch x := v.(type) {
		case Query:
			s = x.sealed()
		case Insert:
			s = x.sealed()
		case Update:
			s = x.sealed()
		case Delete:
			s = x.sealed()
		case *Query:
			if x != nil {
				s = x.sealed()
			}
		case *Insert:
			if x != nil {
				s = x.sealed()
			}
		case *Update:
			if x != nil {
				s = x.sealed()
			}
		case *Delete:
			if x != nil {
				s = x.sealed()
			}
		}
		return s, s != nil
	}
	sqlast.SchemaOf = func(v any) (*sqlast.Schema, bool) {
		s, ok := v.(*Schema)
		if !ok || s == nil || s.g == nil {
			return nil, false
		}
		return s.g, true
	}
}
