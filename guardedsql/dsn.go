package guardedsql

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// redactedSecret replaces every secret RedactDSN finds.
const redactedSecret = "xxxxx"

// RedactDSN returns dsn with every password it carries replaced by
// "xxxxx", for any DSN form the library accepts:
//
//   - URL userinfo (postgres://user:pw@host/db, mysql://user:pw@host/db);
//   - password and sslpassword query parameters (postgres://host/db?password=pw);
//   - PostgreSQL keyword/value strings (host=h password='p w' dbname=d);
//   - go-sql-driver's own DSN after the scheme (mysql://user:pw@tcp(host:3306)/db),
//     read with that driver's own parser, which url.Parse rejects;
//   - anything else that looks like scheme://user:secret@..., even if no
//     parser accepts it (a malformed DSN is the likeliest to end up in an
//     error message).
//
// Every error and log line of this module that can carry a DSN goes
// through it (or through the error scrubbing built on it), so a password
// is never printed. The rest of the DSN (user, host, database) is kept
// for diagnosis.
func RedactDSN(dsn string) string {
	out := dsn
	for _, s := range dsnSecrets(dsn) {
		out = strings.ReplaceAll(out, s, redactedSecret)
	}
	return out
}

// keywordPassword matches password=value and sslpassword=value in a
// keyword/value connection string or a query string; the value is a
// single-quoted string (with \' escapes) or runs to the next space, '&'
// or ';'.
var keywordPassword = regexp.MustCompile(`(?i)\b(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&;]+)`)

// dsnSecrets returns the secret substrings of dsn as they may appear in
// text: every password both as written in dsn and decoded. Longer strings
// come first, so replacing them in order never leaves a suffix behind.
func dsnSecrets(dsn string) []string {
	var out []string
	add := func(s string) {
		if s != "" && s != redactedSecret {
			out = append(out, s)
		}
	}
	// Keyword/value and query parameters, in any form.
	for _, m := range keywordPassword.FindAllStringSubmatch(dsn, -1) {
		v := m[1]
		add(v)
		if uq := strings.Trim(v, "'"); uq != v {
			add(strings.ReplaceAll(strings.ReplaceAll(uq, `\'`, `'`), `\\`, `\`))
		}
		if dec, err := url.QueryUnescape(v); err == nil {
			add(dec)
		}
	}
	// A driver's own DSN (go-sql-driver's), parsed by the registered
	// engine's driver; without it the fallback below still finds
	// user:secret@.
	for _, e := range registered() {
		for _, s := range e.DSNSecrets(dsn) {
			add(s)
		}
	}
	// URL userinfo.
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			add(pw)
			add(url.PathEscape(pw))
			add(url.QueryEscape(pw))
		}
	}
	// Fallback for what no parser accepts: scheme://user:secret@rest,
	// the userinfo ending at the last '@' before the path.
	if _, rest, ok := strings.Cut(dsn, "://"); ok {
		auth := rest
		if i := strings.IndexAny(auth, "/?"); i >= 0 && strings.LastIndexByte(auth[:i], '@') >= 0 {
			auth = auth[:i]
		}
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			if _, pw, ok := strings.Cut(auth[:at], ":"); ok {
				add(pw)
			}
		}
	}
	// Longest first: a password that contains another is replaced whole.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && len(out[j]) > len(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// dsnError is an error whose text had a DSN's secrets removed. It unwraps
// to the original error for errors.Is and errors.As; its own text never
// carries a password.
type dsnError struct {
	msg string
	err error
}

func (e *dsnError) Error() string { return e.msg }
func (e *dsnError) Unwrap() error { return e.err }

// RedactDSNError returns err with every password RedactDSN would hide in
// dsn removed from its text (nil for nil). Driver errors quote the DSN
// they failed on (pgconn's parse errors, URL errors), so every error built
// while opening a DSN goes through it. The result still matches what err
// matched with errors.Is and errors.As.
func RedactDSNError(err error, dsn string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range dsnSecrets(dsn) {
		msg = strings.ReplaceAll(msg, s, redactedSecret)
	}
	var de *dsnError
	if errors.As(err, &de) && msg == err.Error() {
		return err
	}
	return &dsnError{msg: msg, err: err}
}
