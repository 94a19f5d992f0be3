package flow

import (
	"errors"
	"strings"
	"testing"
)

// metaPolicy is testPolicy with the opt-in that lets _meta name a
// declassification reason.
var metaPolicy = strings.Replace(testPolicy, `"version": 1,`, `"version": 1, "declassify_from_meta": true,`, 1)

// TestConsent: by default a reason in _meta grants nothing (the model's
// host writes _meta); a denial that a rule could lift carries the rule as
// an Offer, and only CallInfo.Consent (the user's accept) applies it, once,
// to the destination the rule names.
func TestConsent(t *testing.T) {
	carol := CallInfo{Subject: "carol", SessionID: "s1"}
	card := payment{Card: "4111111111111111", Email: ann.Email}
	for _, pol := range []struct{ name, src string }{
		{"default", testPolicy},
		{"explicit false", strings.Replace(testPolicy, `"version": 1,`, `"version": 1, "declassify_from_meta": false,`, 1)},
	} {
		t.Run(pol.name, func(t *testing.T) {
			f := newFixture(t, pol.src)
			f.read(t, carol, "pay", card)

			// The model sets _meta itself: denied as if it had not.
			selfGranted := carol
			selfGranted.Meta = map[string]any{MetaDeclassify: "invoice"}
			_, den := f.begin(selfGranted, "mail", map[string]any{"to": ann.Email, "body": "x"})
			if den == nil || den.Rule != RuleCategory {
				t.Fatalf("_meta declassification without opt-in: denial %v, want %s", den, RuleCategory)
			}
			if den.Witness.Declassify != "" {
				t.Errorf("witness names declassification %q that was not applied", den.Witness.Declassify)
			}
			if den.Offer != "invoice" {
				t.Fatalf("offer %q, want invoice", den.Offer)
			}
			ex := den.Explain()
			for _, want := range []string{"mail", ann.Email, "payment", "pay", `"invoice"`} {
				if !strings.Contains(ex, want) {
					t.Errorf("explanation lacks %q: %s", want, ex)
				}
			}
			if strings.Contains(ex, "4111") {
				t.Errorf("explanation shows the card: %s", ex)
			}

			// The user accepted: allowed once, noted as consent.
			consented := carol
			consented.Consent = den.Offer
			call, den2 := f.begin(consented, "mail", map[string]any{"to": ann.Email, "body": "x"})
			if den2 != nil {
				t.Fatalf("consented call denied: %v", den2)
			}
			if call.Note() != "declassified:invoice (user consent)" {
				t.Errorf("note %q", call.Note())
			}
			// Once: the next call without consent is denied again; the
			// taint did not change.
			if _, den3 := f.begin(carol, "mail", map[string]any{"to": ann.Email, "body": "x"}); den3 == nil || !errors.Is(den3, ErrDenied) {
				t.Errorf("call after the consented one: %v, want denied", den3)
			}
			// A consent cannot be carried to a destination its rule does
			// not name.
			other := carol
			other.Consent = "invoice"
			if _, den4 := f.begin(other, "mail", map[string]any{"to": "eve@evil.example", "body": "x"}); den4 == nil || den4.Rule != RuleDeclassify {
				t.Errorf("consent to another person: %v, want %s", den4, RuleDeclassify)
			}
			// No rule could allow PII + payment to a stranger: no offer.
			if den5 := f.send(carol, "mail", "eve@evil.example"); den5 == nil {
				t.Error("stranger: allowed")
			} else if den5.Offer != "" {
				t.Errorf("stranger: offer %q, want none", den5.Offer)
			}
		})
	}
	// With the opt-in, _meta alone declassifies (the policy's explicit choice).
	f := newFixture(t, metaPolicy)
	f.read(t, carol, "pay", card)
	ci := carol
	ci.Meta = map[string]any{MetaDeclassify: "invoice"}
	if call, den := f.begin(ci, "mail", map[string]any{"to": ann.Email, "body": "x"}); den != nil || call.Note() != "declassified:invoice" {
		t.Errorf("opt-in: denial %v", den)
	}
	if _, err := ParsePolicy("bad.json", []byte(strings.Replace(testPolicy, `"version": 1,`, `"version": 1, "declassify_from_meta": "yes",`, 1))); !errors.Is(err, ErrPolicy) {
		t.Errorf("non-boolean opt-in: %v, want ErrPolicy", err)
	}
}
