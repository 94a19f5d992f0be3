package server

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Defaults for LogLimit fields left zero.
const (
	DefaultLogBurst    = 5
	DefaultLogInterval = 10 * time.Second
)

// maxLogKeys bounds the limiter's table; kinds beyond it share one budget.
const maxLogKeys = 1024

// LogLimit bounds the operational log (Options.Logger, which the go-sdk
// writes to as well) at level Warn and above: records of one kind, that is
// with the same level, message and "tool" attribute, pass at most Burst
// times per Interval; the rest are dropped and counted, and the next record
// of that kind that passes carries the count as "suppressed". During a
// database outage every call fails the same way, and without a bound the
// log would grow by thousands of identical lines a second. Info and Debug
// records, and the audit log (one record per call, by design), are never
// limited.
type LogLimit struct {
	// Burst is how many records of one kind pass per Interval; zero means
	// DefaultLogBurst, negative means no limit.
	Burst int
	// Interval is the window; zero means DefaultLogInterval (New refuses
	// a negative one).
	Interval time.Duration
}

func (l LogLimit) withDefaults() LogLimit {
	if l.Burst == 0 {
		l.Burst = DefaultLogBurst
	}
	if l.Interval <= 0 {
		l.Interval = DefaultLogInterval
	}
	return l
}

// logLimiter counts records per kind in fixed windows.
type logLimiter struct {
	limit LogLimit
	now   func() time.Time

	mu    sync.Mutex
	kinds map[string]*logWindow
}

type logWindow struct {
	start      time.Time
	passed     int
	suppressed int
}

// allow reports whether a record of kind key may be written now and, if
// so, how many of its kind were dropped since the last one written.
func (l *logLimiter) allow(key string) (ok bool, suppressed int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.kinds[key]
	if w == nil {
		if len(l.kinds) >= maxLogKeys {
			for k, old := range l.kinds {
				if now.Sub(old.start) >= l.limit.Interval && old.suppressed == 0 {
					delete(l.kinds, k)
				}
			}
			if len(l.kinds) >= maxLogKeys {
				key = "" // the overflow kind
			}
		}
		if w = l.kinds[key]; w == nil {
			w = &logWindow{start: now}
			l.kinds[key] = w
		}
	}
	if now.Sub(w.start) >= l.limit.Interval {
		w.start, w.passed = now, 0
	}
	if w.passed >= l.limit.Burst {
		w.suppressed++
		return false, 0
	}
	w.passed++
	suppressed, w.suppressed = w.suppressed, 0
	return true, suppressed
}

// limitedHandler applies a logLimiter to the records of inner.
type limitedHandler struct {
	inner slog.Handler
	lim   *logLimiter
	tool  string // a "tool" attribute added with WithAttrs
}

func newLimitedHandler(inner slog.Handler, limit LogLimit, now func() time.Time) slog.Handler {
	limit = limit.withDefaults()
	if limit.Burst < 0 {
		return inner
	}
	return &limitedHandler{inner: inner, lim: &logLimiter{limit: limit, now: now, kinds: map[string]*logWindow{}}}
}

func (h *limitedHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

func (h *limitedHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.inner.Handle(ctx, r)
	}
	tool := h.tool
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "tool" {
			tool = a.Value.String()
			return false
		}
		return true
	})
	ok, suppressed := h.lim.allow(r.Level.String() + "\x00" + r.Message + "\x00" + tool)
	if !ok {
		return nil
	}
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", suppressed))
	}
	return h.inner.Handle(ctx, r)
}

func (h *limitedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.inner = h.inner.WithAttrs(attrs)
	for _, a := range attrs {
		if a.Key == "tool" {
			c.tool = a.Value.String()
		}
	}
	return &c
}

func (h *limitedHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.inner = h.inner.WithGroup(name)
	return &c
}
