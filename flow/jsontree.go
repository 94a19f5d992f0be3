package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// jnode is a JSON value with the position where it ends in the source, so
// that validation errors can name a line. Objects keep their members in
// source order; a duplicate key is an error at parse time.
type jnode struct {
	end   int64 // offset just past the value's first token
	kind  byte  // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	str   string
	num   json.Number
	b     bool
	keys  []string
	kends []int64 // offset just past each key
	vals  []*jnode
	elems []*jnode
}

func (n *jnode) kindName() string {
	switch n.kind {
	case 'o':
		return "an object"
	case 'a':
		return "an array"
	case 's':
		return "a string"
	case 'n':
		return "a number"
	case 'b':
		return "a boolean"
	}
	return "null"
}

// parseTree decodes data into a jnode tree. Errors carry the offset of the
// fault (posError).
func parseTree(data []byte) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := readNode(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &posError{off: dec.InputOffset(), msg: "unexpected data after the top-level value"}
	}
	return n, nil
}

// posError is an error at a byte offset, turned into a line by the caller.
type posError struct {
	off int64
	msg string
}

func (e *posError) Error() string { return e.msg }

const maxDepth = 32

func readNode(dec *json.Decoder, depth int) (*jnode, error) {
	if depth > maxDepth {
		return nil, &posError{off: dec.InputOffset(), msg: "nesting too deep"}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, tokenErr(dec, err)
	}
	n := &jnode{end: dec.InputOffset()}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			n.kind = 'o'
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, tokenErr(dec, err)
				}
				k, ok := kt.(string)
				if !ok {
					return nil, &posError{off: dec.InputOffset(), msg: "object key is not a string"}
				}
				kend := dec.InputOffset()
				for _, seen := range n.keys {
					if seen == k {
						return nil, &posError{off: kend, msg: fmt.Sprintf("duplicate key %q", k)}
					}
				}
				val, err := readNode(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.keys, n.kends, n.vals = append(n.keys, k), append(n.kends, kend), append(n.vals, val)
			}
			if _, err := dec.Token(); err != nil {
				return nil, tokenErr(dec, err)
			}
		case '[':
			n.kind = 'a'
			for dec.More() {
				e, err := readNode(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, tokenErr(dec, err)
			}
		default:
			return nil, &posError{off: dec.InputOffset(), msg: fmt.Sprintf("unexpected %q", v)}
		}
	case string:
		n.kind, n.str = 's', v
	case json.Number:
		n.kind, n.num = 'n', v
	case bool:
		n.kind, n.b = 'b', v
	case nil:
		n.kind = 'z'
	}
	return n, nil
}

func tokenErr(dec *json.Decoder, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &posError{off: se.Offset, msg: "JSON syntax: " + se.Error()}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &posError{off: dec.InputOffset(), msg: "unexpected end of file"}
	}
	return &posError{off: dec.InputOffset(), msg: err.Error()}
}

// lineCol converts the offset just past a token of data to the 1-based
// line and column of the token's first byte.
func lineCol(data []byte, off int64) (line, col int) {
	start := tokenStart(data, off)
	line = 1 + bytes.Count(data[:start], []byte{'\n'})
	col = start - bytes.LastIndexByte(data[:start], '\n')
	return line, col
}

// tokenStart returns the offset of the first byte of the token that ends
// just before off: the opening quote of a string, the first character of
// a number or literal, the delimiter itself.
func tokenStart(data []byte, off int64) int {
	end := int(min(off, int64(len(data))))
	if end == 0 {
		return 0
	}
	i := end - 1
	switch c := data[i]; {
	case c == '"':
		for j := i - 1; j >= 0; j-- {
			if data[j] != '"' {
				continue
			}
			k := j - 1
			for k >= 0 && data[k] == '\\' {
				k--
			}
			if (j-k-1)%2 == 0 { // not escaped
				return j
			}
		}
		return i
	case c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '.' || c == '+' || c == '-':
		for i > 0 {
			p := data[i-1]
			if !(p >= '0' && p <= '9' || p >= 'a' && p <= 'z' || p >= 'A' && p <= 'Z' || p == '.' || p == '+' || p == '-') {
				break
			}
			i--
		}
	}
	return i
}
