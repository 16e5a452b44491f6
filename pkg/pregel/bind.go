package pregel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// bind attaches the typed behaviour of the builder's nodes, routers and
// fan-outs to the compiled graph.
func (b *Builder[S]) bind(g *Graph) {
	sc := b.schema
	routesFrom := func(from string) func(ctx context.Context, st S) ([]Trigger, error) {
		var rs []*builderRouter[S]
		var fs []*builderFanOut[S]
		for _, r := range b.routers {
			if r.from == from {
				rs = append(rs, r)
			}
		}
		for _, f := range b.fanouts {
			if f.from == from {
				fs = append(fs, f)
			}
		}
		if len(rs) == 0 && len(fs) == 0 {
			return nil
		}
		where := "router of " + from
		return func(ctx context.Context, st S) (out []Trigger, err error) {
			defer recoverInto(&err, where)
			for _, r := range rs {
				names, err := r.fn(ctx, st)
				if err != nil {
					return nil, fmt.Errorf("router of %q: %w", from, err)
				}
				for _, n := range names {
					if !slices.Contains(r.targets, n) {
						return nil, fmt.Errorf("router of %q returned %q, which is not among its declared targets %v", from, n, r.targets)
					}
					if n != End {
						out = append(out, Trigger{Node: n, From: []string{from}})
					}
				}
			}
			for _, f := range fs {
				items, err := f.fn(ctx, st)
				if err != nil {
					return nil, fmt.Errorf("fan-out from %q: %w", from, err)
				}
				fan := ""
				if p := g.fanPolicies[fanKey(f.from, f.to)]; p != nil {
					if p.min > len(items) {
						return nil, fanItemsError(p, len(items))
					}
					fan = "start"
					if tc := taskFrom(ctx); tc != nil {
						fan = tc.info.TaskID
					}
				}
				if len(items) == 0 && !f.emptyEnds {
					out = append(out, Trigger{Node: f.to, From: []string{from}, Send: true, Skip: "fan-out from " + from + " produced no items"})
				}
				for i, it := range items {
					raw, err := json.Marshal(it)
					if err != nil {
						return nil, fmt.Errorf("fan-out from %q: encode item %d: %w", from, i, err)
					}
					out = append(out, Trigger{Node: f.to, From: []string{from}, Send: true, Arg: raw, Fan: fan})
				}
			}
			return out, nil
		}
	}
	if sr := routesFrom(Start); sr != nil {
		g.startRoutes = func(ctx context.Context, values map[string]json.RawMessage) ([]Trigger, error) {
			st, err := sc.decode(values)
			if err != nil {
				return nil, err
			}
			return sr(ctx, st)
		}
	}
	g.encodeInput = func(input any) (json.RawMessage, bool, error) {
		var st S
		switch v := input.(type) {
		case S:
			st = v
		case *S:
			st = *v
		default:
			return nil, false, nil
		}
		w, err := sc.encode(st, nil)
		if err != nil {
			return nil, true, err
		}
		raw, err := json.Marshal(w)
		return raw, true, err
	}
	g.checkInput = func(values map[string]json.RawMessage) error {
		st, err := sc.decode(values)
		if err != nil {
			return err
		}
		if b.validate != nil {
			return b.validate(st)
		}
		return nil
	}
	for name, bn := range b.nodes {
		n := g.nodes[name]
		n.run = b.runner(g, n, bn, routesFrom(name))
	}
}

// runner builds the function that executes one task of a node.
func (b *Builder[S]) runner(g *Graph, n *node, bn *builderNode[S], routes func(context.Context, S) ([]Trigger, error)) func(context.Context, *taskContext, map[string]json.RawMessage) TaskResult {
	sc := b.schema
	impl := bn.node
	declared := n.info.Writes
	where := "node " + n.info.ID
	// What the node and its routers see (reads.go): nil is everything.
	view := n.view()
	var routeView []string
	if view != nil {
		routeView = slices.Compact(slices.Sorted(slices.Values(slices.Concat(view, declared))))
	}
	return func(ctx context.Context, tc *taskContext, values map[string]json.RawMessage) (res TaskResult) {
		res = TaskResult{TaskID: tc.info.TaskID, Node: n.info.ID}
		fail := func(err error) TaskResult {
			res.Status, res.Error = NodeFailed, err.Error()
			return res
		}
		st, err := sc.decodeView(values, view)
		if err != nil {
			return fail(err)
		}
		var update S
		report := func(err error) {
			for _, h := range b.after {
				h(ctx, NodeReport{Info: n.info, Status: res.Status, Reason: res.Reason, Attempts: res.Attempts, Err: err}, update)
			}
		}
		// Decide whether the node runs at all.
		if tc.trigger.Skip != "" {
			res.Status, res.Reason = NodeSkipped, tc.trigger.Skip
		}
		for _, h := range b.before {
			if res.Status != "" {
				break
			}
			d := h(ctx, n.info, st)
			if d.Action == Skip || d.Action == Cancel {
				res.Status, res.Reason = NodeSkipped, d.Reason
				if d.Action == Cancel {
					res.Status = NodeCancelled
				}
				break
			}
		}
		if res.Status == "" {
			if c, ok := impl.(Conditional[S]); ok && !c.ShouldExecute(ctx, st) {
				res.Status, res.Reason = NodeSkipped, "ShouldExecute returned false"
			}
		}
		if res.Status == NodeCancelled {
			report(nil)
			return res
		}
		if res.Status == NodeSkipped {
			if routes != nil {
				if res.Routes, err = routes(ctx, st); err != nil {
					return fail(err)
				}
			}
			report(nil)
			return res
		}
		if v, ok := impl.(Validator[S]); ok {
			if err := v.Validate(ctx, st); err != nil {
				err = fmt.Errorf("node %q: invalid input: %w", n.info.ID, err)
				res.Status, res.Error = NodeFailed, err.Error()
				report(err)
				return res
			}
		}
		// Attempts, with the retry policy.
		for attempt := 1; ; attempt++ {
			tc.info.Attempt, res.Attempts = attempt, attempt
			tc.newAttempt()
			if attempt > 1 {
				if st, err = sc.decodeView(values, view); err != nil { // a fresh copy: the last attempt may have changed it
					return fail(err)
				}
			}
			update, err = b.attempt(ctx, n, impl, st, where)
			if err == nil {
				break
			}
			var ie *InterruptError
			if errors.As(err, &ie) {
				res.Status, res.Interrupts = NodeInterrupted, []InterruptInfo{ie.Interrupt}
				return res
			}
			if ctx.Err() != nil {
				res.Status, res.Reason, res.Error = NodeCancelled, "run cancelled", err.Error()
				return res
			}
			if attempt >= n.retry.attempts() || !n.retry.retryable(err) {
				if h, ok := impl.(FailureHook[S]); ok {
					h.OnFailure(ctx, st, err)
				}
				res.Status, res.Error = NodeFailed, err.Error()
				report(err)
				return res
			}
			if err := sleep(ctx, n.retry.backoff(attempt)); err != nil {
				res.Status, res.Reason = NodeCancelled, "run cancelled"
				return res
			}
		}
		if len(declared) > 0 {
			if ch, bad := sc.undeclared(update, declared); bad {
				return fail(fmt.Errorf("node %q set channel %q, which it does not declare; add it to Writes", n.info.ID, ch))
			}
		}
		if res.Writes, err = sc.encode(update, declared); err != nil {
			return fail(fmt.Errorf("node %q: %w", n.info.ID, err))
		}
		if view != nil && checkingReads(ctx) {
			if ch := b.readsUndeclared(ctx, tc, n, impl, values, view, declared, res.Writes); ch != "" {
				return fail(fmt.Errorf("node %q reads channel %q, which it does not declare: its writes change when it sees that channel (pregel.CheckReads); add %q to its Reads", n.info.ID, ch, ch))
			}
		}
		if routes != nil {
			pst, err := sc.decodeAfter(restrict(values, routeView), restrict(res.Writes, routeView), g.reduceOne)
			if err != nil {
				return fail(fmt.Errorf("node %q: %w", n.info.ID, err))
			}
			if res.Routes, err = routes(ctx, pst); err != nil {
				return fail(err)
			}
		}
		res.Status = NodeCompleted
		report(nil)
		return res
	}
}

// attempt runs the node's hooks and Execute once, within its timeout.
func (b *Builder[S]) attempt(ctx context.Context, n *node, impl Node[S], st S, where string) (update S, err error) {
	defer recoverInto(&err, where)
	if n.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.timeout)
		defer cancel()
	}
	if h, ok := impl.(BeforeHook[S]); ok {
		if err := h.BeforeExecute(ctx, st); err != nil {
			return update, fmt.Errorf("before hook: %w", err)
		}
	}
	update, err = impl.Execute(ctx, st)
	if err == nil {
		if h, ok := impl.(AfterHook[S]); ok {
			if err := h.AfterExecute(ctx, st, update); err != nil {
				return update, fmt.Errorf("after hook: %w", err)
			}
		}
	}
	if err != nil && n.timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("timed out after %s: %w", n.timeout, err)
	}
	return update, err
}

// recoverInto turns a panic into an error naming where it happened.
func recoverInto(err *error, where string) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%s panicked: %v", where, p)
	}
}
