package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool is something a model can call.
type Tool interface {
	// Spec describes the tool to the model.
	Spec() ToolSpec
	// Call runs the tool with the model's arguments and returns its
	// output as text. Arguments that do not fit the tool's schema give an
	// error wrapping [ErrInvalidArguments].
	Call(ctx context.Context, input json.RawMessage) (string, error)
}

// ErrInvalidArguments is wrapped by the error a tool returns when the
// model's arguments do not fit its input schema. The tool node returns
// such errors to the model, without retrying.
var ErrInvalidArguments = errors.New("invalid arguments")

// funcTool is a Tool made from a Go function.
type funcTool[In, Out any] struct {
	spec     ToolSpec
	resolved *jsonschema.Resolved
	fn       func(context.Context, In) (Out, error)
}

// NewTool makes a tool of a Go function. Its input schema is derived from
// In, which must be a struct: each exported field is a property named by
// its json tag, required unless tagged omitempty or omitzero, described by
// its `jsonschema:"..."` tag. The model's arguments are validated against
// the schema before fn is called. Out is returned to the model as is when
// it is a string, as JSON otherwise.
func NewTool[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) (Tool, error) {
	if name == "" || fn == nil {
		return nil, errors.New("agent: a tool needs a name and a function")
	}
	s, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %q: derive the input schema: %w", name, err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("agent: tool %q: its argument must be a struct (models send an object), not %q", name, s.Type)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %q: resolve the input schema: %w", name, err)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %q: encode the input schema: %w", name, err)
	}
	return &funcTool[In, Out]{spec: ToolSpec{Name: name, Description: description, InputSchema: raw}, resolved: resolved, fn: fn}, nil
}

// MustTool is NewTool that panics on error, for tools defined at package
// level whose schema is known to be valid.
func MustTool[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) Tool {
	t, err := NewTool(name, description, fn)
	if err != nil {
		panic(err)
	}
	return t
}

func (t *funcTool[In, Out]) Spec() ToolSpec { return t.spec }

func (t *funcTool[In, Out]) Call(ctx context.Context, input json.RawMessage) (out string, err error) {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	var generic any
	if err := json.Unmarshal(input, &generic); err != nil {
		return "", fmt.Errorf("%w: not JSON: %v", ErrInvalidArguments, err)
	}
	if err := t.resolved.Validate(generic); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidArguments, err)
	}
	var in In
	if err := json.Unmarshal(input, &in); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidArguments, err)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %q panicked: %v", t.spec.Name, p)
		}
	}()
	res, err := t.fn(ctx, in)
	if err != nil {
		return "", err
	}
	if s, ok := any(res).(string); ok {
		return s, nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return "", fmt.Errorf("tool %q: encode its result: %w", t.spec.Name, err)
	}
	return string(b), nil
}
