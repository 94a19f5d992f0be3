package hr

import (
	"fmt"
	"time"
)

// dateInto scans a DATE into a "YYYY-MM-DD" string: PostgreSQL and the
// SQLite driver give a time.Time, MySQL/MariaDB text bytes.
func dateInto(dst *string) *dateScanner { return &dateScanner{dst: dst} }

type dateScanner struct{ dst *string }

// Scan implements sql.Scanner (which pgx honours too).
func (s *dateScanner) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*s.dst = ""
	case time.Time:
		*s.dst = v.UTC().Format(time.DateOnly)
	case string:
		*s.dst = dateText(v)
	case []byte:
		*s.dst = dateText(string(v))
	default:
		return fmt.Errorf("hr: cannot scan %T as a date", src)
	}
	return nil
}

// dateText keeps the date part of the text forms engines return
// ("2026-01-05", "2026-01-05 00:00:00", "2026-01-05T00:00:00Z").
func dateText(v string) string {
	if len(v) > len(time.DateOnly) {
		if _, err := time.Parse(time.DateOnly, v[:len(time.DateOnly)]); err == nil {
			return v[:len(time.DateOnly)]
		}
	}
	return v
}

// parseDate parses a tool's date input.
func parseDate(field, v string) (time.Time, error) {
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return time.Time{}, invalid("%s must be a date YYYY-MM-DD", field)
	}
	return t, nil
}
