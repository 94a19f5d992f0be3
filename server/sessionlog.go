package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
)

// sessionIDKey is the attribute under which the go-sdk logs an MCP session
// id ("server session connected", "resource subscribed", ...).
const sessionIDKey = "session_id"

// hideSessionIDs wraps l so that no Mcp-Session-Id value reaches the
// operational log: in stateful mode the id is a bearer-like secret (whoever
// holds it, with any valid token, continues the session), so the go-sdk's
// session_id attributes are replaced by a fingerprint (the first 8 bytes
// of its SHA-256), which still correlates the records of one session.
func hideSessionIDs(l *slog.Logger) *slog.Logger {
	return slog.New(sessionIDHandler{l.Handler()})
}

type sessionIDHandler struct{ h slog.Handler }

func (s sessionIDHandler) Enabled(ctx context.Context, lvl slog.Level) bool {
	return s.h.Enabled(ctx, lvl)
}

// perRequest are the go-sdk's session life-cycle messages: stateless HTTP
// opens and closes a session without an id for every request, which is
// noise, not an event (a stateful session's records keep their id).
var perRequest = map[string]bool{"server connecting": true, "server session connected": true, "server session disconnected": true}

func (s sessionIDHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	sid := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == sessionIDKey {
			sid = a.Value.String()
		}
		out.AddAttrs(hideSessionAttr(a))
		return true
	})
	if sid == "" && r.Level <= slog.LevelInfo && perRequest[r.Message] {
		return nil
	}
	return s.h.Handle(ctx, out)
}

func (s sessionIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	hidden := make([]slog.Attr, len(as))
	for i, a := range as {
		hidden[i] = hideSessionAttr(a)
	}
	return sessionIDHandler{s.h.WithAttrs(hidden)}
}

func (s sessionIDHandler) WithGroup(name string) slog.Handler {
	return sessionIDHandler{s.h.WithGroup(name)}
}

// hideSessionAttr replaces a session_id attribute (at any group depth) by
// its fingerprint.
func hideSessionAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch {
	case v.Kind() == slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, x := range g {
			out[i] = hideSessionAttr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case a.Key == sessionIDKey:
		sum := sha256.Sum256([]byte(v.String()))
		return slog.String(sessionIDKey+"_sha256", hex.EncodeToString(sum[:8]))
	}
	return a
}
