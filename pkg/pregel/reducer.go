package pregel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Reducer combines a channel's current value with an update. Both are JSON;
// cur is nil when the channel has no value yet. A reducer must be
// deterministic and must not modify its arguments.
type Reducer func(cur, update json.RawMessage) (json.RawMessage, error)

// Built-in reducer names, usable in a field's `reduce` tag.
const (
	ReduceLast   = "last"   // the update replaces the value (the default)
	ReduceAppend = "append" // arrays are concatenated; a non-array update is appended as one element
	ReduceMerge  = "merge"  // objects are merged key by key, the update winning
	ReduceSum    = "sum"    // numbers are added
)

func builtinReducers() map[string]Reducer {
	return map[string]Reducer{
		ReduceLast:   nil,
		ReduceAppend: appendReducer,
		ReduceMerge:  mergeReducer,
		ReduceSum:    sumReducer,
	}
}

// ReducerOf adapts a typed function to a Reducer: cur is the zero T when the
// channel has no value yet.
func ReducerOf[T any](fn func(cur, update T) T) Reducer {
	return func(cur, update json.RawMessage) (json.RawMessage, error) {
		var c, u T
		if len(cur) > 0 {
			if err := json.Unmarshal(cur, &c); err != nil {
				return nil, fmt.Errorf("decode current value: %w", err)
			}
		}
		if err := json.Unmarshal(update, &u); err != nil {
			return nil, fmt.Errorf("decode update: %w", err)
		}
		return json.Marshal(fn(c, u))
	}
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

func appendReducer(cur, update json.RawMessage) (json.RawMessage, error) {
	update = bytes.TrimSpace(update)
	if isNull(update) {
		return cur, nil
	}
	if update[0] != '[' {
		update = append(append([]byte{'['}, update...), ']')
	}
	cur = bytes.TrimSpace(cur)
	if isNull(cur) {
		return update, nil
	}
	if cur[0] != '[' {
		return nil, fmt.Errorf("append: current value is not an array")
	}
	if !json.Valid(update) {
		return nil, fmt.Errorf("append: update is not valid JSON")
	}
	curEmpty := len(bytes.TrimSpace(cur[1:len(cur)-1])) == 0
	updEmpty := len(bytes.TrimSpace(update[1:len(update)-1])) == 0
	switch {
	case updEmpty:
		return cur, nil
	case curEmpty:
		return update, nil
	}
	out := make([]byte, 0, len(cur)+len(update))
	out = append(out, cur[:len(cur)-1]...)
	out = append(out, ',')
	out = append(out, update[1:]...)
	return out, nil
}

func mergeReducer(cur, update json.RawMessage) (json.RawMessage, error) {
	if isNull(update) {
		return cur, nil
	}
	var c, u map[string]json.RawMessage
	if !isNull(cur) {
		if err := json.Unmarshal(cur, &c); err != nil {
			return nil, fmt.Errorf("merge: current value is not an object: %w", err)
		}
	}
	if err := json.Unmarshal(update, &u); err != nil {
		return nil, fmt.Errorf("merge: update is not an object: %w", err)
	}
	if c == nil {
		c = make(map[string]json.RawMessage, len(u))
	}
	for k, v := range u {
		c[k] = v
	}
	return json.Marshal(c) // map keys are sorted: deterministic
}

func sumReducer(cur, update json.RawMessage) (json.RawMessage, error) {
	if isNull(update) {
		return cur, nil
	}
	if isNull(cur) {
		cur = json.RawMessage("0")
	}
	a, b := string(bytes.TrimSpace(cur)), string(bytes.TrimSpace(update))
	x, errX := strconv.ParseInt(a, 10, 64)
	y, errY := strconv.ParseInt(b, 10, 64)
	if errX == nil && errY == nil {
		if s := x + y; (s > x) == (y > 0) {
			return strconv.AppendInt(nil, s, 10), nil
		}
	}
	fx, err := strconv.ParseFloat(a, 64)
	if err != nil {
		return nil, fmt.Errorf("sum: current value %s is not a number", a)
	}
	fy, err := strconv.ParseFloat(b, 64)
	if err != nil {
		return nil, fmt.Errorf("sum: update %s is not a number", b)
	}
	s := fx + fy
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return nil, fmt.Errorf("sum: %s + %s overflows", a, b)
	}
	return strconv.AppendFloat(nil, s, 'g', -1, 64), nil
}
