package guardedsql

import (
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// redactedSecret replaces every secret RedactDSN finds.
const redactedSecret = "xxxxx"

// UnparseableDSN is what RedactDSN returns for a DSN that no parser it
// knows accepts: such a DSN is never echoed, not even in part, since
// nothing says where its secrets are.
const UnparseableDSN = "<unparseable DSN>"

// RedactDSN returns dsn with every password it carries replaced by
// "xxxxx", for every DSN form the library or its drivers accept:
//
//   - URL userinfo (postgres://user:pw@host/db, mysql://user:pw@host/db,
//     and PostgreSQL's multi-host postgres://user:pw@h1,h2/db);
//   - password and sslpassword query parameters (postgres://host/db?password=pw);
//   - PostgreSQL keyword/value strings (host=h password='p w' dbname=d),
//     read with libpq's grammar;
//   - go-sql-driver's own DSN, after mysql:// or without any scheme
//     (user:pw@tcp(host:3306)/db, the driver's documented form), read with
//     that driver's grammar and, when guardedsql/mysql is linked, checked
//     against the driver's own parser (mysql.ParseDSN);
//   - SQLite DSNs (sqlite:path, file:path?...), which carry no password
//     but whose query is still scrubbed of password parameters.
//
// A DSN that none of these parsers accepts is never echoed: the result is
// UnparseableDSN (a malformed DSN is the likeliest to end up in an error
// message, and without a parse nothing says which part is the secret).
//
// Every error and log line of this module that can carry a DSN goes
// through it (or through RedactDSNError), so a password is never printed.
// The rest of the DSN (user, host, database) is kept for diagnosis.
func RedactDSN(dsn string) string {
	if out, ok := redactParsed(dsn); ok {
		return out
	}
	return UnparseableDSN
}

// redactParsed redacts dsn if one of the parsers accepts it.
func redactParsed(dsn string) (string, bool) {
	switch {
	case dsn == "" || dsn == "sqlite" || dsn == ":memory:":
		return dsn, true
	case strings.HasPrefix(dsn, "sqlite:") && !strings.HasPrefix(dsn, "sqlite://") || strings.HasPrefix(dsn, "file:"):
		return redactSQLiteQuery(dsn), true
	}
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok && validScheme(scheme) {
		if scheme == "mysql" {
			if out, ok := redactMySQL(rest); ok {
				return scheme + "://" + out, true
			}
		}
		if scheme == "sqlite" {
			return redactSQLiteQuery(dsn), true
		}
		return redactURL(dsn, scheme, rest)
	}
	if out, ok := redactKeywordValue(dsn); ok {
		return out, true
	}
	if out, ok := redactMySQL(dsn); ok {
		return out, true
	}
	return "", false
}

// DSNScheme is the scheme of dsn (the text before its first ':') when it
// is a well-formed scheme name of at most 32 characters, for error
// messages; otherwise "". A DSN without ':' has no scheme: the whole string
// could be a secret, so it is never returned. (For go-sql-driver's
// schemeless user:pw@tcp(...)/db the "scheme" is the user name, which
// RedactDSN shows too.)
func DSNScheme(dsn string) string {
	if scheme, _, ok := strings.Cut(dsn, ":"); ok && validScheme(scheme) && len(scheme) <= 32 {
		return scheme
	}
	return ""
}

func validScheme(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// redactURL redacts a scheme://authority/path?query DSN that url.Parse
// accepts, or that it accepts once a PostgreSQL multi-host list
// (h1:5432,h2:5432, which pgx accepts and url.Parse does not) is read as
// one host. The userinfo is found as url.Parse finds it: the authority
// ends at the first '/', '?' or '#', and the userinfo at its last '@'.
func redactURL(dsn, scheme, rest string) (string, bool) {
	authEnd := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authEnd = i
	}
	auth, tail := rest[:authEnd], rest[authEnd:]
	userinfo, host, hasUser := "", auth, false
	if at := strings.LastIndexByte(auth, '@'); at >= 0 {
		userinfo, host, hasUser = auth[:at], auth[at+1:], true
	}
	if _, err := url.Parse(dsn); err != nil {
		// PostgreSQL's multi-host form: check each host on its own.
		if scheme != "postgres" && scheme != "postgresql" || !strings.Contains(host, ",") {
			return "", false
		}
		for _, h := range strings.Split(host, ",") {
			if _, err := url.Parse(scheme + "://" + h + tail); err != nil || h == "" {
				return "", false
			}
		}
		if hasUser {
			if _, err := url.Parse(scheme + "://" + userinfo + "@h" + tail); err != nil {
				return "", false
			}
		}
	}
	if hasUser {
		if user, _, ok := strings.Cut(userinfo, ":"); ok {
			userinfo = user + ":" + redactedSecret
		}
		auth = userinfo + "@" + host
	}
	return redactQuery(scheme + "://" + auth + tail), true
}

// redactQuery replaces the values of password and sslpassword parameters
// in dsn's query string (after the first '?').
func redactQuery(dsn string) string {
	return redactParams(dsn, func(k, _ string) bool { return isPasswordKey(k) })
}

// redactSQLiteQuery replaces the value of every parameter of an SQLite
// DSN's query string except those known to hold no secret (the open mode,
// the cache, and pragmas that tune the connection): a driver or a build
// may take a key there (_pragma=key(...), _auth_pass=...), and an SQLite
// DSN has no other place for one, so an unknown parameter is redacted.
func redactSQLiteQuery(dsn string) string {
	return redactParams(dsn, func(k, v string) bool { return !sqliteSafeParam(k, v) })
}

// redactParams replaces with redactedSecret the value of each parameter of
// dsn's query string (after the first '?', before any '#') for which
// secret, given the unescaped name and value, is true; a parameter that
// does not unescape is redacted.
func redactParams(dsn string, secret func(k, v string) bool) string {
	base, q, ok := strings.Cut(dsn, "?")
	if !ok {
		return dsn
	}
	frag := ""
	if i := strings.IndexByte(q, '#'); i >= 0 {
		q, frag = q[:i], q[i:]
	}
	parts := strings.Split(q, "&")
	for i, p := range parts {
		k, v, hasV := strings.Cut(p, "=")
		if !hasV {
			continue
		}
		uk, err := url.QueryUnescape(k)
		uv, err2 := url.QueryUnescape(v)
		if err != nil || err2 != nil || secret(uk, uv) {
			parts[i] = k + "=" + redactedSecret
		}
	}
	return base + "?" + strings.Join(parts, "&") + frag
}

// sqliteSafeParams are the SQLite DSN parameters whose values are shown in
// errors; sqliteSafePragmas the pragmas a _pragma parameter may set and be
// shown.
var (
	sqliteSafeParams  = map[string]bool{"mode": true, "cache": true, "immutable": true, "_txlock": true, "_time_format": true, "nolock": true, "psow": true, "vfs": true}
	sqliteSafePragmas = map[string]bool{"foreign_keys": true, "journal_mode": true, "busy_timeout": true, "synchronous": true, "query_only": true,
		"cache_size": true, "temp_store": true, "mmap_size": true, "wal_autocheckpoint": true, "locking_mode": true, "auto_vacuum": true,
		"page_size": true, "recursive_triggers": true, "case_sensitive_like": true, "defer_foreign_keys": true, "secure_delete": true}
)

func sqliteSafeParam(k, v string) bool {
	if k != "_pragma" {
		return sqliteSafeParams[k]
	}
	name := strings.ToLower(strings.TrimSpace(v))
	if i := strings.IndexAny(name, "(= "); i >= 0 {
		name = name[:i]
	}
	return sqliteSafePragmas[name]
}

func isPasswordKey(k string) bool {
	k = strings.ToLower(strings.TrimSpace(k))
	return k == "password" || k == "sslpassword" || k == "passwd" || k == "pass"
}

// redactMySQL redacts go-sql-driver's DSN form
// [user[:password]@][net[(addr)]]/dbname[?params] (without mysql://) if
// that driver's grammar accepts it (see splitMySQLDSN).
func redactMySQL(dsn string) (string, bool) {
	start, end, hasPw, ok := splitMySQLDSN(dsn)
	if !ok {
		return "", false
	}
	if !hasPw || start == end {
		return dsn, true
	}
	return dsn[:start] + redactedSecret + dsn[end:], true
}

// splitMySQLDSN reads dsn with go-sql-driver's grammar, as its ParseDSN
// does: the last '/' starts the database name, the last '@' before it ends
// the userinfo, whose first ':' starts the password; between '@' and '/'
// an optional net(addr). It returns the byte span of the password. This
// package does not link the driver (a SQLite or PostgreSQL program must not
// carry it: see examples/minimal's TestMinimalLinksOneEngine), so the
// grammar is repeated here; when guardedsql/mysql is linked, the driver's
// own mysql.ParseDSN must agree (through the engine's DSNSecrets), or the
// DSN counts as unparseable.
func splitMySQLDSN(dsn string) (pwStart, pwEnd int, hasPw, ok bool) {
	i := strings.LastIndexByte(dsn, '/')
	if i < 0 {
		return 0, 0, false, false
	}
	if i > 0 {
		j := strings.LastIndexByte(dsn[:i], '@')
		if j >= 0 {
			if k := strings.IndexByte(dsn[:j], ':'); k >= 0 {
				pwStart, pwEnd, hasPw = k+1, j, true
			}
		}
		netw, addr := dsn[j+1:i], ""
		if p := strings.IndexByte(netw, '('); p >= 0 {
			if dsn[i-1] != ')' || p == len(netw)-1 {
				return 0, 0, false, false
			}
			netw, addr = netw[:p], netw[p+1:len(netw)-1]
		}
		if netw == "" {
			netw = "tcp"
		}
		if addr == "" && netw != "tcp" && netw != "unix" {
			return 0, 0, false, false // the driver knows no default address for it
		}
	}
	db, _, _ := strings.Cut(dsn[i+1:], "?")
	if _, err := url.PathUnescape(db); err != nil {
		return 0, 0, false, false
	}
	if hasPw && pwEnd > pwStart {
		enginesMu.RLock()
		e := engines["mysql"]
		enginesMu.RUnlock()
		if e != nil && !slices.Contains(e.DSNSecrets("mysql://"+dsn), dsn[pwStart:pwEnd]) {
			return 0, 0, false, false // the driver itself disagrees
		}
	}
	return pwStart, pwEnd, hasPw, true
}

// kvPair is one keyword=value of a keyword/value connection string, with
// the byte span of its value as written.
type kvPair struct {
	key, value       string
	valStart, valEnd int
}

// parseKeywordValue reads a PostgreSQL keyword/value connection string with
// libpq's grammar: keyword = value pairs separated by whitespace, a value
// single-quoted (with \' and \\ escapes) or running to the next
// whitespace (with backslash escapes). It accepts nothing else: at least one
// pair, every keyword a letter/digit/underscore word. pgx's own parser
// (pgconn.ParseConfig) is not used because it reads files and the
// environment (passfile, service file, TLS certificates) to build a
// connection, which a redactor must not do.
func parseKeywordValue(s string) ([]kvPair, bool) {
	var out []kvPair
	i := 0
	skip := func() {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
	}
	for {
		skip()
		if i == len(s) {
			break
		}
		ks := i
		for i < len(s) && (s[i] == '_' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '0' && s[i] <= '9') {
			i++
		}
		key := s[ks:i]
		skip()
		if key == "" || i == len(s) || s[i] != '=' {
			return nil, false
		}
		i++
		skip()
		p := kvPair{key: key, valStart: i}
		var val strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				if c == '\\' && i+1 < len(s) {
					val.WriteByte(s[i+1])
					i += 2
					continue
				}
				i++
				if c == '\'' {
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return nil, false
			}
		} else {
			for i < len(s) && !isSpace(s[i]) {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
				i++
			}
		}
		p.value, p.valEnd = val.String(), i
		out = append(out, p)
	}
	return out, len(out) > 0
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// redactKeywordValue redacts a keyword/value connection string.
func redactKeywordValue(dsn string) (string, bool) {
	pairs, ok := parseKeywordValue(dsn)
	if !ok {
		return "", false
	}
	var b strings.Builder
	last := 0
	for _, p := range pairs {
		if isPasswordKey(p.key) {
			b.WriteString(dsn[last:p.valStart])
			b.WriteString(redactedSecret)
			last = p.valEnd
		}
	}
	b.WriteString(dsn[last:])
	return b.String(), true
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
	// Keyword/value strings, by libpq's grammar (values as decoded).
	if pairs, ok := parseKeywordValue(dsn); ok {
		for _, p := range pairs {
			if isPasswordKey(p.key) {
				add(p.value)
				add(dsn[p.valStart:p.valEnd])
			}
		}
	}
	// go-sql-driver's own DSN, after mysql:// or without a scheme.
	for _, d := range []string{dsn, strings.TrimPrefix(dsn, "mysql://")} {
		if start, end, hasPw, ok := splitMySQLDSN(d); ok && hasPw {
			add(d[start:end])
		}
	}
	// A driver's own DSN, parsed by the registered engine's driver;
	// without it the fallback below still finds user:secret@.
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
	// Fallback for what no parser accepts: [scheme://]user:secret@rest,
	// the userinfo ending at the last '@' before the path.
	{
		rest := dsn
		if _, r, ok := strings.Cut(dsn, "://"); ok {
			rest = r
		}
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
	if dsn != "" {
		// The whole DSN first, as RedactDSN shows it (never, if it does
		// not parse); then each secret wherever else it appears.
		msg = strings.ReplaceAll(msg, dsn, RedactDSN(dsn))
	}
	for _, s := range dsnSecrets(dsn) {
		msg = strings.ReplaceAll(msg, s, redactedSecret)
	}
	var de *dsnError
	if errors.As(err, &de) && msg == err.Error() {
		return err
	}
	return &dsnError{msg: msg, err: err}
}
