package hotel

import (
	"fmt"
	"time"
)

// dateInto scans a DATE (PostgreSQL: time.Time; MySQL: "YYYY-MM-DD" bytes;
// SQLite: text) into a "YYYY-MM-DD" string.
func dateInto(dst *string) *textScanner { return &textScanner{dst: dst, layout: time.DateOnly} }

// timeInto scans a timestamp into an RFC 3339 string (UTC).
func timeInto(dst *string) *textScanner { return &textScanner{dst: dst, layout: time.RFC3339} }

type textScanner struct {
	dst    *string
	layout string
}

// Scan implements sql.Scanner (which pgx honours too).
func (s *textScanner) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*s.dst = ""
	case time.Time:
		*s.dst = v.UTC().Format(s.layout)
	case string:
		*s.dst = normalizeTime(v, s.layout)
	case []byte:
		*s.dst = normalizeTime(string(v), s.layout)
	default:
		return fmt.Errorf("hotel: cannot scan %T as a date/time", src)
	}
	return nil
}

// normalizeTime turns the text forms engines return ("2026-01-05",
// "2026-01-05 10:00:00", "2026-01-05T10:00:00Z") into layout.
func normalizeTime(v, layout string) string {
	if layout == time.DateOnly && len(v) == len(time.DateOnly) {
		// A ten-byte value that parses as a date formats back to itself
		// (the layout has fixed-width fields), and one that does not is
		// returned as is: either way the answer is v, without parsing.
		return v
	}
	layouts := []string{time.RFC3339Nano, time.DateTime, time.DateOnly}
	if len(v) == len(time.DateOnly) {
		// A bare date, the common case (every DATE column on SQLite and
		// MySQL): the two longer layouts cannot match it, and trying them
		// first cost two failed parses per value, most of a page's scan.
		layouts = layouts[2:]
	}
	for _, in := range layouts {
		if t, err := time.Parse(in, v); err == nil {
			return t.UTC().Format(layout)
		}
	}
	return v
}
