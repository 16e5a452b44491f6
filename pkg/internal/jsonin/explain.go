package jsonin

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
)

// Explain returns err's message with the text of an encoding/json type
// error in its chain replaced by words for the sender: which field, what
// was expected and what was sent, without Go type names ("field \"id\"
// must be a string, not a number" rather than "cannot unmarshal number
// into Go struct field GetTaskRequest.id of type a2a.TaskID"). Other
// messages are returned as they are.
func Explain(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		msg = strings.Replace(msg, te.Error(), DescribeTypeError(te), 1)
	}
	// The error may have been flattened to its text on the way.
	return typeErrorText.ReplaceAllStringFunc(msg, func(m string) string {
		sub := typeErrorText.FindStringSubmatch(m)
		value, structField, typ := sub[1], sub[2], sub[3]
		field := ""
		if structField != "" {
			// Struct.field.path: the struct's Go name is of no use to
			// the sender.
			_, field, _ = strings.Cut(structField, ".")
		}
		subject := "the value"
		if field != "" {
			subject = fmt.Sprintf("field %q", field)
		}
		if kind := kindOfTypeName(typ); kind != "value" {
			return fmt.Sprintf("%s must be %s, not %s", subject, article(kind), article(value))
		}
		return fmt.Sprintf("%s cannot be %s", subject, article(value))
	})
}

// typeErrorText matches the text of a *json.UnmarshalTypeError: the JSON
// value, the struct field (if any) and the Go type.
var typeErrorText = regexp.MustCompile(`(?:json: )?cannot unmarshal (\S+(?: -?[0-9][^ ]*)?) into Go (?:struct field (\S+)|value) of type ([^\s:;,]+)`)

// kindOfTypeName is Kind for a Go type known only by its name.
func kindOfTypeName(name string) string {
	name = strings.TrimLeft(name, "*")
	switch {
	case name == "string":
		return "string"
	case name == "bool":
		return "boolean"
	case strings.HasPrefix(name, "int"):
		return "whole number"
	case strings.HasPrefix(name, "uint"):
		return "whole number of 0 or more"
	case strings.HasPrefix(name, "float"):
		return "number"
	case strings.HasPrefix(name, "["):
		return "array"
	case strings.HasPrefix(name, "map["):
		return "object"
	}
	return "value"
}

// DescribeTypeError says what a type error means for the sender of the
// JSON: the field (a dotted path, when known), the kind of JSON value
// expected and the kind sent.
func DescribeTypeError(te *json.UnmarshalTypeError) string {
	want := article(Kind(te.Type))
	if te.Field == "" {
		return fmt.Sprintf("the value must be %s, not %s", want, article(te.Value))
	}
	return fmt.Sprintf("field %q must be %s, not %s", te.Field, want, article(te.Value))
}

// Kind names the kind of JSON value a Go type decodes from: string,
// (whole) number, boolean, object, array; "value" when any will do.
func Kind(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number of 0 or more"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "value"
}

func article(kind string) string {
	switch {
	case kind == "object" || kind == "array":
		return "an " + kind
	case strings.HasPrefix(kind, "number "):
		// encoding/json reports numbers that do not fit as "number 1.5".
		return strings.TrimPrefix(kind, "number ")
	case kind == "value":
		return "another value"
	}
	return "a " + kind
}
