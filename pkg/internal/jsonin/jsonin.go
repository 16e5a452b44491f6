// Package jsonin checks JSON that comes in from outside before anything
// decodes it: request bodies of the HTTP API and the A2A endpoint, and
// the events of the Lambda functions.
//
// Go's encoding/json is lenient in ways a server must not be with
// untrusted input: it matches object keys without regard to case and
// keeps the last of repeated keys (so {"method":"a","Method":"b"} can be
// checked as one thing and executed as another), it replaces invalid
// UTF-8 with U+FFFD in what it decodes while json.RawMessage keeps the raw
// bytes (which are then stored and echoed), and it accepts nesting up to
// 10,000 levels, deeper than other parts (protobuf, JavaScript clients,
// Go's own encoder of the result) handle. [Check] refuses all three, with
// an error that says where.
//
//	if err := jsonin.Check(body); err != nil {
//		return badRequest(err.Error()) // e.g. `key "Method" at $ repeats key "method"; ...`
//	}
package jsonin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects accepted in a
// JSON document: the document itself counts as level 1 when it is an
// array or object. Every entry point (the HTTP API, the A2A endpoint, the
// Lambda events) applies this one limit to the whole request body.
const MaxDepth = 64

// Error describes why a document was refused. Its message says where and
// what to fix; it names no Go types.
type Error struct {
	// Offset is the byte offset in the document where the problem was
	// found.
	Offset int64
	// Path locates the problem in JSONPath-like notation ($, $.input,
	// $.params.parts[2]).
	Path string
	// Reason is the problem, in words for the sender.
	Reason string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return fmt.Sprintf("%s at %s", e.Reason, e.Path)
}

// frame is one open array or object.
type frame struct {
	object bool
	expect bool   // object: the next token is a key
	key    string // current key (object)
	index  int    // current index (array)
	// The keys seen so far, folded and as sent; a map once there are
	// many.
	folded, sent []string
	many         map[string]string
}

// manyKeys is the number of keys past which an object's keys are looked
// up in a map rather than a slice.
const manyKeys = 16

// seen returns the key as sent that folds like folded, if any.
func (f *frame) seen(folded string) (string, bool) {
	if f.many != nil {
		prev, ok := f.many[folded]
		return prev, ok
	}
	for i, k := range f.folded {
		if k == folded {
			return f.sent[i], true
		}
	}
	return "", false
}

func (f *frame) add(folded, key string) {
	if f.many != nil {
		f.many[folded] = key
		return
	}
	f.folded, f.sent = append(f.folded, folded), append(f.sent, key)
	if len(f.folded) > manyKeys {
		f.many = make(map[string]string, 2*manyKeys)
		for i, k := range f.folded {
			f.many[k] = f.sent[i]
		}
	}
}

// Check reports whether data is acceptable JSON input: valid UTF-8 (in
// strings and everywhere else, and no \uXXXX escape of half a UTF-16
// surrogate pair, which decoders would replace with U+FFFD while raw
// copies keep it), nested at most MaxDepth levels, and with
// no object repeating a key, exactly or in another case ("id" and "ID").
// It does not check that data is a single valid JSON value beyond what it
// reads; decoders do that. A nil error means data passed.
func Check(data []byte) error {
	if !utf8.Valid(data) {
		off := invalidUTF8Offset(data)
		return &Error{Offset: int64(off), Reason: fmt.Sprintf("the body is not valid UTF-8 (byte offset %d); send text encoded as UTF-8", off)}
	}
	if off := loneSurrogateOffset(data); off >= 0 {
		return &Error{Offset: int64(off), Reason: fmt.Sprintf("the body has an escaped UTF-16 surrogate with no partner (%s at byte offset %d), which is not valid UTF-8 text; send the character itself, or both halves of its surrogate pair", data[off:off+6], off)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []frame // frames are reused, with their key slices
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			// Syntax errors are left to the decoder that follows, which
			// reports them with their position.
			return nil
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if top != nil && top.object && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				advance(stack)
				continue
			}
			key, _ := tok.(string)
			folded := fold(key)
			if prev, ok := top.seen(folded); ok {
				reason := fmt.Sprintf("key %q is repeated", key)
				if prev != key {
					reason = fmt.Sprintf("key %q repeats key %q in another case (keys are matched without regard to case)", key, prev)
				}
				return &Error{Offset: dec.InputOffset(), Path: path(stack[:len(stack)-1]), Reason: reason + "; send each key once"}
			}
			top.add(folded, key)
			top.key = key
			top.expect = false
			continue
		}
		switch d, _ := tok.(json.Delim); d {
		case '[', '{':
			if len(stack) >= MaxDepth {
				return &Error{Offset: dec.InputOffset(), Path: path(stack),
					Reason: fmt.Sprintf("the body nests arrays and objects more than %d levels deep; flatten it", MaxDepth)}
			}
			if len(stack) < cap(stack) {
				stack = stack[:len(stack)+1]
			} else {
				stack = append(stack, frame{})
			}
			f := &stack[len(stack)-1]
			f.object, f.expect, f.key, f.index = d == '{', d == '{', "", 0
			f.folded, f.sent, f.many = f.folded[:0], f.sent[:0], nil
		case ']', '}':
			stack = stack[:len(stack)-1]
			advance(stack)
		default:
			advance(stack)
		}
	}
}

// advance records that the innermost open container got a value.
func advance(stack []frame) {
	if len(stack) == 0 {
		return
	}
	top := &stack[len(stack)-1]
	if top.object {
		top.expect = true
	} else {
		top.index++
	}
}

// path renders, in JSONPath-like notation, the location of the value
// that the open containers of stack are at.
func path(stack []frame) string {
	var b strings.Builder
	b.WriteString("$")
	for i := range stack {
		member(&b, &stack[i])
	}
	return b.String()
}

func member(b *strings.Builder, f *frame) {
	if !f.object {
		b.WriteString("[" + strconv.Itoa(f.index) + "]")
		return
	}
	if f.key == "" && f.expect {
		return
	}
	if isIdent(f.key) {
		b.WriteString("." + f.key)
		return
	}
	b.WriteString("[" + strconv.Quote(f.key) + "]")
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r != '_' && !unicode.IsLetter(r) && (i == 0 || !unicode.IsDigit(r)) {
			return false
		}
	}
	return true
}

// fold maps a key to a form in which keys that encoding/json takes for
// the same field (it compares them folded rune by rune with
// ToUpper(ToLower(r))) are equal. Keys of lower-case ASCII, the common
// case, are their own form.
func fold(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			var b strings.Builder
			b.Grow(len(s))
			for _, r := range s {
				b.WriteRune(unicode.ToLower(unicode.ToUpper(unicode.ToLower(r))))
			}
			return b.String()
		}
	}
	return s
}

// Depth returns how deeply data nests arrays and objects (0 for a scalar),
// stopping early once it passes limit; a limit of 0 or less means no
// limit. It does not validate data: use it on JSON already known to be
// valid (json.RawMessage from a store, say).
func Depth(data []byte, limit int) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > deepest {
				deepest = depth
				if limit > 0 && deepest > limit {
					return deepest
				}
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// invalidUTF8Offset returns the offset of the first byte of data that is
// not part of a valid UTF-8 sequence.
func invalidUTF8Offset(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(data)
}

// loneSurrogateOffset returns the offset of the first \uXXXX escape in a
// string of data that is half of a UTF-16 surrogate pair without its
// other half, or -1 if there is none.
func loneSurrogateOffset(data []byte) int {
	if !bytes.Contains(data, []byte(`\u`)) {
		return -1
	}
	inString := false
	pendingHigh := -1 // offset of a high surrogate waiting for its low half
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			if pendingHigh >= 0 {
				return pendingHigh
			}
			inString = false
		case '\\':
			if i+1 >= len(data) {
				return -1 // the decoder reports the syntax error
			}
			if data[i+1] != 'u' {
				if pendingHigh >= 0 {
					return pendingHigh
				}
				i++ // an escaped character: skip it
				continue
			}
			if i+6 > len(data) {
				return -1
			}
			v, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
			if err != nil {
				return -1
			}
			switch {
			case v >= 0xD800 && v < 0xDC00:
				if pendingHigh >= 0 {
					return pendingHigh
				}
				pendingHigh = i
			case v >= 0xDC00 && v < 0xE000:
				if pendingHigh < 0 {
					return i
				}
				pendingHigh = -1
			default:
				if pendingHigh >= 0 {
					return pendingHigh
				}
			}
			i += 5
		default:
			if pendingHigh >= 0 {
				return pendingHigh
			}
		}
	}
	return -1
}
