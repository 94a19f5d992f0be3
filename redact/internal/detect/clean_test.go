package detect

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// checkClean fails when Clean vouches for s but the detectors find a span
// in it, or when Scan and the detectors disagree.
func checkClean(t *testing.T, s string) {
	t.Helper()
	full := scanAll(nil, s)
	if Clean(s) && len(full) != 0 {
		t.Fatalf("Clean(%q) is true but the detectors find %v", s, full)
	}
	if got := Scan(nil, s); !slices.Equal(got, full) {
		t.Fatalf("Scan(%q) = %v, detectors %v", s, got, full)
	}
	checkCleanCopy(t, s)
}

// checkCleanCopy fails when CleanCopy(s) is not Clean(s) and "s needs no
// JSON escaping", or when it did not copy s.
func checkCleanCopy(t *testing.T, s string) {
	t.Helper()
	plain := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x80 || strings.IndexByte(`"\<>&`, c) >= 0 {
			plain = false
		}
	}
	dst := make([]byte, len(s)+1)
	got := CleanCopy(dst, s)
	if want := Clean(s) && plain; got != want {
		t.Fatalf("CleanCopy(%q) = %v, Clean and no escape %v", s, got, want)
	}
	if got && string(dst[:len(s)]) != s {
		t.Fatalf("CleanCopy(%q) copied %q", s, dst[:len(s)])
	}
	if CleanCopy(dst[:len(s)/2], s) && len(s) > 0 {
		t.Fatalf("CleanCopy(%q) into %d bytes", s, len(s)/2)
	}
}

// TestCleanCopyAgrees checks CleanCopy on every one- and two-byte string;
// TestCleanAgrees and FuzzCleanAgrees check it on all their strings too.
func TestCleanCopyAgrees(t *testing.T) {
	for a := range 256 {
		checkCleanCopy(t, string([]byte{byte(a)}))
		for b := range 256 {
			checkCleanCopy(t, string([]byte{byte(a), byte(b)}))
		}
	}
}

// TestCleanAgrees checks Clean against the detectors: every string of up
// to three bytes over an alphabet of each byte class, random strings
// around Clean's length limit, and strings built to sit just inside it
// (the shortest bearer token, PEM header, key, e-mail and phone the
// detectors know), and digit-heavy strings around its digit limit in the
// separators numbers are written with. It also checks that Clean accepts the plain strings it
// exists for, so that it is not vacuously false.
func TestCleanAgrees(t *testing.T) {
	alphabet := "aZ-_ .,/+~!#$()'\"\t\n0@%:=&\xc3\xa9\xff"
	var rec func(prefix string, n int)
	rec = func(prefix string, n int) {
		checkClean(t, prefix)
		if n == 0 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			rec(prefix+alphabet[i:i+1], n-1)
		}
	}
	rec("", 3)

	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"bearer ", "Bearer ", "basic ", "-----BEGIN", "-----", "eyJ", "key", "sk_live_", "ghp_", "AKIA", "at", "dot", "-", "_", " ", "x", "abcdefgh"}
	for range 200000 {
		var b strings.Builder
		n := rng.IntN(shortClean + 6)
		for b.Len() < n {
			if rng.IntN(4) == 0 {
				b.WriteString(words[rng.IntN(len(words))])
			} else {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
		}
		checkClean(t, b.String())
	}
	digits := "0123456789012345678901234567890-+./() aZ"
	for range 300000 {
		b := make([]byte, rng.IntN(shortClean+3))
		for i := range b {
			b[i] = digits[rng.IntN(len(digits))]
		}
		checkClean(t, string(b))
	}

	for _, s := range []string{
		"bearer abcdefgh", "basic abcdefghij", "Bearer abcdefg", "-----BEGIN-----", "-----BEGIN X-----",
		"abcdefghijklmnop", "AKIAABCDEFGHIJKL", "ghp_abcdefghijk", "a@b.co", "a%40b.co", "a&#64;b.co",
		"a&commat;b.co", "\uff41\uff20b.co", "five five five", "ssn", "iban", "x=y", "pw:secret",
		"+4915123456", "+1 202 5550", "1.2.3.4", "10.0.0.1", "123-45-6789", "123 45 6789", "202-555-0143",
		"(202)555-0143", "020 7946 095", "0044 2079460", "12345678", "2026-02-24", "4111-1111-11",
	} {
		checkClean(t, s)
	}

	for _, s := range []string{"", "confirmed", "completed", "acme-lisbon", "Chen Wei", "pending review"[:13], "103", "2026-02-24"} {
		if !Clean(s) {
			t.Errorf("Clean(%q) is false: the fast path never fires", s)
		}
	}
}

// FuzzCleanAgrees is TestCleanAgrees' check on fuzzed input:
// go test ./redact/internal/detect -run '^$' -fuzz FuzzCleanAgrees.
func FuzzCleanAgrees(f *testing.F) {
	for _, s := range []string{"confirmed", "bearer abcdefgh", "-----BEGIN X-----", "a@b.co", "acme-lisbon", "2026-02-24", "+1 202 5550", "1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkClean(t, s) })
}
