package pregel

import (
	"context"
	"fmt"
	"reflect"
)

// Runnable is a compiled graph whose state type is S: its Invoke and
// Resume take and return S, so a caller reads the run's state as the
// struct it declared, without decoding [Result.Values]. Make one with
// [NewRunnable]; it is safe for concurrent use, as the Graph is.
type Runnable[S any] struct {
	g *Graph
}

// NewRunnable returns g as a Runnable of its state type S. It fails when
// g was built with another state type (see [Graph.StateType]).
func NewRunnable[S any](g *Graph) (*Runnable[S], error) {
	if g == nil {
		return nil, fmt.Errorf("pregel: NewRunnable of a nil graph")
	}
	if want := reflect.TypeFor[S](); g.StateType() != want {
		return nil, fmt.Errorf("pregel: graph %q has state type %v, not %v", g.Name(), g.StateType(), want)
	}
	return &Runnable[S]{g: g}, nil
}

// CompileRunnable compiles the graph as [Builder.Compile] does and returns
// it as a Runnable of its state type.
func (b *Builder[S]) CompileRunnable(opts ...CompileOption) (*Runnable[S], error) {
	g, err := b.Compile(opts...)
	if err != nil {
		return nil, err
	}
	return &Runnable[S]{g: g}, nil
}

// TypedResult is a [Result] with the run's state decoded into S.
type TypedResult[S any] struct {
	*Result
	// State is the run's state after its last committed step.
	State S
}

// Graph returns the compiled graph (to register it with a runtime, or to
// draw it).
func (r *Runnable[S]) Graph() *Graph { return r.g }

// Invoke runs the graph with input as [Graph.Run] does and returns where
// the run stands with its state decoded. As with Run, the error is non-nil
// only when the run failed or could not be stored; a failed run's result
// is returned with it when there is one.
func (r *Runnable[S]) Invoke(ctx context.Context, input S, opts ...RunOption) (*TypedResult[S], error) {
	res, err := r.g.Run(ctx, input, opts...)
	return typed[S](res, err)
}

// Resume continues a run as [Graph.Resume] does and returns where it
// stands with its state decoded.
func (r *Runnable[S]) Resume(ctx context.Context, runID string, opts ...RunOption) (*TypedResult[S], error) {
	res, err := r.g.Resume(ctx, runID, opts...)
	return typed[S](res, err)
}

// typed decodes res's state; the run's own error comes first.
func typed[S any](res *Result, err error) (*TypedResult[S], error) {
	if res == nil {
		return nil, err
	}
	out := &TypedResult[S]{Result: res}
	if derr := res.Decode(&out.State); derr != nil && err == nil {
		err = fmt.Errorf("pregel: decode the state of run %q: %w", res.RunID, derr)
	}
	return out, err
}
