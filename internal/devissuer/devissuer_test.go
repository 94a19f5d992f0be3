package devissuer

import (
	"errors"
	"testing"

	"github.com/tenantmcp/tenantmcp/claims/devtoken"
)

func TestRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "10.0.0.1:0", ":0"} {
		if is, err := Start(addr, "aud"); !errors.Is(err, devtoken.ErrNotLoopback) {
			if is != nil {
				is.Close()
			}
			t.Fatalf("Start(%q): %v, want ErrNotLoopback", addr, err)
		}
	}
}
