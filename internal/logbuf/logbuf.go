// Package logbuf is a concurrency-safe in-memory log sink for tests and
// evaluation commands that read back what a server logged: slog handlers
// write to it from the goroutines of concurrent tool calls.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer whose contents can be read while it is written.
// The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
