package redact

import (
	"log/slog"
	"strconv"
	"strings"
)

// Report counts, per category, the values a Scoped redacted (masked,
// tokenised or dropped) and revealed. It never holds the values themselves,
// so it is safe to log: it is meant for the audit record of a tool call.
//
// A count is the number of tagged struct fields (one per field, whatever
// the field holds) plus the number of spans the detectors found in free
// text.
type Report struct {
	redacted [nCat]int
	revealed [nCat]int
}

// Redacted returns how many values of category c were redacted.
func (r Report) Redacted(c Category) int {
	if i, ok := indexOf(c); ok {
		return r.redacted[i]
	}
	return 0
}

// Revealed returns how many values of category c were shown in clear
// because the caller's role may see them.
func (r Report) Revealed(c Category) int {
	if i, ok := indexOf(c); ok {
		return r.revealed[i]
	}
	return 0
}

// Total returns the number of redacted values of all categories.
func (r Report) Total() int {
	n := 0
	for _, v := range r.redacted {
		n += v
	}
	return n
}

// LogValue renders the report as two groups of non-zero counts,
// redacted={email=2 phone=1} revealed={phone=3}.
func (r Report) LogValue() slog.Value {
	group := func(counts *[nCat]int) slog.Value {
		var as []slog.Attr
		for i, n := range counts {
			if n != 0 {
				as = append(as, slog.Int(string(catNames[i]), n))
			}
		}
		return slog.GroupValue(as...)
	}
	return slog.GroupValue(
		slog.Attr{Key: "redacted", Value: group(&r.redacted)},
		slog.Attr{Key: "revealed", Value: group(&r.revealed)},
	)
}

// MarshalJSON encodes the report as
// {"redacted":{"email":2,"phone":1},"revealed":{"phone":3}}.
func (r Report) MarshalJSON() ([]byte, error) {
	b := []byte(`{"redacted":`)
	b = appendCounts(b, &r.redacted)
	b = append(b, `,"revealed":`...)
	b = appendCounts(b, &r.revealed)
	return append(b, '}'), nil
}

func appendCounts(b []byte, counts *[nCat]int) []byte {
	b = append(b, '{')
	first := true
	for i, n := range counts {
		if n == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = strconv.AppendQuote(b, string(catNames[i]))
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return append(b, '}')
}

// String renders the report as "redacted email=2 phone=1; revealed phone=3".
func (r Report) String() string {
	var b strings.Builder
	write := func(label string, counts *[nCat]int) {
		b.WriteString(label)
		for i, n := range counts {
			if n != 0 {
				b.WriteByte(' ')
				b.WriteString(string(catNames[i]))
				b.WriteByte('=')
				b.WriteString(strconv.Itoa(n))
			}
		}
	}
	write("redacted", &r.redacted)
	b.WriteString("; ")
	write("revealed", &r.revealed)
	return b.String()
}
