package mysql

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"

	mysqldialect "github.com/tenantmcp/tenantmcp/guardedsql/internal/engine/mysql"
)

func asServerError(err error) (mysqldialect.ServerError, bool) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return mysqldialect.ServerError{}, false
	}
	return mysqldialect.ServerError{Number: me.Number, Message: me.Message, Text: me.Error()}, true
}

func unavailable(err error) bool {
	if errors.Is(err, mysql.ErrInvalidConn) {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1040, 1053, 1203: // too many connections, server shutdown, user connection limit
			return true
		}
	}
	return false
}

func timeout(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1969 || me.Number == 1205 || me.Number == 3024)
}

// dsnSecrets reads go-sql-driver's DSN after the scheme with that
// driver's own parser, which url.Parse rejects.
func dsnSecrets(dsn string) []string {
	if rest, ok := strings.CutPrefix(dsn, "mysql://"); ok {
		if cfg, err := mysql.ParseDSN(rest); err == nil && cfg.Passwd != "" {
			return []string{cfg.Passwd}
		}
	}
	return nil
}

// driverConfig is Config before redaction: its errors may quote the DSN.
func driverConfig(dsn string) (*mysql.Config, error) {
	cfg, err := config(dsn)
	if err != nil {
		return nil, err
	}
	_, q, _ := strings.Cut(dsn, "?")
	if !hasParam(q, "parseTime") {
		cfg.ParseTime = true
	}
	// ExpectOne counts the rows an UPDATE matched: without found rows a
	// row that already holds the value is not counted, and an update
	// matching two rows (ErrAmbiguous) could pass for one.
	if !hasParam(q, "clientFoundRows") {
		cfg.ClientFoundRows = true
	}
	// UTC everywhere: TIMESTAMP columns convert to and from the session
	// time zone, which the guard's time expressions assume is UTC (as
	// the driver's loc, UTC by default, that time.Time values are sent
	// and read in). Set on every connection, after the DSN's own params.
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	return cfg, nil
}

// hasParam reports whether the raw query string names the parameter.
func hasParam(rawQuery, name string) bool {
	for _, kv := range strings.Split(rawQuery, "&") {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			return true
		}
	}
	return false
}

func config(dsn string) (*mysql.Config, error) {
	rest, ok := strings.CutPrefix(dsn, "mysql://")
	if !ok {
		return nil, fmt.Errorf("guardedsql: MySQL DSN must start with mysql://")
	}
	slash := strings.LastIndexByte(strings.SplitN(rest, "?", 2)[0], '/')
	if slash < 0 {
		return nil, fmt.Errorf("guardedsql: MySQL DSN %s names no database", dsn)
	}
	if head := rest[:slash]; strings.Contains(head, "(") && strings.HasSuffix(head, ")") {
		cfg, err := mysql.ParseDSN(rest)
		if err != nil {
			return nil, fmt.Errorf("guardedsql: MySQL DSN %s: %w", dsn, err)
		}
		return cfg, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("guardedsql: MySQL DSN %s: %w", dsn, redactURLError(err))
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg, err := mysql.ParseDSN("tcp(" + host + ")/" + strings.TrimPrefix(u.Path, "/") + "?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("guardedsql: MySQL DSN %s: %w", dsn, err)
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	return cfg, nil
}

// redactURLError drops the URL (which may hold a password) from a
// url.Parse error.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
