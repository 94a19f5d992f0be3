package redact

import (
	"context"
	"log/slog"

	"github.com/tenantmcp/tenantmcp/scope"
)

// Handler wraps next so that every record passes through the redactor
// before it is written:
//
//   - the message and every string attribute are redacted as free text;
//   - an error attribute becomes its redacted message;
//   - any other non-scalar attribute (structs, maps, slices, fmt.Stringers)
//     is replaced by its redacted JSON, so pii tags apply to logged values
//     as they do to results, and a String method cannot smuggle a value
//     past the redactor;
//   - numbers, booleans, times and durations pass unchanged; groups and
//     slog.LogValuer values are resolved and redacted recursively;
//   - a scope.Scope attribute passes unchanged: the subject and grants of
//     the caller are what an audit record exists to show. Report values pass
//     unchanged too (they are counts).
//
// The policy is the Redactor's, with two differences that suit a log read
// by operators rather than by the caller: no role reveals anything, and the
// scope comes from the context given to the logger's *Context methods (for
// example slog.InfoContext(ctx, …)) and decides the tenant of tokens. Without
// a scope in that context every category is dropped. Attributes attached with
// Logger.With are redacted once, when they are attached, as with no scope.
func (r *Redactor) Handler(next slog.Handler) slog.Handler {
	if r == nil {
		r = defaultRedactor
	}
	return &handler{r: r, next: next}
}

type handler struct {
	r    *Redactor
	next slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	sc := h.r.forLog(ctx)
	out := slog.NewRecord(rec.Time, rec.Level, sc.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(sc.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	sc := h.r.forLog(context.Background())
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = sc.attr(a)
	}
	return &handler{r: h.r, next: h.next.WithAttrs(red)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, next: h.next.WithGroup(name)}
}

// attr redacts one attribute.
func (s *Scoped) attr(a slog.Attr) slog.Attr {
	v := a.Value
	if v.Kind() == slog.KindLogValuer {
		switch v.Any().(type) {
		case scope.Scope, Report:
			return a
		}
		v = v.Resolve()
	}
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, s.String(v.String()))
	case slog.KindGroup:
		as := v.Group()
		red := make([]slog.Attr, len(as))
		for i, x := range as {
			red[i] = s.attr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
	case slog.KindAny:
		x := v.Any()
		switch t := x.(type) {
		case error:
			return slog.String(a.Key, s.Error(t))
		case scope.Scope, Report:
			return slog.Attr{Key: a.Key, Value: v}
		}
		b, err := s.JSON(x)
		if err != nil {
			return slog.String(a.Key, "!REDACT-ERROR "+s.Error(err))
		}
		if len(b) > 0 && b[0] == '"' {
			var str string
			if jsonUnquote(b, &str) {
				return slog.String(a.Key, str)
			}
		}
		return slog.Any(a.Key, loggedJSON(b))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// loggedJSON is redacted JSON in a log record: raw JSON for slog's JSON
// handler, its text for the text handler.
type loggedJSON []byte

func (j loggedJSON) MarshalJSON() ([]byte, error) { return j, nil }
func (j loggedJSON) MarshalText() ([]byte, error) { return j, nil }
