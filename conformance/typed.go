package conformance

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Column kinds the suite generates values for: a value written into a
// unique key must be of the column's type, or the engine refuses it (a
// text "tmconf-7" in a timestamp column) and the write properties'
// controls fail for a reason that has nothing to do with isolation.
const (
	kindInt     = "int"
	kindDecimal = "decimal"
	kindTime    = "timestamp"
	kindDate    = "date"
	kindUUID    = "uuid"
	kindText    = "text"
)

var uuidText = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// typeKind classifies a declared SQL type (as the catalog or
// TableDef.Types spells it); "" when the type says nothing.
func typeKind(typ string) string {
	t := strings.ToLower(strings.TrimSpace(typ))
	switch {
	case t == "":
		return ""
	case strings.Contains(t, "timestamp") || strings.Contains(t, "datetime"):
		return kindTime
	case strings.HasPrefix(t, "date"):
		return kindDate
	case strings.Contains(t, "uuid") || strings.Contains(t, "uniqueidentifier"):
		return kindUUID
	case strings.Contains(t, "decimal") || strings.Contains(t, "numeric") || strings.Contains(t, "money") ||
		strings.Contains(t, "real") || strings.Contains(t, "double") || strings.Contains(t, "float"):
		return kindDecimal
	case strings.Contains(t, "int"):
		return kindInt
	}
	return kindText
}

// columnKind is the kind of table.col by the live catalog's declared type,
// refined by a stored value where the type cannot tell (a UUID kept in
// CHAR(36) or TEXT).
func (r *runner) columnKind(table, col string, sample any) string {
	k := ""
	if r.cat != nil {
		if t := r.cat.tables[strings.ToLower(table)]; t != nil {
			k = typeKind(t.types[strings.ToLower(col)])
		}
	}
	if k == "" || k == kindText {
		switch v := sample.(type) {
		case time.Time:
			k = kindTime
		case string:
			if uuidText.MatchString(v) {
				k = kindUUID
			}
		}
	}
	if k == "" {
		k = kindText
	}
	return k
}

// typedValue is the n-th generated value of a kind, distinct for every n
// and far from seeded data: integers and decimals above hi, timestamps
// from 2037-06-01 (inside MySQL's TIMESTAMP range) one second apart, dates
// from 2037-01-01 one day apart, version-4-shaped UUIDs, and text
// "<prefix>-<n>".
func typedValue(kind, prefix string, hi, n int64) any {
	switch kind {
	case kindInt:
		return hi + n
	case kindDecimal:
		return strconv.FormatInt(hi+n, 10) + ".00"
	case kindTime:
		return time.Date(2037, 6, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Second)
	case kindDate:
		return time.Date(2037, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(n)).Format(time.DateOnly)
	case kindUUID:
		if prefix == freshPrefix {
			// Apart from the seeds' (which also count from 1): a write
			// control's fresh key must not be a seeded row's.
			return fmt.Sprintf("7c0f0000-0000-4000-9000-%012x", n)
		}
		return fmt.Sprintf("7c0f0000-0000-4000-8000-%012x", n)
	}
	return prefix + "-" + strconv.FormatInt(n, 10)
}

// valueKind is the kind a generated value has, for P60's check.
func valueKind(v any) string {
	switch x := v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return kindInt
	case time.Time:
		return kindTime
	case string:
		switch {
		case uuidText.MatchString(x):
			return kindUUID
		case dateText.MatchString(x):
			return kindDate
		case decimalText.MatchString(x):
			return kindDecimal
		}
	}
	return kindText
}

var (
	dateText    = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	decimalText = regexp.MustCompile(`^-?\d+(\.\d+)?$`)
)

// fits reports whether a generated value of kind got may be written into a
// column of kind want.
func fits(want, got string) bool {
	switch want {
	case kindDecimal:
		return got == kindDecimal || got == kindInt
	case kindText:
		return true
	}
	return want == got
}

// freshPrefix is the prefix of the values the write properties generate
// for fresh rows (r.fresh), never a seed's.
const freshPrefix = "tmconf"
