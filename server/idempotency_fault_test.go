package server_test

import (
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tenantmcp/tenantmcp/internal/guardfault"
	"github.com/tenantmcp/tenantmcp/server"
)

// TestWriteChecksAreLoadBearing is the mutation check of the two tests
// above: with the idempotency claim switched off a keyed retry writes
// twice, and with write.unconfirmed switched off a committed write whose
// taint could not be recorded is answered a plain internal error — what
// TestIdempotencyKeyRetryNeverWritesTwice and
// TestWriteUnconfirmedWhenTaintFails refuse.
func TestWriteChecksAreLoadBearing(t *testing.T) {
	if !guardfault.Enabled {
		t.Skip(guardfault.NotBuilt)
	}
	t.Run("claim", func(t *testing.T) {
		defer guardfault.Disable(guardfault.IdempotencyClaim)()
		w := newWriteFixture(t, true)
		cs := w.client(t, "ann")
		const key = "mutation-key-0123456789"
		w.store.fail.Store(true)
		if _, err := addNote(cs, "twice", key); err == nil {
			t.Fatal("the first call succeeded with the taint store down: the scenario did not run")
		}
		w.store.fail.Store(false)
		if res, err := addNote(cs, "twice", key); err != nil || res.IsError {
			t.Fatalf("retry: %+v %v", res, err)
		}
		if n := w.count(t, "twice"); n != 2 {
			t.Fatalf("%d notes after a keyed retry without the claim, want 2 (the retry test would not notice the claim's removal)", n)
		}
	})
	t.Run("unconfirmed", func(t *testing.T) {
		defer guardfault.Disable(guardfault.WriteUnconfirmed)()
		w := newWriteFixture(t, false)
		cs := w.client(t, "ann")
		w.store.fail.Store(true)
		res, err := addNote(cs, "plain", "")
		var je *jsonrpc.Error
		switch {
		case err == nil && !res.IsError:
			t.Fatal("the call succeeded with the taint store down: the scenario did not run")
		case errors.As(err, &je) && je.Code == server.CodeWriteUnconfirmed:
			t.Fatal("write.unconfirmed with the fix switched off: the fault did not take")
		}
		if n := w.count(t, "plain"); n != 1 {
			t.Fatalf("%d notes, want 1 (the write committed before its taint failed)", n)
		}
	})
}
