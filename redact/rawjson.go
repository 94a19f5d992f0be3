package redact

import (
	"encoding/json"
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// rewriteJSON appends data, the output of a MarshalJSON method, compacted,
// with every string (object keys included) passed through the detectors.
// This is all the redaction a self-marshaling type gets: its structure is
// opaque, so it can carry no pii tags (types that try are refused with
// ErrTag). Keys that become equal after redaction are made unique as in
// maps.
func (e *encodeState) rewriteJSON(data []byte) error {
	if !json.Valid(data) {
		return errors.New("invalid JSON")
	}
	p := jsonRewriter{e: e, data: data}
	p.value()
	return nil
}

// jsonRewriter walks JSON already known to be valid; it still bounds every
// index so that it cannot panic.
type jsonRewriter struct {
	e    *encodeState
	data []byte
	i    int
}

func (p *jsonRewriter) skipWS() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonRewriter) value() {
	p.skipWS()
	if p.i >= len(p.data) {
		return
	}
	switch p.data[p.i] {
	case '{':
		p.object()
	case '[':
		p.array()
	case '"':
		s := p.str()
		p.e.buf = p.e.run.appendText(p.e.buf, s)
	default:
		j := p.i
		for j < len(p.data) {
			c := p.data[j]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			j++
		}
		p.e.buf = append(p.e.buf, p.data[p.i:j]...)
		p.i = j
	}
}

func (p *jsonRewriter) array() {
	p.i++
	p.e.buf = append(p.e.buf, '[')
	p.skipWS()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		p.e.buf = append(p.e.buf, ']')
		return
	}
	for p.i < len(p.data) {
		p.value()
		p.skipWS()
		if p.i < len(p.data) && p.data[p.i] == ',' {
			p.i++
			p.e.buf = append(p.e.buf, ',')
			continue
		}
		p.i++ // ']'
		break
	}
	p.e.buf = append(p.e.buf, ']')
}

func (p *jsonRewriter) object() {
	p.i++
	p.e.buf = append(p.e.buf, '{')
	p.skipWS()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		p.e.buf = append(p.e.buf, '}')
		return
	}
	var keys []string
	changedAny := false
	first := true
	for p.i < len(p.data) {
		p.skipWS()
		k := p.str()
		out, changed := p.e.run.textJSON(k)
		changedAny = changedAny || changed
		if changedAny {
			base := out
			for n := 2; contains(keys, out); n++ {
				out = base + " (" + itoa(n) + ")"
			}
		}
		keys = append(keys, out)
		if !first {
			p.e.buf = append(p.e.buf, ',')
		}
		first = false
		p.e.buf = appendString(p.e.buf, out)
		p.e.buf = append(p.e.buf, ':')
		p.skipWS()
		p.i++ // ':'
		p.value()
		p.skipWS()
		if p.i < len(p.data) && p.data[p.i] == ',' {
			p.i++
			continue
		}
		p.i++ // '}'
		break
	}
	p.e.buf = append(p.e.buf, '}')
}

func contains(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for n >= 10 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	i--
	b[i] = byte('0' + n)
	return string(b[i:])
}

// str decodes the JSON string at p.i and moves past it.
func (p *jsonRewriter) str() string {
	if p.i >= len(p.data) || p.data[p.i] != '"' {
		return ""
	}
	p.i++
	start := p.i
	for p.i < len(p.data) {
		c := p.data[p.i]
		if c == '"' {
			s := string(p.data[start:p.i])
			p.i++
			return s
		}
		if c == '\\' {
			break
		}
		p.i++
	}
	b := make([]byte, 0, p.i-start+16)
	b = append(b, p.data[start:p.i]...)
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b)
		case c == '\\' && p.i+1 < len(p.data):
			esc := p.data[p.i+1]
			p.i += 2
			switch esc {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := p.hex4()
				if utf16.IsSurrogate(r) {
					save := p.i
					if p.i+1 < len(p.data) && p.data[p.i] == '\\' && p.data[p.i+1] == 'u' {
						p.i += 2
						if d := utf16.DecodeRune(r, p.hex4()); d != utf8.RuneError {
							r = d
						} else {
							p.i = save
							r = utf8.RuneError
						}
					} else {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default: // '"', '\\', '/'
				b = append(b, esc)
			}
		default:
			b = append(b, c)
			p.i++
		}
	}
	return string(b)
}

func (p *jsonRewriter) hex4() rune {
	if p.i+4 > len(p.data) {
		p.i = len(p.data)
		return utf8.RuneError
	}
	var r rune
	for _, c := range p.data[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return utf8.RuneError
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r
}

// jsonUnquote decodes b, a complete JSON string literal, into *s.
func jsonUnquote(b []byte, s *string) bool {
	p := jsonRewriter{data: b}
	*s = p.str()
	return p.i == len(b)
}
