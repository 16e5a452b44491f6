package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The HTTP+JSON binding is the proto3 JSON mapping of the A2A proto, and
// a proto3 JSON parser accepts each field under its JSON name
// (lowerCamelCase, messageId) and under its proto name (message_id).
// a2a-go's REST transport decodes its own types with encoding/json,
// which know the JSON names only; clients built on the proto's original
// names (the TCK's REST client among them) would be told "messageId is
// required". protoNames renames the proto names of a request body to
// the JSON names before the body is checked and handed to the SDK.

// protoMessage is the proto message of a request body, with the proto
// names of its fields (and of the fields of the messages in it) that
// differ from their JSON names, quoted as they would be as keys.
type protoMessage struct {
	md    protoreflect.MessageDescriptor
	names [][]byte // `"message_id"`, …
}

// newProtoMessage describes the proto message of m.
func newProtoMessage(m protoreflect.ProtoMessage) protoMessage {
	pm := protoMessage{md: m.ProtoReflect().Descriptor()}
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] || wellKnown(md) {
			return
		}
		seen[md.FullName()] = true
		for i := 0; i < md.Fields().Len(); i++ {
			fd := md.Fields().Get(i)
			if string(fd.Name()) != fd.JSONName() {
				pm.names = append(pm.names, []byte(strconv.Quote(string(fd.Name()))))
			}
			if fd.IsMap() {
				fd = fd.MapValue()
			}
			if fd.Message() != nil {
				walk(fd.Message())
			}
		}
	}
	walk(pm.md)
	return pm
}

// mayName reports whether body may name a field by its proto name: it
// holds one of them as a quoted string. A body without any (most, and
// every one a2a-go's client sends) is not walked.
func (pm protoMessage) mayName(body []byte) bool {
	for _, n := range pm.names {
		if bytes.Contains(body, n) {
			return true
		}
	}
	return false
}

// protoNames rewrites the keys of body, a JSON object of the proto
// message pm, that name a field by its proto name (message_id) to the
// field's JSON name (messageId), through every nested message, repeated
// message and map of messages. The keys inside the well-known types
// (google.protobuf.Struct and Value: metadata, a data part's data) are
// the caller's own and are kept. Unknown keys are kept for the checks
// that follow. A field given under both of its names is refused, naming
// both. body is returned as it is when no key was renamed; the caller
// has checked it with jsonin (well-formed, no repeated keys).
func protoNames(pm protoMessage, body []byte) ([]byte, *core.Error) {
	if !pm.mayName(body) {
		return body, nil
	}
	out, changed, err := renameFields(pm.md, body, "")
	if err != nil {
		return nil, err
	}
	if !changed {
		return body, nil
	}
	return out, nil
}

// renameFields renames the keys of raw, a JSON value meant to be a
// message md, at path (for errors, "" at the top).
func renameFields(md protoreflect.MessageDescriptor, raw json.RawMessage, path string) (json.RawMessage, bool, *core.Error) {
	if wellKnown(md) {
		return raw, false, nil
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return raw, false, nil // not an object: the type check that follows says so
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return raw, false, nil // the body's own check reports it
	}
	changed := false
	renamed := make(map[string]json.RawMessage, len(obj))
	given := make(map[string]string, len(obj)) // the JSON name → the key it was given as
	fields := md.Fields()
	for k, v := range obj {
		fd := fields.ByJSONName(k)
		if fd == nil {
			if fd = fields.ByName(protoreflect.Name(k)); fd != nil && fd.JSONName() != k {
				changed = true
			}
		}
		name := k
		if fd != nil {
			name = fd.JSONName()
			nv, c, err := renameValue(fd, v, join(path, name))
			if err != nil {
				return nil, false, err
			}
			v, changed = nv, changed || c
		}
		if first, dup := given[name]; dup {
			a, b := first, k
			if b < a {
				a, b = b, a
			}
			return nil, false, core.NewError(core.ErrInvalidRequest, fmt.Sprintf("field %q is given twice, as %q and %q (its proto name and its JSON name); give it once", join(path, name), a, b))
		}
		given[name] = k
		renamed[name] = v
	}
	if !changed {
		return raw, false, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(renamed); err != nil {
		return nil, false, core.NewError(core.ErrParseError, "the request body is not valid JSON")
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), true, nil
}

// renameValue renames the fields of a field's value: a message, a list
// of messages or a map whose values are messages; other values are kept.
func renameValue(fd protoreflect.FieldDescriptor, v json.RawMessage, path string) (json.RawMessage, bool, *core.Error) {
	var md protoreflect.MessageDescriptor
	switch {
	case fd.IsMap():
		md = fd.MapValue().Message()
	default:
		md = fd.Message()
	}
	if md == nil || wellKnown(md) {
		return v, false, nil
	}
	trimmed := bytes.TrimSpace(v)
	switch {
	case fd.IsList():
		if len(trimmed) == 0 || trimmed[0] != '[' {
			return v, false, nil
		}
		var items []json.RawMessage
		if json.Unmarshal(trimmed, &items) != nil {
			return v, false, nil
		}
		changed := false
		for i, item := range items {
			ni, c, err := renameFields(md, item, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, false, err
			}
			items[i], changed = ni, changed || c
		}
		if !changed {
			return v, false, nil
		}
		b, err := marshalRaw(items)
		return b, err == nil, err
	case fd.IsMap():
		if len(trimmed) == 0 || trimmed[0] != '{' {
			return v, false, nil
		}
		var entries map[string]json.RawMessage
		if json.Unmarshal(trimmed, &entries) != nil {
			return v, false, nil
		}
		changed := false
		for k, e := range entries {
			ne, c, err := renameFields(md, e, path+"["+strconv.Quote(k)+"]")
			if err != nil {
				return nil, false, err
			}
			entries[k], changed = ne, changed || c
		}
		if !changed {
			return v, false, nil
		}
		b, err := marshalRaw(entries)
		return b, err == nil, err
	}
	return renameFields(md, v, path)
}

// marshalRaw encodes a list or map of JSON values without escaping HTML
// characters the caller sent unescaped.
func marshalRaw(v any) (json.RawMessage, *core.Error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, core.NewError(core.ErrParseError, "the request body is not valid JSON")
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// wellKnown reports whether md is one of protobuf's well-known types
// (Struct, Value, ListValue, Timestamp, …), whose JSON form is not an
// object of its fields.
func wellKnown(md protoreflect.MessageDescriptor) bool {
	return strings.HasPrefix(string(md.FullName()), "google.protobuf.")
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
