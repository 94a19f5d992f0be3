package kern

import (
	"errors"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// TestLoad proves the committed objects pass this kernel's verifier.
func TestLoad(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loading BPF programs needs root (CAP_BPF and CAP_NET_ADMIN)")
	}
	var objs GuardObjects
	err := LoadGuardObjects(&objs, nil)
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		t.Fatalf("verifier: %+v", ve)
	}
	if err != nil {
		t.Fatal(err)
	}
	objs.Close()
}
