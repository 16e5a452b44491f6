package longterm

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Filter selects items by the fields of their values: each entry names a
// field (a dotted path into nested objects: "address.city") and either a
// value the field must equal, or an object of operators: {"$eq": v},
// {"$ne": v}, {"$gt": v}, {"$gte": v}, {"$lt": v}, {"$lte": v} (the
// comparisons between two numbers or two strings; a field missing or of
// another type does not match). An item matches when every entry does.
type Filter map[string]any

// operators are a Filter's comparison operators.
var operators = map[string]bool{"$eq": true, "$ne": true, "$gt": true, "$gte": true, "$lt": true, "$lte": true}

// normalize returns f with its values as encoding/json decodes them
// (numbers as float64), and checks its operators.
func (f Filter) normalize() (Filter, error) {
	if len(f) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("%w: the filter is not JSON: %v", ErrInvalid, err)
	}
	var out Filter
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%w: the filter is not JSON: %v", ErrInvalid, err)
	}
	for field, want := range out {
		if field == "" || strings.HasPrefix(field, ".") || strings.HasSuffix(field, ".") || strings.Contains(field, "..") {
			return nil, fmt.Errorf("%w: filter field %q: name a field, or a dotted path such as address.city", ErrInvalid, field)
		}
		ops, ok := want.(map[string]any)
		if !ok || !hasOperator(ops) {
			continue
		}
		for op := range ops {
			if !operators[op] {
				return nil, fmt.Errorf("%w: filter field %q: unknown operator %q: use $eq, $ne, $gt, $gte, $lt or $lte", ErrInvalid, field, op)
			}
		}
	}
	return out, nil
}

// hasOperator reports whether an object in a filter is one of operators
// (its keys start with '$') rather than a value to equal.
func hasOperator(m map[string]any) bool {
	for k := range m {
		if strings.HasPrefix(k, "$") {
			return true
		}
	}
	return false
}

// matches reports whether a value (a JSON object) satisfies f, which
// normalize returned.
func (f Filter) matches(value json.RawMessage) bool {
	if len(f) == 0 {
		return true
	}
	var doc any
	if err := json.Unmarshal(value, &doc); err != nil {
		return false
	}
	for field, want := range f {
		got, ok := lookup(doc, field)
		if ops, isOps := want.(map[string]any); isOps && hasOperator(ops) {
			for op, v := range ops {
				if !compare(op, got, ok, v) {
					return false
				}
			}
			continue
		}
		if !ok || !reflect.DeepEqual(got, want) {
			return false
		}
	}
	return true
}

// lookup follows a dotted path into doc.
func lookup(doc any, path string) (any, bool) {
	for _, part := range strings.Split(path, ".") {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil, false
		}
		if doc, ok = m[part]; !ok {
			return nil, false
		}
	}
	return doc, true
}

// compare applies one operator.
func compare(op string, got any, present bool, want any) bool {
	switch op {
	case "$eq":
		return present && reflect.DeepEqual(got, want)
	case "$ne":
		return !present || !reflect.DeepEqual(got, want)
	}
	if !present {
		return false
	}
	var c int
	switch g := got.(type) {
	case float64:
		w, ok := want.(float64)
		if !ok {
			return false
		}
		c = cmpOrdered(g, w)
	case string:
		w, ok := want.(string)
		if !ok {
			return false
		}
		c = cmpOrdered(g, w)
	default:
		return false
	}
	switch op {
	case "$gt":
		return c > 0
	case "$gte":
		return c >= 0
	case "$lt":
		return c < 0
	case "$lte":
		return c <= 0
	}
	return false
}

func cmpOrdered[T float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
