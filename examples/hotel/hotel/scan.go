package hotel

import (
	"time"

	"github.com/tenantmcp/tenantmcp/internal/devserver"
)

// dateInto scans a DATE (PostgreSQL: time.Time; MySQL: "YYYY-MM-DD" bytes;
// SQLite: text) into a "YYYY-MM-DD" string.
func dateInto(dst *string) dateScanner { return dateScanner{dst} }

// timeInto scans a timestamp into an RFC 3339 string (UTC).
func timeInto(dst *string) *devserver.TextScanner { return textInto(dst, time.RFC3339) }

// textInto scans into layout, text through normalizeTime.
func textInto(dst *string, layout string) *devserver.TextScanner {
	return &devserver.TextScanner{Dst: dst, Layout: layout, Text: normalizeTime, Pkg: "hotel", What: "date/time"}
}

// dateScanner is textInto(dst, time.DateOnly) as a value: a struct of one
// pointer is stored in an interface as is, so the two dates of each row of
// a page cost no allocation (a *TextScanner per value did).
type dateScanner struct{ dst *string }

// Scan implements sql.Scanner (which pgx honours too).
func (d dateScanner) Scan(src any) error {
	ts := devserver.TextScanner{Dst: d.dst, Layout: time.DateOnly, Text: normalizeTime, Pkg: "hotel", What: "date/time"}
	return ts.Scan(src)
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
