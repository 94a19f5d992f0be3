package hotel

import (
	"testing"
	"time"
)

// normalizeTime skips the longer layouts for a ten-byte value; it must give
// what trying every layout in order gives, for dates, timestamps and text
// that is neither.
func TestNormalizeTimeFastPathAgrees(t *testing.T) {
	everyLayout := func(v, layout string) string {
		for _, in := range []string{time.RFC3339Nano, time.DateTime, time.DateOnly} {
			if tm, err := time.Parse(in, v); err == nil {
				return tm.UTC().Format(layout)
			}
		}
		return v
	}
	for _, v := range []string{
		"2026-01-05", "2026-13-05", "2026-1-5xx", "20260105ab", "", "2026-01-05 10:00:00", "2026-01-05T10:00:00Z",
		"2026-01-05T23:30:00-02:00", "2026-01-05T10:00:00.123456789Z", "not a date", "0000-00-00", "2024-02-29", "2023-02-29",
	} {
		for _, layout := range []string{time.DateOnly, time.RFC3339} {
			if got, want := normalizeTime(v, layout), everyLayout(v, layout); got != want {
				t.Errorf("normalizeTime(%q, %q) = %q, every layout in order gives %q", v, layout, got, want)
			}
		}
	}
}
