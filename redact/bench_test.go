package redact

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/redact/internal/detect"
)

// A realistic tool result: one page of 50 bookings with guest details, as
// list_bookings of the hotel example returns it.

type benchAddress struct {
	Line1   string `json:"line1"`
	City    string `json:"city"`
	Postal  string `json:"postal_code"`
	Country string `json:"country"`
}

type benchGuest struct {
	ID          string       `json:"id"`
	FirstName   string       `json:"first_name" pii:"name"`
	LastName    string       `json:"last_name" pii:"name"`
	Email       string       `json:"email" pii:"email"`
	Phone       string       `json:"phone,omitempty" pii:"phone"`
	Address     benchAddress `json:"address" pii:"address"`
	Nationality string       `json:"nationality"`
	Loyalty     string       `json:"loyalty_tier,omitempty"`
	VIP         bool         `json:"vip"`
}

type benchPayment struct {
	Method string `json:"method"`
	Card   string `json:"card,omitempty" pii:"card"`
	Status string `json:"status"`
}

type benchBooking struct {
	ID         string       `json:"id"`
	HotelID    string       `json:"hotel_id"`
	HotelName  string       `json:"hotel_name"`
	Room       string       `json:"room"`
	RoomType   string       `json:"room_type"`
	CheckIn    time.Time    `json:"check_in"`
	CheckOut   time.Time    `json:"check_out"`
	Nights     int          `json:"nights"`
	Adults     int          `json:"adults"`
	Children   int          `json:"children"`
	Status     string       `json:"status"`
	RateCode   string       `json:"rate_code"`
	TotalCents int64        `json:"total_cents"`
	Currency   string       `json:"currency"`
	Guest      benchGuest   `json:"guest"`
	Payment    benchPayment `json:"payment"`
	Notes      string       `json:"notes,omitempty"`
	CreatedAt  time.Time    `json:"created_at"`
}

type benchPage struct {
	Bookings   []benchBooking `json:"bookings"`
	Total      int            `json:"total"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

func bookingPage() benchPage {
	first := []string{"Alice", "Bob", "Chiara", "Dmitri", "Emeka", "Fatima", "Gustav", "Hana", "Ivan", "Jun"}
	last := []string{"Smith", "Okafor", "Rossi", "Ivanova", "Müller", "Haddad", "Nakamura", "Silva", "Dubois", "Kowalski"}
	notes := []string{
		"Late arrival, requests a quiet room away from the lift.",
		"",
		"Anniversary stay; champagne on arrival (order ORD-2024-000123).",
		"Call guest at +44 20 7946 0958 before 18:00 to confirm parking.",
		"Allergic to feathers, hypoallergenic pillows in room 1204.",
		"Corporate rate, invoice to accounts@example-corp.com.",
		"",
		"Arriving on flight BA 117 at 14:35, shuttle booked for 15:30.",
	}
	base := time.Date(2024, 6, 1, 15, 0, 0, 0, time.UTC)
	var p benchPage
	for i := 0; i < 50; i++ {
		f, l := first[i%len(first)], last[(i*7)%len(last)]
		in := base.AddDate(0, 0, i%20)
		p.Bookings = append(p.Bookings, benchBooking{
			ID:         fmt.Sprintf("BK-2024-%06d", 1000+i),
			HotelID:    fmt.Sprintf("h-%02d", i%4),
			HotelName:  []string{"Grand Central", "Harbour View", "Old Town Inn", "Airport Suites"}[i%4],
			Room:       fmt.Sprintf("%d%02d", 1+i%9, i%30),
			RoomType:   []string{"double", "twin", "suite", "single"}[i%4],
			CheckIn:    in,
			CheckOut:   in.AddDate(0, 0, 1+i%5),
			Nights:     1 + i%5,
			Adults:     1 + i%2,
			Children:   i % 3,
			Status:     []string{"confirmed", "checked_in", "cancelled", "no_show"}[i%4],
			RateCode:   "BAR-FLEX",
			TotalCents: int64(12900 * (1 + i%5)),
			Currency:   "EUR",
			Guest: benchGuest{
				ID:          fmt.Sprintf("g-%05d", 500+i),
				FirstName:   f,
				LastName:    l,
				Email:       strings.ToLower(f+"."+l) + "@example.com",
				Phone:       fmt.Sprintf("+44 20 7946 %04d", i),
				Address:     benchAddress{Line1: fmt.Sprintf("%d High Street", 1+i), City: "London", Postal: "SW1A 1AA", Country: "GB"},
				Nationality: []string{"GB", "DE", "IT", "NG", "JP"}[i%5],
				Loyalty:     []string{"", "silver", "gold"}[i%3],
				VIP:         i%10 == 0,
			},
			Payment:   benchPayment{Method: "card", Card: "4111 1111 1111 1111", Status: "authorised"},
			Notes:     notes[i%len(notes)],
			CreatedAt: in.AddDate(0, -1, 0),
		})
	}
	p.Total = 1234
	p.NextCursor = "eyJvZmZzZXQiOjUwfQ"
	return p
}

// BenchmarkBookingPage compares redact with encoding/json on the same page,
// in the same run: sub-benchmarks for ns/op and allocations, and Ratio,
// which times both in alternation and reports redact/json as "x-json".
func BenchmarkBookingPage(b *testing.B) {
	page := bookingPage()
	r, err := New(Options{Reveal: map[string][]Category{"front_desk": {Phone, Name}}})
	if err != nil {
		b.Fatal(err)
	}
	noRole := r.ForScope(testScope(b, "chain", "acme"))
	frontDesk := r.ForScope(testScope(b, "chain", "acme", "front_desk"))
	ref, _ := json.Marshal(page)

	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(ref)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(page); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redact", func(b *testing.B) {
		b.SetBytes(int64(len(ref)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := noRole.JSON(page); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redact_front_desk", func(b *testing.B) {
		b.SetBytes(int64(len(ref)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := frontDesk.JSON(page); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Ratio", func(b *testing.B) {
		var tj, tr time.Duration
		for b.Loop() {
			t0 := time.Now()
			json.Marshal(page)
			t1 := time.Now()
			noRole.JSON(page)
			tr += time.Since(t1)
			tj += t1.Sub(t0)
		}
		b.ReportMetric(float64(tr)/float64(tj), "x-json")
		b.ReportMetric(float64(tj.Nanoseconds())/float64(b.N), "json-ns/op")
		b.ReportMetric(float64(tr.Nanoseconds())/float64(b.N), "redact-ns/op")
	})
}

// mixedText is log-and-notes-like text: mostly prose, ids, dates, numbers
// and URLs, with some personal data and a few secrets.
func mixedText(size int) string {
	parts := []string{
		"Guest checked in at 2024-06-01T15:04:05Z, booking BK-2024-001042, room 1204, rate BAR-FLEX 129.00 EUR. ",
		"Please call the guest on +44 20 7946 0958 or write to alice.smith@example.com before arrival. ",
		"Request GET /api/v1/hotels/h-02/bookings?limit=50&cursor=abc took 12.5ms (status 200, 48213 bytes). ",
		"Invoice INV-000123 paid by card 4111 1111 1111 1111; refund of 35.50 EUR pending since 01.06.2024. ",
		"Version 1.22.4 deployed on build 20240601-1530 by ops; uuid 123e4567-e89b-12d3-a456-426614174000. ",
		"The quick brown fox jumps over the lazy dog, and the housekeeping team restocked the minibar twice. ",
		"Upstream 203.0.113.7:443 answered; retrying with Authorization: Bearer 2YotnFZFEjr1zCsicMWpAA. ",
		"Transfer to IBAN DE89 3704 0044 0532 0130 00 confirmed; order total 1,234.56, 3 nights, 2 adults. ",
		"Breakfast served 07:00-10:30 in the Garden Room; late checkout until 14:00 on request, subject to availability. ",
		"Parking space P-17 reserved; shuttle departs at 15:30 from terminal 5, gate B12, flight BA117. ",
	}
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		b.WriteString(parts[i%len(parts)])
	}
	return b.String()
}

// BenchmarkDetect reports detector throughput (MB/s) on mixed text, with a
// single regular expression for e-mail addresses alone as the baseline.
func BenchmarkDetect(b *testing.B) {
	text := mixedText(64 << 10)
	clean := strings.Repeat("The quick brown fox jumps over the lazy dog; room 12 is ready at 14:00. ", 900)
	b.Run("scan_mixed", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		var sp []detect.Span
		for b.Loop() {
			sp = detect.Scan(sp[:0], text)
		}
	})
	b.Run("scan_clean", func(b *testing.B) {
		b.SetBytes(int64(len(clean)))
		var sp []detect.Span
		for b.Loop() {
			sp = detect.Scan(sp[:0], clean)
		}
	})
	// The same text with one HTML character reference: the whole text is
	// scanned in normalised form (the slow path).
	normText := "write to ann&#64;example.com. " + text
	b.Run("scan_mixed_normalised", func(b *testing.B) {
		b.SetBytes(int64(len(normText)))
		var sp []detect.Span
		for b.Loop() {
			sp = detect.Scan(sp[:0], normText)
		}
	})
	b.Run("redact_string_mixed", func(b *testing.B) {
		sc := ForTest()
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			_ = sc.String(text)
		}
	})
	b.Run("baseline_regexp_email_only", func(b *testing.B) {
		re := regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			_ = re.FindAllStringIndex(text, -1)
		}
	})
}
