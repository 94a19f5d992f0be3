package otelserver_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
	"github.com/tenantmcp/tenantmcp/server/otelserver"
)

// Telemetry is wired in three places: the server's Tracer, the database's
// pool-wait observer and the HTTP handler's metrics path. Here one
// rate-limit refusal is recorded and scraped.
func ExampleNew() {
	tel, err := otelserver.New(otelserver.Options{})
	if err != nil {
		panic(err)
	}
	defer tel.Shutdown(context.Background())

	// In a real server:
	_ = server.Options{Tracer: tel}                                         // calls, denials, redactions, spans, limits
	_ = guardedsql.Options{PoolWaitObserver: tel.PoolWaitObserver()}        // waits for a connection
	_ = server.HTTPOptions{MetricsPath: "/metrics", Metrics: tel.Handler()} // or a listener of its own

	tel.TraceLimit(context.Background(), &server.LimitError{Tool: "guests", Rule: server.RuleTenantRate})

	hs := httptest.NewServer(tel.Handler())
	defer hs.Close()
	resp, err := hs.Client().Get(hs.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "tenantmcp_rate_limit_rejections_total") {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// tenantmcp_rate_limit_rejections_total{limit="limit.tenant.rate",tool="guests"} 1
}
