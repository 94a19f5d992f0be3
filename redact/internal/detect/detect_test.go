package detect

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// found returns the detected substrings of s with their kinds.
func found(s string) []string {
	var out []string
	for _, sp := range Scan(nil, s) {
		out = append(out, sp.Kind.String()+":"+s[sp.Start:sp.End])
	}
	return out
}

func TestTruePositives(t *testing.T) {
	tests := []struct {
		kind Kind
		text string // the whole input
		want string // the span that must be reported, exactly
	}{
		// e-mail
		{Email, "mail alice@example.com now", "alice@example.com"},
		{Email, "<Alice.Smith+hotel@mail.Example.co.uk>", "Alice.Smith+hotel@mail.Example.co.uk"},
		{Email, "mailto:bob_o-neil@sub-domain.example.org.", "bob_o-neil@sub-domain.example.org"},
		{Email, "josé.garcía@correo.es", "josé.garcía@correo.es"},
		{Email, "?email=carol%40example.com&x=1", "carol%40example.com"},
		{Email, `{"e":"dave@x.io"}`, "dave@x.io"},
		// phone: E.164 and international
		{Phone, "call +14155552671 today", "+14155552671"},
		{Phone, "tel +1 (202) 555-0143", "+1 (202) 555-0143"},
		{Phone, "tel: +44 (0)20 7946 0958.", "+44 (0)20 7946 0958"},
		{Phone, "+33 1 23 45 67 89", "+33 1 23 45 67 89"},
		{Phone, "+49-30-1234567", "+49-30-1234567"},
		// phone: North American
		{Phone, "(202) 555-0143", "(202) 555-0143"},
		{Phone, "phone 202-555-0143", "202-555-0143"},
		{Phone, "202.555.0143", "202.555.0143"},
		{Phone, "1 202 555 0143", "1 202 555 0143"},
		{Phone, "qty 3 202-555-0143", "202-555-0143"},
		// phone: national with trunk prefix
		{Phone, "UK 020 7946 0958", "020 7946 0958"},
		{Phone, "FR 01 23 45 67 89", "01 23 45 67 89"},
		{Phone, "DE 030/1234567", "030/1234567"},
		{Phone, "NL 06-12345678", "06-12345678"},
		{Phone, "UK mobile 07700 900123", "07700 900123"},
		// cards (Luhn-valid test numbers)
		{Card, "visa 4111111111111111", "4111111111111111"},
		{Card, "4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111"},
		{Card, "mc 5555-5555-5555-4444", "5555-5555-5555-4444"},
		{Card, "amex 3782 822463 10005", "3782 822463 10005"},
		{Card, "amex 378282246310005", "378282246310005"},
		{Card, "diners 3056 930902 5904", "3056 930902 5904"},
		{Card, "card-4012888888881881", "4012888888881881"},
		{Card, "discover 6011111111111117.", "6011111111111117"},
		// IBAN
		{IBAN, "IBAN DE89 3704 0044 0532 0130 00 please", "DE89 3704 0044 0532 0130 00"},
		{IBAN, "GB82WEST12345698765432", "GB82WEST12345698765432"},
		{IBAN, "FR14 2004 1010 0505 0001 3M02 606", "FR14 2004 1010 0505 0001 3M02 606"},
		{IBAN, "NL91ABNA0417164300", "NL91ABNA0417164300"},
		// SSN
		{SSN, "ssn 123-45-6789", "123-45-6789"},
		{SSN, "(078-05-1121)", "078-05-1121"},
		// IP
		{IP, "from 203.0.113.7 at", "203.0.113.7"},
		{IP, "dial tcp 127.0.0.1:5432: refused", "127.0.0.1"},
		{IP, "net 10.0.0.0/8", "10.0.0.0"},
		{IP, "[2001:db8::1]:443", "2001:db8::1"},
		{IP, "fe80::1ff:fe23:4567:890a%eth0", "fe80::1ff:fe23:4567:890a"},
		{IP, "2001:0db8:85a3:0000:0000:8a2e:0370:7334", "2001:0db8:85a3:0000:0000:8a2e:0370:7334"},
		{IP, "::ffff:192.0.2.128 mapped", "::ffff:192.0.2.128"},
		// secrets
		{Secret, "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"},
		{Secret, "jwt=eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."},
		{Secret, "Authorization: Bearer 2YotnFZFEjr1zCsicMWpAA", "2YotnFZFEjr1zCsicMWpAA"},
		{Secret, "authorization: basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="},
		{Secret, "key sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"},
		{Secret, "OPENAI sk-proj-abc123DEF456ghi789JKL012", "sk-proj-abc123DEF456ghi789JKL012"},
		{Secret, "token ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"},
		{Secret, "aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"},
		{Secret, "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe", "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe"},
		{Secret, "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp"},
		{Secret, "blob Zm9vYmFyQmF6UXV4MTIzNDU2Nzg5MGFiY2RlZg8Hk2 end", "Zm9vYmFyQmF6UXV4MTIzNDU2Nzg5MGFiY2RlZg8Hk2"},
		{Secret, "aws_secret=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{Secret, "password=hunter2&user=x", "hunter2"},
		{Secret, `{"db_password": "c0rrect horse"}`, "c0rrect horse"},
		{Secret, "PGPASSWORD: s3cr3t!", "s3cr3t!"},
		{Secret, "api_key=abc", "abc"},
		{Secret, "client_secret: 'x9Yz'", "x9Yz"},
		{Secret, "connect postgres://app:s3cr3t@db:5432/x failed", "s3cr3t"},
		{Secret, "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"},
		{Secret, "-----BEGIN PRIVATE KEY-----\nMIIEv (truncated", "-----BEGIN PRIVATE KEY-----\nMIIEv (truncated"},
		// spellings that need normalising (issue 16): the span is the
		// original bytes, whatever they were
		{Phone, "tel 0044 20 7946 0958 ok", "0044 20 7946 0958"},
		{Phone, "call 001 202 555 0143", "001 202 555 0143"},
		{Card, "card 4000.1568.4882.6212 exp", "4000.1568.4882.6212"},
		{Email, "write ann\uff20example.com now", "ann\uff20example.com"},
		{Email, "write ann&#64;example.com now", "ann&#64;example.com"},
		{Email, "write ann&#x40;example.com now", "ann&#x40;example.com"},
		{Email, "write ann&commat;example.com now", "ann&commat;example.com"},
		{Email, "write \uff41\uff4e\uff4e\uff20\uff45\uff58.com", "\uff41\uff4e\uff4e\uff20\uff45\uff58.com"},
		{IBAN, "iban de89 3704 0044 0532 0130 00 please", "de89 3704 0044 0532 0130 00"},
		{IBAN, "gb82west12345698765432", "gb82west12345698765432"},
		{SSN, "ssn 078 05 1120.", "078 05 1120"},
		{Email, `mail "q"@example.com now`, `"q"@example.com`},
		{Email, `<"john.doe smith"@example.org>`, `"john.doe smith"@example.org`},
		{Card, "4111\u00a01111\u00a01111\u00a01111", "4111\u00a01111\u00a01111\u00a01111"},
		{Card, "4111\u200b1111\u200b1111\u200b1111", "4111\u200b1111\u200b1111\u200b1111"},
		{Phone, "\uff10\uff10\uff14\uff14 20 7946 0958", "\uff10\uff10\uff14\uff14 20 7946 0958"},
		{SSN, "078\u201305\u20131120", "078\u201305\u20131120"},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String()+"/"+tt.want, func(t *testing.T) {
			got := found(tt.text)
			want := tt.kind.String() + ":" + tt.want
			for _, g := range got {
				if g == want {
					return
				}
			}
			t.Errorf("Scan(%q) = %q, want it to contain %q", tt.text, got, want)
		})
	}
}

// TestNearMisses: text that resembles personal data but is not, and must
// come through untouched.
func TestNearMisses(t *testing.T) {
	for _, text := range []string{
		// normalisation must not invent data
		"AT&T &amp; partners &#169; 2026",
		"version 4000.1568.4882 build",
		"1.2.3.4.5",
		"0044 20",
		"caf\u00e9 \u00bd price \uff11\uff12",
		"ab12 3456 7890",
		"\"quoted\" @ handle",
		// cards failing Luhn, or with a non-card first digit
		"4111 1111 1111 1112",
		"order 4111111111111112",
		"1234567890123456",
		"timestamp 1700000000123 ms",
		"9999-9999-9999-9995",
		// dates and times
		"2024-01-15",
		"2024-01-15T10:30:00Z",
		"2024-01-15 10:30:00.123+02:00",
		"15.01.2024 10:30",
		"01/15/2024",
		"20240115103000",
		"at 10:30:45",
		// order ids, booking refs, invoice numbers
		"ORD-2024-000123",
		"booking BK-20240115-0042",
		"invoice #100234567",
		"ref 0123456789",
		"room 1204, floor 12",
		"amount 1,234,567.89 EUR",
		"qty 12 price 300 total 3600",
		// version strings and build ids
		"v1.2.3",
		"v1.2.3.4",
		"1.2.3.4.5",
		"go1.26.8",
		"release 2.0.0-beta.1+build.20240115",
		"Chrome/120.0.6099.109",
		// hashes, UUIDs, identifiers
		"123e4567-e89b-12d3-a456-426614174000",
		"commit 3780bcb2f1e4d5a6b7c8d9e0f1a2b3c4d5e6f7a8",
		"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"getBookingConfirmationNumberForGuestReservation",
		"the_quick_brown_fox_jumps_over_the_lazy_dog_2024",
		"/api/v1/hotels/H123/bookings/B456/confirmations",
		"tok_email_vdu2gslsz7zh5lmlmp4t4dux",
		// e-mail look-alikes
		"@mention",
		"user@localhost",
		"pkg@1.2.3",
		"a@b",
		"std::vector<int>",
		// IPv6 look-alikes
		"00:1a:2b:3c:4d:5e",
		"a::b",
		"10:30",
		// prose around secrets
		"Bearer authentication is required",
		`WWW-Authenticate: Bearer realm="example", resource_metadata="https://x"`,
		"invalid token: expired",
		"token: signature is invalid",
		"the password is required",
		"secret sauce",
		// SSN look-alikes
		"000-12-3456",
		"666-12-3456",
		"912-34-5678",
		"123-00-4567",
		"123456789",
		// IBAN look-alikes
		"DE89 3704 0044 0532 0130 02",
		"XX89370400440532013000",
		"GB82WEST1234569876543",
		// phone look-alikes
		"+12",
		"call 555",
		"0 1 2 3 4 5 6 7 8 9",
		"102-555-0143",
		"202-155-0143",
		"sizes 10 20 30 4000",
	} {
		if got := found(text); len(got) != 0 {
			t.Errorf("Scan(%q) = %q, want nothing", text, got)
		}
	}
}

func TestAdjacentPhones(t *testing.T) {
	got := found("call +1 202 555 0143 020 7946 0958 now")
	want := []string{"phone:+1 202 555 0143", "phone:020 7946 0958"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSpansMergeAndOrder(t *testing.T) {
	s := "pw postgres://u:p4ss@db.example.com/x and alice@example.com then +1 202 555 0143"
	sp := Scan(nil, s)
	for i := 1; i < len(sp); i++ {
		if sp[i].Start < sp[i-1].End {
			t.Fatalf("overlapping spans %v", sp)
		}
	}
	got := found(s)
	want := []string{"secret:p4ss@db.example.com", "email:alice@example.com", "phone:+1 202 555 0143"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSpansKeepRunesWhole(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("é", 100) + "@example.com",
		"x" + strings.Repeat("\ufffd", 50) + "%40example.com",
		"password=" + strings.Repeat("日本", 1000),
		`password="` + strings.Repeat("日本", 1000) + `"`,
	} {
		for _, sp := range Scan(nil, s) {
			if !utf8.ValidString(s[sp.Start:sp.End]) {
				t.Errorf("span %v of %.20q... splits a rune", sp, s)
			}
		}
	}
}

func TestScanAppends(t *testing.T) {
	dst := []Span{{0, 1, Email}}
	dst = Scan(dst, "x alice@example.com")
	if len(dst) != 2 || dst[0] != (Span{0, 1, Email}) || dst[1].Start != 2 {
		t.Errorf("Scan did not append: %v", dst)
	}
}

func TestLuhn(t *testing.T) {
	for s, want := range map[string]bool{
		"4111111111111111": true, "4111111111111112": false, "79927398713": true,
		"0": true, "": false, "4111 1111 1111 1111": true,
	} {
		if got := luhn(s); got != want {
			t.Errorf("luhn(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestMod97(t *testing.T) {
	if got := mod97([]byte("GB82WEST12345698765432")); got != 1 {
		t.Errorf("mod97 = %d, want 1", got)
	}
	if got := mod97([]byte("GB83WEST12345698765432")); got == 1 {
		t.Errorf("mod97 of a wrong check digit = 1")
	}
}

func FuzzScan(f *testing.F) {
	for _, s := range []string{
		"alice@example.com", "+1 (202) 555-0143", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00",
		"123-45-6789", "[2001:db8::1]:443", "password=x", "eyJa.eyJb.c", "-----BEGIN PRIVATE KEY-----",
		"a%40b.co", "::::", "@@@", "+((((", "x://a:b@", "Bearer ", "\xff\xfe@\x80.com",
		"ann&#64;ex.com &amp;", "b\uff20ex.com 0044 20 7946 0958", "\"q\"@ex.com", "4000.1568.4882.6212\u200b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp := Scan(nil, s)
		end := 0
		for _, x := range sp {
			if x.Start < end || x.End <= x.Start || x.End > len(s) || x.Kind < Secret || x.Kind > IP {
				t.Fatalf("bad span %+v after %d in %q: %v", x, end, s, sp)
			}
			end = x.End
		}
		if utf8.ValidString(s) {
			for _, x := range sp {
				if !utf8.ValidString(s[x.Start:x.End]) {
					t.Fatalf("span %+v splits a UTF-8 sequence in %q", x, s)
				}
			}
		}
	})
}

func TestNextDigit(t *testing.T) {
	naive := func(s string, i int) int {
		for i < len(s) && (s[i] < '0' || s[i] > '9') {
			i++
		}
		return i
	}
	// Every byte value at every position of a 24-byte window.
	base := []byte("abcdefgh:/;@ \xff\x80ABCDEFGHIJ")
	for pos := range base {
		for b := 0; b < 256; b++ {
			s := []byte(string(base))
			s[pos] = byte(b)
			for start := 0; start <= len(s); start++ {
				if got, want := nextDigit(string(s), start), naive(string(s), start); got != want {
					t.Fatalf("nextDigit(%q, %d) = %d, want %d", s, start, got, want)
				}
			}
		}
	}
}

// Several normalised spellings in one text: every span maps back onto
// exactly the original bytes of its detection, across edits that grow,
// shrink and drop characters.
func TestNormalisedSpansMapBack(t *testing.T) {
	text := "a&amp;b ann&#64;example.com, card 4111\u200b1111\u200b1111\u200b1111; " +
		"\uff42\uff4f\uff42\uff20\uff45\uff58.com then 078\u201305\u20131120 &lt;ok&gt; x@y.io"
	got := found(text)
	want := []string{"email:ann&#64;example.com", "card:4111\u200b1111\u200b1111\u200b1111",
		"email:\uff42\uff4f\uff42\uff20\uff45\uff58.com", "ssn:078\u201305\u20131120", "email:x@y.io"}
	if !slices.Equal(got, want) {
		t.Fatalf("Scan = %q\nwant   %q", got, want)
	}
}
