package builder

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/sqlast"
)

// ErrCursor is wrapped (with ErrInvalid) when a keyset [Cursor] cannot be
// decoded or does not fit the [Keyset]: a client sent a damaged or forged
// one. The cursor's content is not echoed.
var ErrCursor = fmt.Errorf("%w: bad keyset cursor", ErrInvalid)

// Keyset pages through a query in the order of Keys, each page resuming
// after the last row of the previous one: unlike Offset it neither skips
// nor repeats rows when rows are inserted between calls, and costs the
// same on every page. The last key should be unique (a primary key) so
// that the order is total; every key must be a NOT NULL column.
//
// A [Cursor] carries only the last row's key values; it is a position, not
// a permission. The page query is guarded like any other, so a cursor
// forged with another tenant's values only moves the position within the
// caller's own rows.
type Keyset struct {
	Keys []Order
}

// Cursor is an opaque keyset position: the key values of the last row of
// a page, encoded for a client to send back. The zero Cursor is the start.
type Cursor string

// Page returns b ordered by the keys, restricted to the rows after c (all
// rows for the zero Cursor) and limited to n rows. b should have no ORDER
// BY or LIMIT of its own.
func (k Keyset) Page(b SelectBuilder, c Cursor, n int) SelectBuilder {
	if len(k.Keys) == 0 {
		b.err = invalid("Keyset without keys")
		return b
	}
	if c != "" {
		b = b.Where(k.After(c))
	}
	return b.OrderBy(k.Keys...).Limit(n)
}

// After is the condition "the row comes after c in the keys' order",
// expanded as k1 > v1 OR (k1 = v1 AND k2 > v2) OR ... (< for descending
// keys): row-value comparison is not portable across the engines with
// mixed directions.
func (k Keyset) After(c Cursor) Pred {
	vals, err := k.decode(c)
	if err != nil {
		return Pred{err: err}
	}
	var ors []Pred
	for i, key := range k.Keys {
		var ands []Pred
		for j := range i {
			ands = append(ands, Expr{x: k.Keys[j].o.X}.Eq(vals[j]))
		}
		e := Expr{x: key.o.X}
		if key.o.Desc {
			ands = append(ands, e.Lt(vals[i]))
		} else {
			ands = append(ands, e.Gt(vals[i]))
		}
		ors = append(ors, And(ands...))
	}
	return Or(ors...)
}

// Cursor encodes the key values of a page's last row (one per key, of the
// types bound values may have) as the position to resume after.
func (k Keyset) Cursor(values ...any) (Cursor, error) {
	if err := k.check(); err != nil {
		return "", err
	}
	if len(values) != len(k.Keys) {
		return "", invalid("keyset cursor needs %d values, got %d", len(k.Keys), len(values))
	}
	enc := make([][2]string, len(values))
	for i, v := range values {
		bv, err := bindValue(v)
		if err != nil {
			return "", err
		}
		switch x := bv.V.(type) {
		case nil:
			return "", invalid("keyset key %d is NULL; keys must be NOT NULL columns", i+1)
		case int64:
			enc[i] = [2]string{"i", strconv.FormatInt(x, 10)}
		case string:
			enc[i] = [2]string{"s", x}
		case float64:
			enc[i] = [2]string{"f", strconv.FormatFloat(x, 'g', -1, 64)}
		case bool:
			enc[i] = [2]string{"b", strconv.FormatBool(x)}
		case time.Time:
			enc[i] = [2]string{"t", x.Format(time.RFC3339Nano)}
		case []byte:
			enc[i] = [2]string{"x", base64.RawURLEncoding.EncodeToString(x)}
		default:
			return "", invalid("keyset key %d of type %T", i+1, v)
		}
	}
	js, err := json.Marshal(enc)
	if err != nil {
		return "", invalid("keyset cursor: %v", err)
	}
	return Cursor(base64.RawURLEncoding.EncodeToString(js)), nil
}

func (k Keyset) check() error {
	if len(k.Keys) == 0 {
		return invalid("Keyset without keys")
	}
	for _, o := range k.Keys {
		if o.err != nil {
			return o.err
		}
		if _, ok := o.o.X.(*sqlast.Col); !ok {
			return invalid("keyset keys must be columns, not %T", o.o.X)
		}
	}
	return nil
}

// decode returns the cursor's values, one per key.
func (k Keyset) decode(c Cursor) ([]any, error) {
	if err := k.check(); err != nil {
		return nil, err
	}
	js, err := base64.RawURLEncoding.DecodeString(string(c))
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", ErrCursor)
	}
	var enc [][2]string
	if err := json.Unmarshal(js, &enc); err != nil {
		return nil, fmt.Errorf("%w: not a cursor", ErrCursor)
	}
	if len(enc) != len(k.Keys) {
		return nil, fmt.Errorf("%w: %d values for %d keys", ErrCursor, len(enc), len(k.Keys))
	}
	out := make([]any, len(enc))
	for i, e := range enc {
		var err error
		switch e[0] {
		case "i":
			out[i], err = strconv.ParseInt(e[1], 10, 64)
		case "s":
			out[i] = e[1]
		case "f":
			out[i], err = strconv.ParseFloat(e[1], 64)
		case "b":
			out[i], err = strconv.ParseBool(e[1])
		case "t":
			out[i], err = time.Parse(time.RFC3339Nano, e[1])
		case "x":
			out[i], err = base64.RawURLEncoding.DecodeString(e[1])
		default:
			err = errors.New("unknown kind")
		}
		if err != nil {
			return nil, fmt.Errorf("%w: value %d does not decode", ErrCursor, i+1)
		}
	}
	return out, nil
}
