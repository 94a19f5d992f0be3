package sqlast

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ColumnKind returns the kind of value column c of t holds: its level's
// key kind for a level column, else the kind its declared SQL type names
// (integer types, character types), else the kind of the column a foreign
// key of t references with it; 0 when none says.
func (t *Table) ColumnKind(c string) KeyKind { return t.columnKind(c, 16) } // depth bounds FK cycles

func (t *Table) columnKind(c string, depth int) KeyKind {
	if l := t.LevelOf(c); l != nil {
		return l.Key
	}
	if k := TypeKind(t.Types[c]); k != 0 || depth == 0 {
		return k
	}
	for _, fk := range t.FKs {
		if i := slices.Index(fk.Cols, c); i >= 0 {
			if k := fk.To.columnKind(fk.RefCols[i], depth-1); k != 0 {
				return k
			}
		}
	}
	return 0
}

// TypeKind classifies a declared SQL type as IntKey (INTEGER, BIGINT,
// INT(11), int8, BIGINT UNSIGNED...) or TextKey (TEXT, VARCHAR(64),
// character varying, CLOB...), or 0 for anything else.
func TypeKind(typ string) KeyKind {
	typ = strings.ToLower(strings.TrimSpace(typ))
	base, _, _ := strings.Cut(typ, "(")
	base, _, _ = strings.Cut(base, " unsigned")
	switch strings.TrimSpace(base) {
	case "int", "integer", "bigint", "smallint", "tinyint", "mediumint", "int2", "int4", "int8",
		"serial", "bigserial", "smallserial":
		return IntKey
	}
	if strings.Contains(typ, "char") || strings.Contains(typ, "text") || strings.Contains(typ, "clob") {
		return TextKey
	}
	return 0
}

// ScopeTypeProblem describes what is wrong with column c of t having the
// type typ in the database (as the catalog names it), or returns "": a
// column that carries scope ids (a level column, or a key onto one) must
// hold values of the kind the graph says, and cannot be a uuid
// (PostgreSQL; MariaDB 10.7+), which the scope's ids, text, never equal
// without a cast (PostgreSQL stops at "operator does not exist" in CREATE
// POLICY, MariaDB compares the 16 raw bytes and matches no row), except
// where uuidIsText (SQLite, where a column declared UUID holds the text).
// Open and ApplyRLS report it as ErrTypeDrift.
func (t *Table) ScopeTypeProblem(c, typ string, uuidIsText bool) string {
	k, ck := t.ColumnKind(c), TypeKind(typ)
	base, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(typ)), "(")
	switch {
	case k != 0 && !uuidIsText && strings.TrimSpace(base) == "uuid":
		return fmt.Sprintf("%s.%s is %s in the database: a level column, or a key onto one, must hold integers or text (the scope's ids are compared as text); store it as text, such as char(36)", t.Name, c, typ)
	case k != 0 && ck != 0 && k != ck:
		return fmt.Sprintf("%s.%s is %s in the database, the graph says %s values", t.Name, c, typ, k)
	}
	return ""
}

// ConvertValue converts a bound value (nil excluded) to kind, reporting
// false when it cannot be a value of that kind: an IntKey column takes an
// int64 or a canonical decimal string ("12"; not "012", "12abc"), a
// TextKey column a string, []byte, or an int64 rendered in decimal. So the
// engine never compares a text column with a number (MySQL would convert
// the column's values to numbers: '7eleven' = 7) or the reverse.
func ConvertValue(kind KeyKind, v any) (any, bool) {
	switch kind {
	case IntKey:
		switch x := v.(type) {
		case int64:
			return x, true
		case string:
			return CanonicalInt(x)
		}
	case TextKey:
		switch x := v.(type) {
		case string, []byte:
			return x, true
		case int64:
			return strconv.FormatInt(x, 10), true
		}
	}
	return nil, false
}

// CanonicalInt parses s as a decimal int64 written canonically: no sign
// other than a leading '-', no leading zeros, no spaces, no "-0".
func CanonicalInt(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return n, true
}
