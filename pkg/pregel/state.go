package pregel

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// channel is one field of the state struct.
type channel struct {
	name    string
	index   []int
	reducer string // name of the reducer; "" or "last" for last value
	typ     reflect.Type
}

// schema maps a state struct S to its channels.
type schema[S any] struct {
	channels []channel
	byName   map[string]int
}

// newSchema reads the channels of S: every exported field, named by its
// json tag (or field name), with the reducer named by its `reduce` tag.
func newSchema[S any]() (*schema[S], error) {
	t := reflect.TypeFor[S]()
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("pregel: state type %s must be a struct", t)
	}
	s := &schema[S]{byName: make(map[string]int)}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		if _, dup := s.byName[name]; dup {
			return nil, fmt.Errorf("pregel: state type %s has two fields named %q", t, name)
		}
		s.byName[name] = len(s.channels)
		s.channels = append(s.channels, channel{name: name, index: f.Index, reducer: f.Tag.Get("reduce"), typ: f.Type})
	}
	if len(s.channels) == 0 {
		return nil, fmt.Errorf("pregel: state type %s has no exported fields to use as channels", t)
	}
	return s, nil
}

// zero returns a pointer to a new zero value of channel i's type.
func (s *schema[S]) zero(i int) any { return reflect.New(s.channels[i].typ).Interface() }

func (s *schema[S]) names() []string {
	out := make([]string, len(s.channels))
	for i, c := range s.channels {
		out[i] = c.name
	}
	return out
}

// decode builds an S from channel values.
func (s *schema[S]) decode(values map[string]json.RawMessage) (S, error) {
	var out S
	v := reflect.ValueOf(&out).Elem()
	for name, raw := range values {
		i, ok := s.byName[name]
		if !ok || len(raw) == 0 {
			continue
		}
		f := v.FieldByIndex(s.channels[i].index)
		if err := json.Unmarshal(raw, f.Addr().Interface()); err != nil {
			return out, fmt.Errorf("decode channel %q: %w", name, err)
		}
	}
	return out, nil
}

// encode returns the writes of a partial state: every field in declared,
// and, when declared is empty, every field that is not its zero value.
func (s *schema[S]) encode(st S, declared []string) (map[string]json.RawMessage, error) {
	v := reflect.ValueOf(&st).Elem()
	var out map[string]json.RawMessage
	for _, c := range s.channels {
		f := v.FieldByIndex(c.index)
		if len(declared) > 0 {
			if !slices.Contains(declared, c.name) {
				continue
			}
		} else if f.IsZero() {
			continue
		}
		raw, err := json.Marshal(f.Interface())
		if err != nil {
			return nil, fmt.Errorf("encode channel %q: %w", c.name, err)
		}
		if out == nil {
			out = make(map[string]json.RawMessage)
		}
		out[c.name] = raw
	}
	return out, nil
}

// undeclared returns the first non-zero field of st outside declared.
func (s *schema[S]) undeclared(st S, declared []string) (string, bool) {
	v := reflect.ValueOf(&st).Elem()
	for _, c := range s.channels {
		if !slices.Contains(declared, c.name) && !v.FieldByIndex(c.index).IsZero() {
			return c.name, true
		}
	}
	return "", false
}

// decodeAfter builds the S that values hold once writes are applied with
// reduce, without building the reduced map.
func (s *schema[S]) decodeAfter(values, writes map[string]json.RawMessage, reduce func(ch string, cur, w json.RawMessage) (json.RawMessage, error)) (S, error) {
	var out S
	v := reflect.ValueOf(&out).Elem()
	set := func(name string, raw json.RawMessage) error {
		i, ok := s.byName[name]
		if !ok || len(raw) == 0 { // no value
			return nil
		}
		f := v.FieldByIndex(s.channels[i].index)
		if err := json.Unmarshal(raw, f.Addr().Interface()); err != nil {
			return fmt.Errorf("decode channel %q: %w", name, err)
		}
		return nil
	}
	for name, raw := range values {
		if _, w := writes[name]; !w {
			if err := set(name, raw); err != nil {
				return out, err
			}
		}
	}
	for name, w := range writes {
		raw, err := reduce(name, values[name], w)
		if err != nil {
			return out, fmt.Errorf("channel %q: %w", name, err)
		}
		if err := set(name, raw); err != nil {
			return out, err
		}
	}
	return out, nil
}
