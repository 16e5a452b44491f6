package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// Seeder is a Checkpointer that stores the step 0 of a run continuing from
// another run's step (see pregel.Graph.Continue) without copying what it
// inherits: the channels of version pregel.Inherited keep referring to the
// values base's run stored, so a thread of many runs holds its state once.
// A Checkpointer without it gets the inherited values written again.
type Seeder interface {
	// CommitFrom commits cp, a step 0, as Commit does, with the channels
	// of version pregel.Inherited taken from base; cp.Values holds them
	// too, with base's values.
	CommitFrom(ctx context.Context, cp *pregel.Checkpoint, base StepRef) error
}

// CreateThreadRequest asks for a new thread.
type CreateThreadRequest struct {
	// ThreadID makes creation idempotent; empty: a new id.
	ThreadID string `json:"thread_id,omitempty"`
	// Metadata is a JSON object kept with the thread.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// ThreadRunRequest asks for a new run on a thread.
type ThreadRunRequest struct {
	Graph string `json:"graph"`
	// RunID makes creation idempotent, as in CreateRequest.
	RunID string          `json:"run_id,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// Strategy says what to do when the thread has an active run
	// (default reject).
	Strategy Strategy `json:"strategy,omitempty"`
	// Message, if set, is the protocol message asking for the run (an
	// A2A message), kept as the first of its Messages, as in
	// CreateRequest.
	Message json.RawMessage `json:"-"`
	// WatchedUntil, if set, marks the new run watched until then from its
	// creation, as CreateRequest.WatchedUntil does.
	WatchedUntil time.Time `json:"-"`
}

// ThreadState is a thread's state: the values of its latest committed
// step, and where that step is.
type ThreadState struct {
	ThreadID string `json:"thread_id"`
	// RunID and Step name the checkpoint; RunID is empty for a thread
	// that has no step yet.
	RunID  string                     `json:"run_id,omitempty"`
	Step   int                        `json:"step"`
	Values map[string]json.RawMessage `json:"values"`
	// Next lists the nodes the run would execute next, if it goes on.
	Next []string `json:"next,omitempty"`
}

// ThreadStep is one committed step in a thread's history.
type ThreadStep struct {
	RunID string `json:"run_id"`
	Graph string `json:"graph"`
	pregel.StepInfo
	Values map[string]json.RawMessage `json:"values"`
}

var (
	errNoThreads  = fmt.Errorf("this server keeps no threads: %w", ErrInvalid)
	errStop       = errors.New("nothing to change")
	errNotActive  = errors.New("run is not the thread's active run")
	errClaimedYet = errors.New("run already claimed the thread")
	// errSupersedePending refuses a claim while an earlier claim's
	// supersede of the active run is not yet written.
	errSupersedePending = errors.New("a supersede of the thread's active run is pending")
)

func (s *Service) threads() (ThreadStore, error) {
	if s.Threads == nil {
		return nil, errNoThreads
	}
	return s.Threads, nil
}

func checkThreadID(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("thread id %q must be 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit: %w", id, ErrInvalid)
	}
	return nil
}

// CreateThread stores a new thread. created is false when a thread with
// the id exists with the same metadata; other metadata is a conflict.
func (s *Service) CreateThread(ctx context.Context, req CreateThreadRequest) (Thread, bool, error) {
	return s.createThread(ctx, req, "")
}

// createThread is CreateThread of a fork of thread parent ("": none).
func (s *Service) createThread(ctx context.Context, req CreateThreadRequest, parent string) (Thread, bool, error) {
	ts, err := s.threads()
	if err != nil {
		return Thread{}, false, err
	}
	if req.ThreadID == "" {
		req.ThreadID = pregel.NewRunID()
	} else if err := checkThreadID(req.ThreadID); err != nil {
		return Thread{}, false, err
	}
	meta, err := threadMetadata(req.Metadata)
	if err != nil {
		return Thread{}, false, err
	}
	now := s.now()
	t, created, err := ts.CreateThread(ctx, Thread{ID: req.ThreadID, Metadata: meta, ForkedFrom: parent, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		return Thread{}, false, fmt.Errorf("store thread: %w", err)
	}
	if !created && !jsonEqual(t.Metadata, meta) {
		return Thread{}, false, fmt.Errorf("thread %q already exists with other metadata; choose another thread_id: %w", req.ThreadID, ErrConflict)
	}
	return t, created, nil
}

// threadMetadata checks and compacts a thread's metadata: a JSON object,
// or nothing.
func threadMetadata(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("metadata must be a JSON object: %w", ErrInvalid)
	}
	meta, err := compactJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("metadata must be a JSON object: %w", ErrInvalid)
	}
	return meta, nil
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	ax, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return bytes.Equal(ax, by)
}

// GetThread returns a thread.
func (s *Service) GetThread(ctx context.Context, id string) (Thread, error) {
	ts, err := s.threads()
	if err != nil {
		return Thread{}, err
	}
	if err := checkThreadID(id); err != nil {
		return Thread{}, err
	}
	t, err := getThread(ctx, ts, id)
	if err != nil {
		return Thread{}, err
	}
	// A run that has stopped holds the thread no longer, even if its
	// executor has not said so yet.
	return s.passOnStopped(ctx, t)
}

// getThread reads a thread, saying in words what a missing one means.
func getThread(ctx context.Context, ts ThreadStore, id string) (Thread, error) {
	t, err := ts.GetThread(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Thread{}, fmt.Errorf("thread %q does not exist; create it first: %w", id, ErrNotFound)
	}
	return t, err
}

// ListThreads lists threads, newest first.
func (s *Service) ListThreads(ctx context.Context, f ThreadFilter) (ThreadPage, error) {
	ts, err := s.threads()
	if err != nil {
		return ThreadPage{}, err
	}
	if f.Limit < 0 || f.Limit > 500 {
		return ThreadPage{}, fmt.Errorf("limit %d must be between 1 and 500 (0 means 50): %w", f.Limit, ErrInvalid)
	}
	return ts.ListThreads(ctx, f)
}

// DeleteThread deletes a thread with its runs: their records,
// checkpoints, task results and events (the stores must be RunDeleters).
// It is refused, with nothing changed, while a run of the thread is active
// or queued (cancel them first), and while threads forked from it exist
// (their runs continue from its steps: delete them first). The deletion is
// marked on the thread before its runs go: runs can no longer take it,
// and a deletion cut short is finished by calling DeleteThread again.
func (s *Service) DeleteThread(ctx context.Context, id string) error {
	ts, err := s.threads()
	if err != nil {
		return err
	}
	if err := checkThreadID(id); err != nil {
		return err
	}
	deleters, err := s.runDeleters()
	if err != nil {
		return err
	}
	cur, err := getThread(ctx, ts, id)
	if err != nil {
		return err
	}
	// A run that has stopped but not yet passed the thread on does not
	// hold it.
	if _, err := s.passOnStopped(ctx, cur); err != nil {
		return err
	}
	t, err := MutateThread(ctx, ts, id, func(t *Thread) error {
		if t.Active != "" || len(t.Queue) > 0 {
			return fmt.Errorf("thread %q has run %q active and %d queued; cancel them before deleting it: %w", id, t.Active, len(t.Queue), ErrInvalidState)
		}
		live, err := s.liveForks(ctx, t)
		if err != nil {
			return err
		}
		if len(live) > 0 {
			return fmt.Errorf("thread %q has forks (%s) whose runs continue from its steps; delete them first: %w", id, strings.Join(live, ", "), ErrInvalidState)
		}
		t.Forks, t.Deleting = nil, true
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("thread %q does not exist: %w", id, ErrNotFound)
	}
	if err != nil {
		return err
	}
	if err := s.deleteThreadRuns(ctx, id, deleters); err != nil {
		return err
	}
	if t.ForkedFrom != "" {
		_, err := MutateThread(ctx, ts, t.ForkedFrom, func(p *Thread) error {
			if !slices.Contains(p.Forks, id) {
				return errStop
			}
			p.Forks = slices.DeleteFunc(p.Forks, func(f string) bool { return f == id })
			return nil
		})
		if err != nil && !errors.Is(err, errStop) && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("take thread %q off the forks of %q: %w", id, t.ForkedFrom, err)
		}
	}
	for attempt := 0; ; attempt++ {
		err := ts.DeleteThread(ctx, id, t.Version)
		if errors.Is(err, ErrNotFound) {
			return nil // a concurrent deletion finished first
		}
		if !errors.Is(err, ErrConflict) || attempt >= 50 {
			return err
		}
		if t, err = ts.GetThread(ctx, id); err != nil {
			return err
		}
	}
}

// runDeleters returns the stores that delete runs: Runs, and Checkpoints
// if it is another store.
func (s *Service) runDeleters() ([]RunDeleter, error) {
	rd, ok := s.Runs.(RunDeleter)
	cd, ok2 := s.Checkpoints.(RunDeleter)
	if !ok || !ok2 {
		return nil, fmt.Errorf("this server's stores cannot delete runs, so threads cannot be deleted: %w", ErrInvalid)
	}
	var ds []RunDeleter
	if ed, ok := s.Dispatcher.(RunDeleter); ok {
		ds = append(ds, ed) // the events of a log apart from the stores (embedded.Scheduler.DeleteRun)
	}
	if any(rd) == any(cd) {
		return append(ds, rd), nil
	}
	// Checkpoints first: the record goes last.
	return append(ds, cd, rd), nil
}

// liveForks returns the forks of t that exist.
func (s *Service) liveForks(ctx context.Context, t *Thread) ([]string, error) {
	var live []string
	for _, f := range t.Forks {
		ft, err := s.Threads.GetThread(ctx, f)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return nil, err
		case ft.ForkedFrom == t.ID:
			live = append(live, f)
		}
	}
	return live, nil
}

// deleteThreadRuns deletes the runs of thread id.
func (s *Service) deleteThreadRuns(ctx context.Context, id string, deleters []RunDeleter) error {
	var ids []string
	f := Filter{ContextID: id, Limit: 500}
	for {
		p, err := s.Runs.ListRuns(ctx, f)
		if err != nil {
			return fmt.Errorf("list the runs of thread %q: %w", id, err)
		}
		for _, r := range p.Runs {
			if r.ThreadID == id {
				ids = append(ids, r.ID)
			}
		}
		if p.NextPageToken == "" {
			break
		}
		f.PageToken = p.NextPageToken
	}
	for _, rid := range ids {
		for _, d := range deleters {
			if err := d.DeleteRun(ctx, rid); err != nil {
				return fmt.Errorf("delete run %q of thread %q: %w", rid, id, err)
			}
		}
	}
	return nil
}

// errDeleting refuses to change a thread being deleted.
func errDeleting(id string) error {
	return fmt.Errorf("thread %q is being deleted; delete it again to finish, or use another thread: %w", id, ErrInvalidState)
}

// current returns the step a thread's state is at: the active run's
// latest committed step, or the head.
func (s *Service) current(ctx context.Context, t Thread) (*StepRef, error) {
	if t.Active != "" {
		cp, err := s.Checkpoints.Load(ctx, t.Active, pregel.Latest)
		switch {
		case err == nil:
			return &StepRef{RunID: t.Active, Step: cp.Step}, nil
		case !errors.Is(err, pregel.ErrNotFound):
			return nil, fmt.Errorf("load run %q: %w", t.Active, err)
		}
	}
	return t.Head, nil
}

// load returns the checkpoint at ref, or nil for a nil ref.
func (s *Service) load(ctx context.Context, ref *StepRef) (*pregel.Checkpoint, error) {
	if ref == nil {
		return nil, nil
	}
	cp, err := s.Checkpoints.Load(ctx, ref.RunID, ref.Step)
	if err != nil {
		return nil, fmt.Errorf("load step %d of run %q: %w", ref.Step, ref.RunID, err)
	}
	return cp, nil
}

// State returns a thread's latest committed state.
func (s *Service) State(ctx context.Context, id string) (ThreadState, error) {
	t, err := s.GetThread(ctx, id)
	if err != nil {
		return ThreadState{}, err
	}
	ref, err := s.current(ctx, t)
	if err != nil {
		return ThreadState{}, err
	}
	st := ThreadState{ThreadID: id, Values: map[string]json.RawMessage{}}
	cp, err := s.load(ctx, ref)
	if err != nil || cp == nil {
		return st, err
	}
	st.RunID, st.Step, st.Values = ref.RunID, ref.Step, cp.Values
	for _, tr := range cp.Next {
		st.Next = append(st.Next, tr.Node)
	}
	return st, nil
}

// CreateOnThread creates a run of req.Graph on a thread: it starts from the
// thread's latest committed state with req.Input applied through the
// channels' reducers. If the thread has an active run, req.Strategy says
// what happens (see Strategy): reject returns a *BusyError. A run that
// waits for the thread is returned pending.
func (s *Service) CreateOnThread(ctx context.Context, threadID string, req ThreadRunRequest) (_ Run, _ bool, retErr error) {
	ts, err := s.threads()
	if err != nil {
		return Run{}, false, err
	}
	if err := checkThreadID(threadID); err != nil {
		return Run{}, false, err
	}
	strategy, err := ParseStrategy(string(req.Strategy))
	if err != nil {
		return Run{}, false, err
	}
	if req.Graph == "" {
		return Run{}, false, fmt.Errorf("graph is missing; name one of %s: %w", strings.Join(s.Graphs.names, ", "), ErrInvalid)
	}
	g, err := s.Graphs.lookup(req.Graph)
	if err != nil {
		return Run{}, false, err
	}
	if req.RunID == "" {
		req.RunID = pregel.NewRunID()
	} else if !ValidID(req.RunID) {
		return Run{}, false, fmt.Errorf("run_id %q must be 1 to 128 letters, digits, '.', '_', ':' or '-': %w", req.RunID, ErrInvalid)
	}
	input, err := compactJSON(req.Input)
	if err != nil {
		return Run{}, false, fmt.Errorf("input is not valid JSON: %w", ErrInvalid)
	}
	t, err := getThread(ctx, ts, threadID)
	if err != nil {
		return Run{}, false, err
	}
	// Check the input against the thread's state now; the run applies it
	// to the state it starts from.
	ref, err := s.current(ctx, t)
	if err != nil {
		return Run{}, false, err
	}
	cp, err := s.load(ctx, ref)
	if err != nil {
		return Run{}, false, err
	}
	if _, err := g.ContinueFrom(ctx, req.RunID, cp, input); errors.Is(err, pregel.ErrIncompatible) {
		return Run{}, false, fmt.Errorf("thread %q cannot run on this code: %s: %w", threadID, threadIncompatible(err), ErrConflict)
	} else if err != nil {
		return Run{}, false, fmt.Errorf("%s: %w", strings.TrimPrefix(err.Error(), "pregel: invalid input: "), ErrInvalid)
	}

	if old, err := s.Runs.GetRun(ctx, req.RunID); err == nil {
		if claimDropped(old) {
			return Run{}, false, claimDroppedError(old)
		}
		if old.ThreadID != threadID || old.Graph != req.Graph || !bytes.Equal(old.Input, input) {
			return Run{}, false, fmt.Errorf("run %q already exists with a different thread, graph or input; choose another run_id: %w", req.RunID, ErrConflict)
		}
		// A retry: finish what the first request may have left.
		if err := s.finishSupersede(ctx, threadID); err != nil {
			return Run{}, false, err
		}
		if err := s.startIfActive(ctx, threadID, req.RunID); err != nil {
			return Run{}, false, err
		}
		r, err := s.Runs.GetRun(ctx, req.RunID)
		return r, false, err
	} else if !errors.Is(err, ErrNotFound) {
		return Run{}, false, err
	}

	if _, err := s.passOnStopped(ctx, t); err != nil {
		return Run{}, false, err
	}
	if t.Active != "" && t.Active != req.RunID && s.now().Sub(t.UpdatedAt) > StaleClaim {
		// (A claim of this very run is a retry's own: it stands.)
		if err := s.repairClaim(ctx, threadID); err != nil {
			return Run{}, false, err
		}
	}
	eff, err := s.claim(ctx, threadID, req.RunID, strategy)
	claimedYet := errors.Is(err, errClaimedYet)
	if err != nil && !claimedYet {
		return Run{}, false, err
	}
	claimed, head, busy := eff.Start == req.RunID, eff.Base, eff.Supersede
	now := s.now()
	rec := Run{
		ID: req.RunID, Graph: req.Graph, Status: pregel.RunPending, Input: input, ContextID: threadID, ThreadID: threadID, CreatedAt: now, UpdatedAt: now,
		Events: []Event{{At: now, Type: EventCreated, Status: pregel.RunPending}}, Messages: appendMessage(nil, req.Message),
		WatchedUntil: req.WatchedUntil,
	}
	if claimed {
		// The thread's head cannot move while the run holds it.
		rec.Base = head
	}
	if s.Tracer != nil {
		// The run's root span, as Create starts it: the run is one trace
		// with this request, whenever and wherever it executes.
		var end func(error)
		ctx, end = s.Tracer.StartRun(ctx, &rec)
		defer func() { end(retErr) }()
	}
	r, created, err := s.Runs.CreateRun(ctx, rec)
	if err != nil {
		s.unclaim(ctx, threadID, req.RunID)
		return Run{}, false, fmt.Errorf("store run: %w", err)
	}
	if !created && claimDropped(r) {
		// This call stalled past StaleClaim and its claim was dropped:
		// the run was stored cancelled in its place, and must not start.
		return Run{}, false, claimDroppedError(r)
	}
	if !created && (r.ThreadID != threadID || r.Graph != req.Graph || !bytes.Equal(r.Input, input)) {
		return Run{}, false, fmt.Errorf("run %q already exists with a different thread, graph or input; choose another run_id: %w", req.RunID, ErrConflict)
	}
	if claimed && created {
		// The common case: start it with what this call knows.
		if err := s.start(ctx, g, r, head); err != nil {
			return Run{}, false, err
		}
		return r, true, nil
	}
	if busy != "" {
		if err := s.supersede(ctx, threadID, busy, Superseding{Run: req.RunID, Strategy: strategy, Pending: true}); err != nil {
			return Run{}, false, err
		}
	} else if claimedYet {
		// Claimed before (errClaimedYet): a request cut between its claim
		// and this record, asked again with the same run id. Carry out
		// the supersede its claim may have left pending.
		if err := s.finishSupersede(ctx, threadID); err != nil {
			return Run{}, false, err
		}
	}
	if err := s.startIfActive(ctx, threadID, req.RunID); err != nil {
		return Run{}, false, err
	}
	r, err = s.Runs.GetRun(ctx, req.RunID)
	return r, created, err
}

// passOnStopped passes thread t on from its active run if that run has
// already left it (completed, failed or cancelled, or paused and
// superseded) and returns the thread as it is then. A run's record says
// it stopped a moment before its executor passes the thread on
// (RunStopped): a client that saw it finish and at once creates the next
// run must not find the thread busy.
func (s *Service) passOnStopped(ctx context.Context, t Thread) (Thread, error) {
	if t.Active == "" {
		return t, nil
	}
	r, err := s.Runs.GetRun(ctx, t.Active)
	if err != nil {
		return t, nil // not stored yet (its creator stores it), or unreadable: the claim stands
	}
	switch {
	case r.Status.Terminal():
	case (r.Status == pregel.RunDrained || r.Status == pregel.RunInterrupted) && r.SupersededBy != "":
	default:
		return t, nil
	}
	if err := s.RunStopped(ctx, r); err != nil {
		return t, err
	}
	return getThread(ctx, s.Threads, t.ID)
}

// unclaim takes a run that could not be stored off its thread.
func (s *Service) unclaim(ctx context.Context, threadID, runID string) {
	var eff HandOffEffect
	_, err := MutateThread(ctx, s.Threads, threadID, func(t *Thread) error {
		next, e, err := HandOff(*t, HandOffEvent{Kind: HandOffRelease, Run: runID})
		*t, eff = next, e
		return err
	})
	if err != nil && !errors.Is(err, errStop) {
		s.logger().Error("take a run that could not be stored off its thread", "thread_id", threadID, "run_id", runID, "err", err)
		return
	}
	if eff.Start != "" {
		if err := s.startIfActive(ctx, threadID, eff.Start); err != nil {
			s.logger().Error("start the next run of a thread", "thread_id", threadID, "run_id", eff.Start, "err", err)
		}
	}
}

// claim claims thread threadID for run runID (HandOffClaim). A claim that
// finds an earlier claim's supersede of the active run pending carries it
// out first, then claims again: the runs queued after a superseding run
// see what it did.
func (s *Service) claim(ctx context.Context, threadID, runID string, strategy Strategy) (HandOffEffect, error) {
	for attempt := 0; ; attempt++ {
		var (
			eff     HandOffEffect
			pending Superseding
			active  string
		)
		_, err := MutateThread(ctx, s.Threads, threadID, func(t *Thread) error {
			next, e, err := HandOff(*t, HandOffEvent{Kind: HandOffClaim, Run: runID, Strategy: strategy})
			if errors.Is(err, errSupersedePending) {
				pending, active = *t.Superseding, t.Active
			}
			*t, eff = next, e
			return err
		})
		if !errors.Is(err, errSupersedePending) {
			return eff, err
		}
		if attempt >= 100 {
			return eff, fmt.Errorf("thread %q is changing hands; try again: %w", threadID, ErrConflict)
		}
		if err := s.supersede(ctx, threadID, active, pending); err != nil {
			return eff, err
		}
	}
}

// finishSupersede carries out the pending supersede of thread threadID's
// active run, if there is one (its claimer stopped before it).
func (s *Service) finishSupersede(ctx context.Context, threadID string) error {
	t, err := s.Threads.GetThread(ctx, threadID)
	if err != nil || t.Superseding == nil || !t.Superseding.Pending {
		return err
	}
	return s.supersede(ctx, threadID, t.Active, *t.Superseding)
}

// supersede carries out sp, the pending supersede of run activeID, the
// active run of thread threadID: it writes it on the run's record
// (supersedeRun; nothing if the run has ended since, or was superseded
// before), then marks it done on the thread. Whoever claims the thread
// next may call it too: the writes are the same.
func (s *Service) supersede(ctx context.Context, threadID, activeID string, sp Superseding) error {
	// The active run's creator may not have stored it yet: it claimed
	// the thread a moment ago. Wait for its record, or for the thread to
	// change hands (a creator that stopped for good leaves a stale claim,
	// repaired after StaleClaim).
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		_, err := s.Runs.GetRun(ctx, activeID)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		t, err := s.Threads.GetThread(ctx, threadID)
		if err != nil {
			return err
		}
		if t.Active != activeID || t.Superseding == nil || *t.Superseding != sp {
			return nil // carried out by another caller, or the run left
		}
		if s.now().Sub(t.UpdatedAt) > StaleClaim {
			if err := s.repairClaim(ctx, threadID); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	r, err := s.mutateRun(ctx, activeID, func(r *Run) error { return supersedeRun(r, sp.Run, sp.Strategy) })
	applied := err == nil
	if err != nil && !errors.Is(err, errStop) && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%s run %q: %w", sp.Strategy, activeID, err)
	}
	_, err = MutateThread(ctx, s.Threads, threadID, func(t *Thread) error {
		if t.Active != activeID || t.Superseding == nil || *t.Superseding != sp {
			return errStop
		}
		t.Superseding.Pending = false
		return nil
	})
	if err != nil && !errors.Is(err, errStop) && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("thread %q: %w", threadID, err)
	}
	if !applied {
		return nil
	}
	if r.Status == pregel.RunPending || r.Status == pregel.RunRunning {
		s.Dispatcher.Signal(ctx, r)
		return nil
	}
	return s.RunStopped(ctx, r)
}

// startIfActive starts run runID if it holds its thread and has not
// started: it builds its step 0 from the thread's head and its input,
// commits it and dispatches the run. It is idempotent.
func (s *Service) startIfActive(ctx context.Context, threadID, runID string) error {
	t, err := s.Threads.GetThread(ctx, threadID)
	if err != nil || t.Active != runID {
		return err
	}
	r, err := s.Runs.GetRun(ctx, runID)
	if errors.Is(err, ErrNotFound) {
		return nil // its creator has not stored it yet, and will start it
	}
	if err != nil {
		return err
	}
	if r.Status.Terminal() {
		return s.RunStopped(ctx, r)
	}
	if r.Status != pregel.RunPending {
		return nil
	}
	_, lerr := s.Checkpoints.Load(ctx, runID, 0)
	if lerr != nil && !errors.Is(lerr, pregel.ErrNotFound) {
		return lerr
	}
	started := lerr == nil
	if r.CancelRequested {
		if !started && !r.Discarded {
			// Another call may be starting the run at this moment: it
			// read the run pending before the cancel, and commits its
			// step 0 after this call looked for it. The thread would
			// then be passed on without that step, which the run's
			// values show (issue 22, the dev SIGKILL run). Commit an
			// empty step 0 here first (the thread's head, none of the
			// run's input): of two commits of step 0 one wins, and the
			// pass-on finds whichever did.
			if err := s.fenceStart(ctx, t.Head, r); err != nil {
				return err
			}
		}
		r, err = s.mutateRun(ctx, runID, func(r *Run) error {
			if r.Status != pregel.RunPending {
				return errStop
			}
			r.Status, r.CancelRequested = pregel.RunCancelled, false
			return nil
		})
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return err
		}
		return s.RunStopped(ctx, r)
	}
	if started {
		return s.Dispatcher.Dispatch(ctx, r) // started before; dispatch again
	}
	g, err := s.Graphs.lookup(r.Graph)
	if err != nil {
		return s.failStart(ctx, r, err.Error())
	}
	base := t.Head
	if r, err = s.setBase(ctx, r, base); err != nil {
		return err
	}
	return s.start(ctx, g, r, base)
}

// setBase records base, the thread's head, as the Base of run r, which
// holds its thread.
func (s *Service) setBase(ctx context.Context, r Run, base *StepRef) (Run, error) {
	if base == nil || r.Base != nil {
		return r, nil
	}
	return s.mutateRun(ctx, r.ID, func(r *Run) error {
		b := *base
		r.Base = &b
		return nil
	})
}

// fenceStart commits an empty step 0 for run r, which holds its thread,
// never started and is being cancelled: the state of base (the thread's
// head) with none of the run's input, so that a start of the run that
// raced the cancel cannot commit the run's own step 0 after the cancel
// passed the thread on without it. A run whose graph is gone, or whose
// thread's state it cannot continue, gets none (it could not start).
func (s *Service) fenceStart(ctx context.Context, base *StepRef, r Run) error {
	g, err := s.Graphs.lookup(r.Graph)
	if err != nil {
		return nil
	}
	cp0, err := s.load(ctx, base)
	if err != nil {
		return err
	}
	cp, err := g.ContinueFrom(ctx, r.ID, cp0, nil)
	if err != nil {
		return nil
	}
	if _, err := s.setBase(ctx, r, base); err != nil {
		return err
	}
	if err := s.seed(ctx, cp, base); err != nil && !errors.Is(err, pregel.ErrStepConflict) {
		return fmt.Errorf("store step 0: %w", err)
	}
	return nil
}

// start builds the step 0 of run r, which holds its thread and has base
// (the thread's head) as its Base, commits it and dispatches the run.
func (s *Service) start(ctx context.Context, g *pregel.Graph, r Run, base *StepRef) error {
	cp0, err := s.load(ctx, base)
	if err != nil {
		return err
	}
	// ContinueFrom, not Continue: the run inherits how the base stores
	// its array channels, and stores only what it adds to them.
	cp, err := g.ContinueFrom(ctx, r.ID, cp0, r.Input)
	if err != nil {
		return s.failStart(ctx, r, strings.TrimPrefix(err.Error(), "pregel: invalid input: "))
	}
	if err := s.seed(ctx, cp, base); err != nil && !errors.Is(err, pregel.ErrStepConflict) {
		return fmt.Errorf("store step 0: %w", err)
	}
	if err := s.Dispatcher.Dispatch(ctx, r); err != nil {
		return fmt.Errorf("dispatch run: %w", err)
	}
	return nil
}

// failStart fails a run whose input does not fit the state it would start
// from, and passes the thread on.
func (s *Service) failStart(ctx context.Context, r Run, msg string) error {
	r, err := s.mutateRun(ctx, r.ID, func(r *Run) error {
		if r.Status != pregel.RunPending {
			return errStop
		}
		r.Status, r.Error = pregel.RunFailed, msg
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.RunStopped(ctx, r)
}

// seed commits a thread run's step 0.
func (s *Service) seed(ctx context.Context, cp *pregel.Checkpoint, base *StepRef) error {
	if sd, ok := s.Checkpoints.(Seeder); ok && base != nil {
		return sd.CommitFrom(ctx, cp, *base)
	}
	// Write what the run inherits again.
	full := *cp
	full.Versions = maps.Clone(cp.Versions)
	for ch, v := range full.Versions {
		if v == pregel.Inherited {
			full.Versions[ch] = 0
		}
	}
	return s.Checkpoints.Commit(ctx, &full)
}

// RunStopped passes a run's thread on when the run has left it: it
// completed, failed or was cancelled, or it is paused (drained,
// interrupted) and a newer run superseded it. The thread's head becomes
// the run's last committed step (the step it started from if it was
// rolled back), and the first queued run, if any, becomes active and
// starts. Executors call it when a run stops; it is idempotent and does
// nothing for runs without a thread. Called again for a run that has
// passed its thread on, it starts the thread's active run if that has not
// started (the first call may have stopped half way), so an executor that
// calls it on every redelivery of a stopped run's message finishes a
// hand-off cut short by a crash; the thread's conditional writes and the
// fenced commit of step 0 keep a run from starting twice.
func (s *Service) RunStopped(ctx context.Context, r Run) error {
	if r.ThreadID == "" || s.Threads == nil {
		return nil
	}
	if !leftThread(r) {
		return nil // it holds the thread until it ends, or is resumed or cancelled
	}
	var last *StepRef
	if !r.Discarded {
		cp, err := s.Checkpoints.Load(ctx, r.ID, pregel.Latest)
		switch {
		case err == nil:
			last = &StepRef{RunID: r.ID, Step: cp.Step}
		case !errors.Is(err, pregel.ErrNotFound):
			return fmt.Errorf("load run %q: %w", r.ID, err)
		}
	}
	var eff HandOffEffect
	t, err := MutateThread(ctx, s.Threads, r.ThreadID, func(t *Thread) error {
		next, e, err := HandOff(*t, HandOffEvent{Kind: HandOffPassOn, Run: r.ID, Last: last, Discarded: r.Discarded})
		*t, eff = next, e
		return err
	})
	switch {
	case errors.Is(err, errNotActive):
		// Passed on before, maybe by a call for this run that stopped
		// (crashed) before it started the next run: starting the
		// thread's active run is idempotent, and finishes that call.
		if t.Active == "" {
			return nil
		}
		return s.startIfActive(ctx, r.ThreadID, t.Active)
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("pass thread %q on from run %q: %w", r.ThreadID, r.ID, err)
	}
	if eff.Start == "" {
		return nil
	}
	return s.startIfActive(ctx, r.ThreadID, eff.Start)
}

// leftThread reports whether run r, if it holds its thread, must pass it
// on: it completed, failed or was cancelled, or it is paused (drained,
// interrupted) and a newer run superseded it.
func leftThread(r Run) bool {
	switch r.Status {
	case pregel.RunCompleted, pregel.RunFailed, pregel.RunCancelled:
		return true
	case pregel.RunDrained, pregel.RunInterrupted:
		return r.SupersededBy != ""
	}
	return false
}

// ThreadRuns lists the runs of a thread, newest first: the runs whose
// ContextID is the thread's id (a run on a thread has it as its context).
func (s *Service) ThreadRuns(ctx context.Context, id string, f Filter) (Page, error) {
	if _, err := s.GetThread(ctx, id); err != nil {
		return Page{}, err
	}
	f.ContextID = id
	return s.List(ctx, f)
}

// cancelQueued cancels a run that waits in its thread's queue: it leaves
// the queue and is cancelled at once. ok is false for other runs.
//
// It also ends a pending run of a thread that its thread no longer names
// (neither active nor queued): a cancel cut short between its two
// writes (the queue's, then the run's: a crash, or a failed store call)
// leaves one so, as may a claim dropped by RecoverClaims under a creator
// that stored its run after all (dropStaleClaim stores the run cancelled
// first, so its creator cannot). Only
// the thread makes a run active, and a run that left it never comes
// back, so nothing would ever start or end such a run: without this it
// stayed pending for ever, its cancel requested.
func (s *Service) cancelQueued(ctx context.Context, id string) (Run, bool, error) {
	return s.cancelWaiting(ctx, id, true)
}

// cancelWaiting is cancelQueued; with queued false it cancels only a run
// that its thread no longer names (StartThreadRun).
func (s *Service) cancelWaiting(ctx context.Context, id string, queued bool) (Run, bool, error) {
	if s.Threads == nil {
		return Run{}, false, nil
	}
	r, err := s.Runs.GetRun(ctx, id)
	if err != nil || r.ThreadID == "" || r.Status != pregel.RunPending {
		return Run{}, false, nil
	}
	orphan := false
	_, err = MutateThread(ctx, s.Threads, r.ThreadID, func(t *Thread) error {
		if t.Active == id {
			return errStop // active: its executor (or startIfActive) ends it
		}
		if !slices.Contains(t.Queue, id) {
			orphan = true // left the thread before this cancel
			return errStop
		}
		if !queued {
			return errStop
		}
		next, _, err := HandOff(*t, HandOffEvent{Kind: HandOffRelease, Run: id})
		*t = next
		return err
	})
	switch {
	case errors.Is(err, errStop) && orphan:
	case errors.Is(err, errStop) || errors.Is(err, ErrNotFound):
		return Run{}, false, nil
	case err != nil:
		return Run{}, false, fmt.Errorf("take run %q off its thread's queue: %w", id, err)
	}
	r, err = s.mutateRun(ctx, id, func(r *Run) error {
		if r.Status != pregel.RunPending {
			return errStop // ended meanwhile
		}
		r.Status, r.CancelRequested = pregel.RunCancelled, false
		return nil
	})
	if errors.Is(err, errStop) {
		return Run{}, false, nil // Cancel goes on with the run as it is now
	}
	return r, true, err
}

// MaxHistory bounds the steps of one ThreadHistory call.
const MaxHistory = 500

// ThreadHistory lists the committed steps of a thread, newest first: the
// steps of its active or last run, then those of the run it started from
// up to the step it started from, and so on; steps discarded by a
// rollback are not in it. limit bounds the list (default 20, at most
// MaxHistory); ThreadHistoryPage pages on from there.
func (s *Service) ThreadHistory(ctx context.Context, id string, limit int) ([]ThreadStep, error) {
	page, err := s.ThreadHistoryPage(ctx, id, ThreadHistoryFilter{Limit: limit})
	return page.Steps, err
}

// lineageHas reports whether step of run is in the history of the thread
// whose state is at ref.
func (s *Service) lineageHas(ctx context.Context, ref *StepRef, run string, step int) (bool, error) {
	for n := 0; ref != nil; n++ {
		if ref.RunID == run {
			return step <= ref.Step, nil
		}
		if n > 100_000 {
			return false, errors.New("thread lineage too long")
		}
		r, err := s.Runs.GetRun(ctx, ref.RunID)
		if err != nil {
			return false, err
		}
		ref = r.Base
	}
	return false, nil
}

// ForkRequest asks for a new thread that starts at a step of another.
type ForkRequest struct {
	// RunID and Step name a step in the source thread's history; an
	// empty RunID forks the thread's current state.
	RunID string `json:"run_id,omitempty"`
	Step  *int   `json:"step,omitempty"`
	// ThreadID names the new thread (empty: a new id); Metadata is kept
	// with it.
	ThreadID string          `json:"thread_id,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Fork creates a thread whose state is a step of thread id's history:
// runs on it continue from there, and the source thread is unchanged.
// Nothing is copied: the new thread refers to the step.
func (s *Service) Fork(ctx context.Context, id string, req ForkRequest) (Thread, error) {
	src, err := s.GetThread(ctx, id)
	if err != nil {
		return Thread{}, err
	}
	cur, err := s.current(ctx, src)
	if err != nil {
		return Thread{}, err
	}
	var head *StepRef
	switch {
	case req.RunID == "" && req.Step != nil:
		return Thread{}, fmt.Errorf("step %d needs the run_id it belongs to; the thread's history lists both: %w", *req.Step, ErrInvalid)
	case req.RunID == "":
		head = cur
	default:
		step := pregel.Latest
		if req.Step != nil {
			step = *req.Step
		}
		if step < 0 && req.Step != nil {
			return Thread{}, fmt.Errorf("step %d is not a step; steps count from 0: %w", step, ErrInvalid)
		}
		if step == pregel.Latest {
			cp, err := s.Checkpoints.Load(ctx, req.RunID, pregel.Latest)
			if err != nil {
				return Thread{}, fmt.Errorf("thread %q has no run %q; its history lists its runs and steps: %w", id, req.RunID, ErrNotFound)
			}
			step = cp.Step
		}
		ok, err := s.lineageHas(ctx, cur, req.RunID, step)
		if err != nil {
			return Thread{}, err
		}
		if ok {
			_, err = s.Checkpoints.Load(ctx, req.RunID, step)
		}
		if !ok || errors.Is(err, pregel.ErrNotFound) {
			return Thread{}, fmt.Errorf("thread %q has no step %d of run %q in its history; its history lists the steps it has: %w", id, step, req.RunID, ErrNotFound)
		}
		if err != nil {
			return Thread{}, err
		}
		head = &StepRef{RunID: req.RunID, Step: step}
	}
	if req.ThreadID == "" {
		req.ThreadID = pregel.NewRunID()
	} else if err := checkThreadID(req.ThreadID); err != nil {
		return Thread{}, err
	}
	if _, err := threadMetadata(req.Metadata); err != nil {
		return Thread{}, err
	}
	sameFork := func(t Thread) bool {
		return t.ForkedFrom == id && (t.Head == nil) == (head == nil) && (head == nil || *t.Head == *head)
	}
	if t, err := s.Threads.GetThread(ctx, req.ThreadID); err == nil && !sameFork(t) {
		return Thread{}, fmt.Errorf("thread %q exists already; choose another thread_id for the fork: %w", t.ID, ErrConflict)
	}
	// The source lists the fork before the fork exists, so that it is
	// never deleted under a fork (a listed fork that was never created
	// is dropped when the source is deleted).
	_, err = MutateThread(ctx, s.Threads, id, func(t *Thread) error {
		if t.Deleting {
			return errDeleting(id)
		}
		if slices.Contains(t.Forks, req.ThreadID) {
			return errStop
		}
		t.Forks = append(t.Forks, req.ThreadID)
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return Thread{}, err
	}
	t, created, err := s.createThread(ctx, CreateThreadRequest{ThreadID: req.ThreadID, Metadata: req.Metadata}, id)
	if err != nil {
		return Thread{}, err
	}
	if !created {
		if !sameFork(t) {
			return Thread{}, fmt.Errorf("thread %q exists already; choose another thread_id for the fork: %w", t.ID, ErrConflict)
		}
		return t, nil
	}
	if head == nil {
		return t, nil
	}
	return MutateThread(ctx, s.Threads, t.ID, func(t *Thread) error {
		h := *head
		t.Head = &h
		return nil
	})
}

// UpdateStateRequest writes values to a thread's state as a node would.
type UpdateStateRequest struct {
	// Graph gives the channels and their reducers.
	Graph string `json:"graph"`
	// AsNode names the node of Graph the update is recorded as.
	AsNode string          `json:"as_node"`
	Values json.RawMessage `json:"values"`
}

// UpdateState writes values to an idle thread's state through the
// channels' reducers, as node req.AsNode would have written them: it is
// recorded as a run of one step (step 0, the node completed) in the
// thread's history, and the next run starts from it. A thread with an
// active run is refused with a *BusyError.
func (s *Service) UpdateState(ctx context.Context, id string, req UpdateStateRequest) (ThreadState, error) {
	if _, err := s.GetThread(ctx, id); err != nil {
		return ThreadState{}, err
	}
	if req.Graph == "" {
		return ThreadState{}, fmt.Errorf("graph is missing; name one of %s: %w", strings.Join(s.Graphs.names, ", "), ErrInvalid)
	}
	g, err := s.Graphs.lookup(req.Graph)
	if err != nil {
		return ThreadState{}, err
	}
	if req.AsNode == "" {
		return ThreadState{}, fmt.Errorf("as_node is missing; name the node of graph %q the update is written as: %w", req.Graph, ErrInvalid)
	}
	if _, ok := g.Node(req.AsNode); !ok {
		var names []string
		for _, n := range g.Nodes() {
			names = append(names, n.ID)
		}
		return ThreadState{}, fmt.Errorf("graph %q has no node %q; nodes are %s: %w", req.Graph, req.AsNode, strings.Join(names, ", "), ErrInvalid)
	}
	values, err := compactJSON(req.Values)
	if err != nil || values[0] != '{' {
		return ThreadState{}, fmt.Errorf("values must be a JSON object of channel values: %w", ErrInvalid)
	}
	if string(values) == "{}" {
		return ThreadState{}, fmt.Errorf("values is empty; give the channels to write: %w", ErrInvalid)
	}
	runID := pregel.NewRunID()
	t, err := s.Threads.GetThread(ctx, id)
	if err != nil {
		return ThreadState{}, err
	}
	if t, err = s.passOnStopped(ctx, t); err != nil {
		return ThreadState{}, err
	}
	if t.Active != "" {
		return ThreadState{}, &BusyError{Thread: id, ActiveRun: t.Active}
	}
	head := t.Head
	cp0, err := s.load(ctx, head)
	if err != nil {
		return ThreadState{}, err
	}
	cp, err := g.ContinueFrom(ctx, runID, cp0, values)
	if errors.Is(err, pregel.ErrIncompatible) {
		return ThreadState{}, fmt.Errorf("thread %q cannot be updated on this code: %s: %w", id, threadIncompatible(err), ErrConflict)
	}
	if err != nil {
		return ThreadState{}, fmt.Errorf("%s: %w", strings.TrimPrefix(err.Error(), "pregel: invalid input: "), ErrInvalid)
	}
	cp.Next = nil
	cp.Tasks = []pregel.TaskStatus{{TaskID: "update", Node: req.AsNode, Status: pregel.NodeCompleted}}
	cp.Counters.Completed = 1

	// Claim the thread now that the update is known to be valid.
	_, err = MutateThread(ctx, s.Threads, id, func(t *Thread) error {
		if t.Deleting {
			return errDeleting(id)
		}
		if t.Active != "" {
			return &BusyError{Thread: id, ActiveRun: t.Active}
		}
		if (t.Head == nil) != (head == nil) || (head != nil && *t.Head != *head) {
			return fmt.Errorf("thread %q changed while its state was being updated; try again: %w", id, ErrConflict)
		}
		t.Active = runID
		return nil
	})
	if err != nil {
		return ThreadState{}, err
	}
	now := s.now()
	r := Run{ID: runID, Graph: req.Graph, Status: pregel.RunPending, Input: values, ContextID: id, ThreadID: id, AsNode: req.AsNode, Base: head, CreatedAt: now, UpdatedAt: now,
		Events: []Event{{At: now, Type: EventCreated, Status: pregel.RunPending}}}
	if stored, created, err := s.Runs.CreateRun(ctx, r); err != nil {
		s.unclaim(ctx, id, runID)
		return ThreadState{}, fmt.Errorf("store update: %w", err)
	} else if !created && claimDropped(stored) {
		return ThreadState{}, fmt.Errorf("thread %q's state was not updated: the update stopped for over %s after claiming the thread, which went on without it; update it again: %w", id, StaleClaim, ErrConflict)
	}
	if err := s.seed(ctx, cp, head); err != nil {
		s.unclaim(ctx, id, runID)
		return ThreadState{}, fmt.Errorf("store update: %w", err)
	}
	r, err = s.mutateRun(ctx, runID, func(r *Run) error {
		r.Status, r.Counters = pregel.RunCompleted, cp.Counters
		return nil
	})
	if err != nil {
		return ThreadState{}, err
	}
	if err := s.RunStopped(ctx, r); err != nil {
		return ThreadState{}, err
	}
	return s.State(ctx, id)
}

// StartThreadRun starts a run of a thread that holds its thread and has
// not started (its step 0 is not stored), as after a crash between its
// claim and its start; a run still waiting in the queue is left alone.
// Executors call it for thread runs they find without a step 0
// (embedded.SchedulerConfig.StartThreadRun).
//
// A pending run that its thread names neither as active nor in its queue
// will never start: a cancel of it was cut short between taking it off
// the queue and writing it cancelled (see cancelQueued). It is cancelled.
func (s *Service) StartThreadRun(ctx context.Context, r Run) error {
	if r.ThreadID == "" || s.Threads == nil {
		return nil
	}
	if t, err := s.Threads.GetThread(ctx, r.ThreadID); err == nil && r.Status == pregel.RunPending && t.Active != r.ID && !slices.Contains(t.Queue, r.ID) {
		if _, ok, err := s.cancelWaiting(ctx, r.ID, false); !ok || err != nil {
			return err
		}
		s.logger().Warn("pending run on no thread (a cancel cut short) cancelled", "thread_id", r.ThreadID, "run_id", r.ID)
		return nil
	}
	return s.startIfActive(ctx, r.ThreadID, r.ID)
}

// StaleClaim is how long a thread may name as active a run that has no
// record before a new run may take the thread: the run's creator stopped
// (crashed) between claiming the thread and storing the run.
const StaleClaim = time.Minute

// repairClaim repairs a thread that has not changed for StaleClaim while
// a run holds it: if that run has left the thread but its hand-off never
// happened (the caller of RunStopped failed and nothing called it again),
// it passes the thread on; if the run has no record, its creator stalled
// or stopped between claiming the thread and storing it, and its claim is
// dropped (dropStaleClaim), with those of the queued runs after it that
// have no record either (they are as old), and the run whose turn it then
// is starts.
func (s *Service) repairClaim(ctx context.Context, threadID string) error {
	t, err := s.Threads.GetThread(ctx, threadID)
	if err != nil || t.Active == "" || s.now().Sub(t.UpdatedAt) <= StaleClaim {
		return err
	}
	if r, err := s.Runs.GetRun(ctx, t.Active); err == nil && leftThread(r) {
		s.logger().Warn("thread still held by a run that left it; passing it on", "thread_id", threadID, "run_id", r.ID, "status", r.Status)
		return s.RunStopped(ctx, r)
	}
	for _, id := range append([]string{t.Active}, t.Queue...) {
		dropped, err := s.dropStaleClaim(ctx, threadID, id)
		if err != nil || !dropped {
			return err
		}
	}
	return nil
}

// claimDroppedReason is the Error of the record dropStaleClaim stores in
// place of a run that was never stored.
const claimDroppedReason = "its creator stopped for over a minute between claiming the thread and storing the run, so the thread went on without it"

// dropStaleClaim drops the stale claim of run id on thread threadID if
// the run has no record. A creator may still be at work, only stalled, and
// store and start the run at any moment, so the claim is not simply
// dropped: the run's record is first stored, cancelled, by the same
// create-if-absent write its creator uses. Exactly one of the two stores
// it: if the creator did, the claim stands (dropped is false); otherwise
// its creator's store finds the cancelled record and gives up (see
// CreateOnThread), so the run never starts, and the claim leaves the
// thread (HandOffDrop), the run whose turn it is then starting.
func (s *Service) dropStaleClaim(ctx context.Context, threadID, id string) (dropped bool, err error) {
	now := s.now()
	r, created, err := s.Runs.CreateRun(ctx, Run{
		ID: id, Status: pregel.RunCancelled, ContextID: threadID, ThreadID: threadID, Error: claimDroppedReason, CreatedAt: now, UpdatedAt: now,
		Events: []Event{{At: now, Type: EventCancelled, Status: pregel.RunCancelled, Detail: claimDroppedReason}},
	})
	if err != nil {
		return false, fmt.Errorf("store run %q, whose claim of thread %q is stale, cancelled: %w", id, threadID, err)
	}
	if !created && !claimDropped(r) {
		return false, nil // its creator stored it: the claim stands
	}
	s.logger().Warn("thread claimed by a run that was never stored; its claim is dropped", "thread_id", threadID, "run_id", id)
	var eff HandOffEffect
	_, err = MutateThread(ctx, s.Threads, threadID, func(t *Thread) error {
		next, e, err := HandOff(*t, HandOffEvent{Kind: HandOffDrop, Run: id})
		*t, eff = next, e
		return err
	})
	if errors.Is(err, errStop) {
		return true, nil // off the thread already (a cancel, or another repair)
	}
	if err != nil {
		return false, fmt.Errorf("drop the stale claim of run %q on thread %q: %w", id, threadID, err)
	}
	if eff.Start != "" {
		if err := s.startIfActive(ctx, threadID, eff.Start); err != nil {
			return true, err
		}
	}
	return true, nil
}

// claimDropped reports whether r is the record dropStaleClaim stored in
// place of a run whose creator lost its claim: it never ran.
func claimDropped(r Run) bool {
	return r.Status == pregel.RunCancelled && r.Graph == "" && r.Error == claimDroppedReason
}

// claimDroppedError refuses a create whose claim of its thread was dropped
// as stale (the record r stands in for its run).
func claimDroppedError(r Run) error {
	return fmt.Errorf("run %q was not created: the request stopped for over %s between claiming thread %q and storing the run, and the thread went on without it (the run id is taken, by a cancelled run); create the run again with a new run_id: %w", r.ID, StaleClaim, r.ThreadID, ErrConflict)
}

// threadIncompatible says why a thread's state does not fit the graph now,
// and what to do.
func threadIncompatible(err error) string {
	var ie *pregel.IncompatibleError
	if !errors.As(err, &ie) {
		return err.Error()
	}
	return fmt.Sprintf("its state was written by version %s of the graph, the code's is %s: %s; run the thread on compatible code, or declare a rename or a migration (Builder.RenameNode, RenameChannel, Migrate) from its version", ie.From.Label(), ie.To.Label(), ie.Reason)
}
