package flow

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/tenantmcp/tenantmcp/scope"
)

// The per-call cost of the flow check, against a baseline measured in the
// same run: decoding the same arguments into the sink's input type, which
// every call pays anyway (server.typedCall).

func benchFixture(b *testing.B) (*fixture, CallInfo) {
	f := newFixture(b, testPolicy)
	ci := CallInfo{Subject: "bench", SessionID: "s", CallID: "c"}
	f.read(b, ci, "guests", annOnly)
	f.read(b, ci, "rooms", roomsOut{Rooms: []string{"101"}})
	return f, ci
}

func BenchmarkBaselineDecodeArgs(b *testing.B) {
	args := json.RawMessage(`{"to":"desk@staff.example","body":"Your booking is confirmed."}`)
	b.ReportAllocs()
	for b.Loop() {
		var in mailIn
		if err := json.Unmarshal(args, &in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSinkAllowed is the check of an allowed sink call from a tainted
// session (the destination matches a category rule and a clearance).
func BenchmarkSinkAllowed(b *testing.B) {
	f, ci := benchFixture(b)
	ci.Args = json.RawMessage(`{"to":"desk@staff.example","body":"Your booking is confirmed."}`)
	t := f.tools["mail"]
	b.ReportAllocs()
	for b.Loop() {
		if _, den := t.Begin(context.Background(), ci); den != nil {
			b.Fatal(den)
		}
	}
}

// BenchmarkSinkOwner: allowed because the destination is the data subject.
func BenchmarkSinkOwner(b *testing.B) {
	f := newFixture(b, testPolicy)
	ci := CallInfo{Subject: "bench", SessionID: "s", CallID: "c"}
	f.read(b, ci, "guests", annOnly)
	ci.Args = json.RawMessage(`{"to":"ann@guest.example","body":"Your booking is confirmed."}`)
	t := f.tools["mail"]
	b.ReportAllocs()
	for b.Loop() {
		if _, den := t.Begin(context.Background(), ci); den != nil {
			b.Fatal(den)
		}
	}
}

// BenchmarkSinkURL: an allowed webhook call (URL parsing).
func BenchmarkSinkURL(b *testing.B) {
	f := newFixture(b, testPolicy)
	ci := CallInfo{Subject: "bench", SessionID: "s", CallID: "c"}
	f.read(b, ci, "rooms", roomsOut{})
	ci.Args = json.RawMessage(`{"url":"https://hooks.eu.corp.example/v1/in?x=1","body":"{}"}`)
	t := f.tools["hook"]
	b.ReportAllocs()
	for b.Loop() {
		if _, den := t.Begin(context.Background(), ci); den != nil {
			b.Fatal(den)
		}
	}
}

// BenchmarkSinkDenied includes building the witness.
func BenchmarkSinkDenied(b *testing.B) {
	f, ci := benchFixture(b)
	ci.Args = json.RawMessage(`{"url":"https://webhook.evil.example/in","body":"{}"}`)
	t := f.tools["hook"]
	b.ReportAllocs()
	for b.Loop() {
		if _, den := t.Begin(context.Background(), ci); den == nil {
			b.Fatal("allowed")
		}
	}
}

// BenchmarkNonSinkBegin is what every other call pays before its handler.
func BenchmarkNonSinkBegin(b *testing.B) {
	f, ci := benchFixture(b)
	t := f.tools["rooms"]
	b.ReportAllocs()
	for b.Loop() {
		t.Begin(context.Background(), ci)
	}
}

// BenchmarkRecord labels a result with personal data (owner extraction
// included); the redaction report comes from the real redactor, outside
// the loop.
func BenchmarkRecord(b *testing.B) {
	f, ci := benchFixture(b)
	t := f.tools["guests"]
	red := testRedactor.ForScope(scope.Scope{})
	if _, err := red.JSON(annOnly); err != nil {
		b.Fatal(err)
	}
	rep := red.Report()
	call, _ := t.Begin(context.Background(), ci)
	b.ReportAllocs()
	for b.Loop() {
		call.Record(context.Background(), annOnly, rep)
	}
}

// BenchmarkParallelSink: the check under contention, many subjects.
func BenchmarkParallelSink(b *testing.B) {
	f, _ := benchFixture(b)
	t := f.tools["mail"]
	args := json.RawMessage(`{"to":"desk@staff.example","body":"x"}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ci := CallInfo{Subject: "p" + string(rune('a'+len(args)%26)), Args: args}
		for pb.Next() {
			t.Begin(context.Background(), ci)
		}
	})
}

// BenchmarkRecordPage is the steady state of a P5-like read: a page of
// 50 guests (past maxOwners, so the data subjects are unknown) recorded
// again and again by one subject, whose taint already holds it.
func BenchmarkRecordPage(b *testing.B) {
	f, ci := benchFixture(b)
	t := f.tools["guests"]
	var page guestsOut
	for i := range 50 {
		page.Guests = append(page.Guests, guest{ID: int64(i), Name: "Guest " + strconv.Itoa(i), Email: "g" + strconv.Itoa(i) + "@guest.example"})
	}
	red := testRedactor.ForScope(scope.Scope{})
	if _, err := red.JSON(page); err != nil {
		b.Fatal(err)
	}
	rep := red.Report()
	call, _ := t.Begin(context.Background(), ci)
	if err := call.Record(context.Background(), page, rep); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := call.Record(context.Background(), page, rep); err != nil {
			b.Fatal(err)
		}
	}
}
