package hr

import (
	"fmt"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/devserver"
)

// dateInto scans a DATE into a "YYYY-MM-DD" string: PostgreSQL and the
// SQLite driver give a time.Time, MySQL/MariaDB text bytes (dateText).
func dateInto(dst *string) *devserver.TextScanner {
	return &devserver.TextScanner{Dst: dst, Layout: time.DateOnly, Text: dateText, Pkg: "hr", What: "date"}
}

// dateValue scans a DATE into a time.Time at midnight UTC (the zero time
// for NULL).
func dateValue(dst *time.Time) *dateTimeScanner { return &dateTimeScanner{dst: dst} }

type dateTimeScanner struct{ dst *time.Time }

// Scan implements sql.Scanner.
func (s *dateTimeScanner) Scan(src any) error {
	var text string
	if err := dateInto(&text).Scan(src); err != nil {
		return err
	}
	if text == "" {
		*s.dst = time.Time{}
		return nil
	}
	t, err := time.Parse(time.DateOnly, text)
	if err != nil {
		return fmt.Errorf("hr: %q is not a date", text)
	}
	*s.dst = t
	return nil
}

// dateText keeps the date part of the text forms engines return
// ("2026-01-05", "2026-01-05 00:00:00", "2026-01-05T00:00:00Z").
func dateText(v, _ string) string {
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
