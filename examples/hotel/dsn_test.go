package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestStartupNeverPrintsDSNPassword starts the hotel with DSNs whose
// password must not appear anywhere in what it prints or returns: go-sql-
// driver's schemeless form (user:pw@tcp(host:port)/db, the driver's own
// documented form, which today's redactor let through) and a DSN no parser
// accepts. Nothing listens on port 1, so start-up fails at the database.
func TestStartupNeverPrintsDSNPassword(t *testing.T) {
	for _, dsn := range []string{
		"root:S3cretPW@tcp(127.0.0.1:1)/hoteldemo",
		"mysql://root:S3cretPW@tcp(127.0.0.1:1)/hoteldemo",
		"postgres://app:S3cretPW@[::1/hoteldemo",
		"host=127.0.0.1 port=1 password=S3cretPW dbname=hoteldemo",
	} {
		var stderr bytes.Buffer
		err := run([]string{"-addr", "127.0.0.1:0", "-db", dsn}, &stderr)
		if err == nil {
			t.Errorf("%s: the hotel started", strings.SplitN(dsn, ":", 2)[0])
			continue
		}
		if strings.Contains(err.Error(), "S3cretPW") || strings.Contains(stderr.String(), "S3cretPW") {
			t.Errorf("the DSN's password was printed:\nerr: %v\nstderr: %s", err, stderr.String())
		}
		t.Logf("start-up error: %v", err)
	}
}
