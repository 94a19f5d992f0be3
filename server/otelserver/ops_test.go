package otelserver_test

import (
	"context"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/server/otelserver"
)

// The private registry serves the Go runtime and process metrics by
// default (a soak reads go_goroutines from /metrics), and leaves them out
// when asked.
func TestRuntimeMetrics(t *testing.T) {
	tel, err := otelserver.New(otelserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	// A second Telemetry in the same process must not collide with the
	// first's collectors (each has its own registry).
	tel2, err := otelserver.New(otelserver.Options{})
	if err != nil {
		t.Fatalf("second Telemetry: %v", err)
	}
	t.Cleanup(func() { tel2.Shutdown(context.Background()) })
	hs := httptest.NewServer(tel.Handler())
	t.Cleanup(hs.Close)
	body := scrape(t, hs.URL)
	g, ok := sample(body, "go_goroutines", map[string]string{})
	if !ok || g < 1 {
		t.Errorf("go_goroutines = %v (present %v), want >= 1", g, ok)
	}
	if _, ok := sample(body, "go_memstats_heap_alloc_bytes", map[string]string{}); !ok {
		t.Error("go_memstats_heap_alloc_bytes missing")
	}
	if runtime.GOOS == "linux" {
		for _, name := range []string{"process_resident_memory_bytes", "process_open_fds"} {
			if v, ok := sample(body, name, map[string]string{}); !ok || v <= 0 {
				t.Errorf("%s = %v (present %v), want > 0", name, v, ok)
			}
		}
	}

	off, err := otelserver.New(otelserver.Options{NoRuntimeMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { off.Shutdown(context.Background()) })
	hs2 := httptest.NewServer(off.Handler())
	t.Cleanup(hs2.Close)
	if body := scrape(t, hs2.URL); strings.Contains(body, "go_goroutines") || strings.Contains(body, "process_open_fds") {
		t.Errorf("NoRuntimeMetrics: runtime metrics served:\n%s", body)
	}
}
