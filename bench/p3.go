package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/examples/hotel/hotel"
	"github.com/tenantmcp/tenantmcp/internal/mint"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// mixedText is log- and notes-like text of about size bytes: prose, ids,
// dates, amounts, paths and versions, with some e-mail addresses, phone
// numbers, card numbers, IBANs, IP addresses and a bearer credential. All
// of it is invented test data.
func mixedText(size int) string {
	parts := []string{
		"Room 512 was upgraded to a junior suite on 2026-03-14 after the guest reported a noisy air conditioner. ",
		"Reservation RSV-2026-004417 moved to rate code CORP-FLEX, 3 nights at 184.00 EUR, breakfast included. ",
		"Reach the guest at +33 1 70 36 39 50 or by mail to marie.dupont@example.org about the late arrival. ",
		"GET /v2/hotels/acme-paris/rooms?floor=5&limit=25 returned 200 in 8.4ms (31 kB); cache hit ratio 0.93. ",
		"Deposit charged to card 5555 5555 5555 4444, authorisation 0x3fa9, settlement expected on 16.03.2026. ",
		"Release 2.14.1 rolled out to the booking service; trace id 9f86d081-884c-4d63-9c1e-0f1ad7a2d8b1. ",
		"Housekeeping finished the fourth floor at 11:40; minibar restocked, two towels replaced in room 418. ",
		"Webhook from 198.51.100.23 retried with header Authorization: Bearer 7Fjfp0ZBr1KtDRbnfVdmIw. ",
		"Refund wired to IBAN FR14 2004 1010 0505 0001 3M02 606 for the cancelled night, reference RF-88213. ",
		"Airport shuttle booked for 06:15 from the main entrance; flight AF1234 departs terminal 2E at 08:05. ",
	}
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		b.WriteString(parts[i%len(parts)])
	}
	return b.String()
}

// emailRE is the baseline of the detector figure: one regular expression
// for e-mail addresses alone, the cheapest scan anyone would run.
var emailRE = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)

func runP3(ctx context.Context, e *env) []Row {
	const fig = "P3"
	rows := []Row{
		{Figure: fig, Case: "serializer, 50-row list_bookings page (tagged struct)", Unit: unitMBps,
			Baseline:  "encoding/json.Marshal of hotel.BookingsOut",
			Candidate: "Redactor.ForScope(manager).JSON of the same value (names revealed, e-mails masked, free text scanned)"},
		{Figure: fig, Case: "serializer, the same page as map[string]any", Unit: unitMBps,
			Baseline:  "encoding/json.Marshal of the page decoded into any",
			Candidate: "Redactor.ForScope(manager).JSON of the same value (no tags: every string scanned by the detectors)"},
		{Figure: fig, Case: "detectors on 64 KiB of mixed text", Unit: unitMBps,
			Baseline:  "one e-mail regexp (FindAllStringIndex) over the text",
			Candidate: "Scoped.String: every detector (e-mail, phone, card, IBAN, SSN, IP, secrets) and the redaction of what they find"},
	}
	h, err := e.hotelDB(ctx)
	if err != nil {
		return failAll(rows, err)
	}
	gp, err := newGuardPath(ctx, h)
	if err != nil {
		return failAll(rows, err)
	}
	_, page, err := gp.baseline(ctx, 0)
	gp.close()
	if err != nil {
		return failAll(rows, err)
	}
	red, err := redact.New(hotel.Redaction)
	if err != nil {
		return failAll(rows, err)
	}
	sc, err := mint.Scope(benchSubject, []scope.Grant{{Level: hotel.LevelChain, ID: benchChain}}, []string{benchRole})
	if err != nil {
		return failAll(rows, err)
	}
	pageJSON, err := json.Marshal(page)
	if err != nil {
		return failAll(rows, err)
	}
	var generic any
	if err := json.Unmarshal(pageJSON, &generic); err != nil {
		return failAll(rows, err)
	}
	genericJSON, _ := json.Marshal(generic)

	serializer := func(r Row, v any, size int) Row {
		// Each call gets its own Scoped, as each tool call does.
		if _, err := red.ForScope(sc).JSON(v); err != nil {
			r.Failed = err.Error()
			return r
		}
		arms := sameInputs(e.batch(), []string{"encoding/json", "redact"},
			func(context.Context, int) error { _, err := json.Marshal(v); return err },
			func(context.Context, int) error { _, err := red.ForScope(sc).JSON(v); return err },
		)
		s, err := rounds(ctx, arms, e.budget(3*time.Second), e.minRounds(), 1000)
		if err != nil {
			r.Failed = err.Error()
			return r
		}
		r = r.measured(compare(s, 0, 1), size)
		r.Note = fmt.Sprintf("%d bytes of JSON per value; MB/s of encoding/json's output size for both", size)
		return r
	}
	rows[0] = serializer(rows[0], page, len(pageJSON))
	rows[1] = serializer(rows[1], generic, len(genericJSON))

	text := mixedText(64 << 10)
	scoped := red.ForScope(sc)
	if out := scoped.String(text); out == text {
		rows[2].Failed = "the detectors found nothing in the mixed text"
		return rows
	}
	arms := sameInputs(e.batch(), []string{"regexp", "detectors"},
		func(context.Context, int) error { _ = emailRE.FindAllStringIndex(text, -1); return nil },
		func(context.Context, int) error { _ = scoped.String(text); return nil },
	)
	s, err := rounds(ctx, arms, e.budget(3*time.Second), e.minRounds(), 1000)
	if err != nil {
		rows[2].Failed = err.Error()
		return rows
	}
	rows[2] = rows[2].measured(compare(s, 0, 1), len(text))
	return rows
}
