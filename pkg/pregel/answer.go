package pregel

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// JSON types an interrupt's answer may be required to have (the type names
// of JSON Schema).
const (
	TypeString  = "string"
	TypeInteger = "integer"
	TypeNumber  = "number"
	TypeBoolean = "boolean"
	TypeArray   = "array"
	TypeObject  = "object"
)

// jsonTypeOf returns the JSON type a value must have to decode into t, or
// "" when t accepts several (an interface, a type with its own
// UnmarshalJSON or UnmarshalText).
func jsonTypeOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pt := reflect.PointerTo(t)
	if pt.Implements(reflect.TypeFor[json.Unmarshaler]()) || pt.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) || t == reflect.TypeFor[json.Number]() {
		return ""
	}
	switch t.Kind() {
	case reflect.Bool:
		return TypeBoolean
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return TypeInteger
	case reflect.Float32, reflect.Float64:
		return TypeNumber
	case reflect.String:
		return TypeString
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(reflect.TypeFor[json.Unmarshaler]()) {
			return TypeString // base64
		}
		return TypeArray
	case reflect.Array:
		return TypeArray
	case reflect.Map, reflect.Struct:
		return TypeObject
	}
	return ""
}

// jsonTypeOfValue returns the JSON type of a valid JSON value, "null" for
// null.
func jsonTypeOfValue(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	switch v[0] {
	case '"':
		return TypeString
	case '{':
		return TypeObject
	case '[':
		return TypeArray
	case 't', 'f':
		return TypeBoolean
	case 'n':
		return "null"
	}
	if bytes.ContainsAny(v, ".eE") {
		return TypeNumber
	}
	return TypeInteger
}

// article prefixes a JSON type name with "a" or "an".
func article(typ string) string {
	switch typ {
	case TypeInteger, TypeArray, TypeObject:
		return "an " + typ
	case "null":
		return typ
	}
	return "a " + typ
}

// Check reports whether value can answer the interrupt: it must be JSON
// of the interrupt's Type (null and, for a number, an integer are
// accepted too). The error wraps ErrInvalidResume and says what was
// expected.
func (in InterruptInfo) Check(value json.RawMessage) error {
	if len(bytes.TrimSpace(value)) == 0 || !json.Valid(value) {
		return fmt.Errorf("%w: the answer to interrupt %s is not valid JSON", ErrInvalidResume, in.ID)
	}
	if in.Type == "" {
		return nil
	}
	got := jsonTypeOfValue(value)
	if got == in.Type || got == "null" || in.Type == TypeNumber && got == TypeInteger {
		return nil
	}
	return fmt.Errorf("%w: interrupt %s of node %q wants %s as its answer, not %s", ErrInvalidResume, in.ID, in.Node, article(in.Type), article(got))
}

// CheckAnswers reports whether resume values fit the interrupts they
// answer: all answers every interrupt in interrupts, byID those it names.
// It checks types only (see [InterruptInfo.Check]); it does not require an
// answer for every interrupt nor refuse ids that are not among them. The
// error wraps ErrInvalidResume.
func CheckAnswers(interrupts []InterruptInfo, all json.RawMessage, byID map[string]json.RawMessage) error {
	for _, in := range interrupts {
		v, ok := byID[in.ID]
		if !ok && len(all) > 0 {
			v, ok = all, true
		}
		if !ok {
			continue
		}
		if err := in.Check(v); err != nil {
			return err
		}
	}
	return nil
}

// answerError says why an answer of the right JSON type still did not
// decode, without Go type names.
func answerError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		want := jsonTypeOf(te.Type)
		if want == "" {
			want = "another type"
		} else {
			want = article(want)
		}
		if te.Field != "" {
			return fmt.Errorf("%w: in the answer, %q is %s, want %s", ErrInvalidResume, te.Field, describeJSONValue(te.Value), want)
		}
		return fmt.Errorf("%w: the answer is %s, want %s", ErrInvalidResume, describeJSONValue(te.Value), want)
	case errors.As(err, &se):
		return fmt.Errorf("%w: the answer is not valid JSON", ErrInvalidResume)
	}
	return fmt.Errorf("%w: the answer was refused: %v", ErrInvalidResume, err)
}

// describeJSONValue turns the Value of a json.UnmarshalTypeError ("string",
// "number 3.5", "object") into words.
func describeJSONValue(v string) string {
	switch v {
	case "string", "number", "bool", "object", "array":
		if v == "bool" {
			v = TypeBoolean
		}
		return article(v)
	}
	return v
}
