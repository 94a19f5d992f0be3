package server

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"time"
)

// The failed-token map is bounded: 10,000 addresses failing once each leave
// at most MaxClients entries, and an IPv6 client is one entry per /64.
func TestFailedTokensMapBounded(t *testing.T) {
	ft, err := newFailedTokens(FailedTokenLimit{MaxClients: 100, Burst: 1}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		r := &http.Request{RemoteAddr: fmt.Sprintf("10.%d.%d.%d:443", i>>16&255, i>>8&255, i&255), Header: http.Header{}}
		ft.charge(r, errInvalidForTest)
	}
	if n := ft.len(); n > 100 {
		t.Fatalf("%d addresses remembered, want at most MaxClients (100)", n)
	}
	ft, _ = newFailedTokens(FailedTokenLimit{Burst: 1}, time.Now)
	for i := range 50 {
		ft.charge(&http.Request{RemoteAddr: fmt.Sprintf("[2001:db8::%x]:443", i+1), Header: http.Header{}}, errInvalidForTest)
	}
	if n := ft.len(); n != 1 {
		t.Fatalf("50 addresses of one IPv6 /64 made %d entries, want 1", n)
	}
}

var errInvalidForTest = fmt.Errorf("forged: %w", auth.ErrInvalidToken)
