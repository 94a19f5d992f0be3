package mysql_test

import (
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/guardedsql/mysql"
)

func TestMySQLConfig(t *testing.T) {
	for _, tc := range []struct {
		dsn                       string
		user, pass, net, addr, db string
		param                     string
		wantErr                   bool
	}{
		{dsn: "mysql://root@tcp(127.0.0.1:3306)/test", user: "root", net: "tcp", addr: "127.0.0.1:3306", db: "test"},
		{dsn: "mysql://app:s3cr/t@tcp(db:3307)/hotel?parseTime=true", user: "app", pass: "s3cr/t", net: "tcp", addr: "db:3307", db: "hotel"},
		{dsn: "mysql://app:p%40ss@db.internal/hotel?parseTime=true", user: "app", pass: "p@ss", net: "tcp", addr: "db.internal:3306", db: "hotel"},
		{dsn: "mysql://app@db.internal:3310/hotel", user: "app", net: "tcp", addr: "db.internal:3310", db: "hotel"},
		{dsn: "mysql://app@unix(/run/mysqld/mysqld.sock)/hotel", user: "app", net: "unix", addr: "/run/mysqld/mysqld.sock", db: "hotel"},
		{dsn: "mysql://root@tcp(127.0.0.1:3306)", wantErr: true},
		{dsn: "postgres://x/y", wantErr: true},
	} {
		cfg, err := mysql.Config(tc.dsn)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s: accepted", tc.dsn)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.dsn, err)
			continue
		}
		if cfg.User != tc.user || cfg.Passwd != tc.pass || cfg.Net != tc.net || cfg.Addr != tc.addr || cfg.DBName != tc.db {
			t.Errorf("%s: got user=%q pass=%q net=%q addr=%q db=%q", tc.dsn, cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName)
		}
		if strings.Contains(tc.dsn, "parseTime=true") && !cfg.ParseTime {
			t.Errorf("%s: parameters lost", tc.dsn)
		}
		if !cfg.ParseTime {
			t.Errorf("%s: parseTime not on by default (DATETIME would scan as bytes)", tc.dsn)
		}
	}
	// An explicit parseTime=false is the caller's to make.
	cfg, err := mysql.Config("mysql://root@tcp(127.0.0.1:3306)/test?parseTime=false")
	if err != nil || cfg.ParseTime {
		t.Errorf("explicit parseTime=false: ParseTime=%v, err %v", cfg != nil && cfg.ParseTime, err)
	}
}
