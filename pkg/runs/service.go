package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// Registry holds the graphs a deployment serves, by name.
type Registry struct {
	graphs map[string]*pregel.Graph
	names  []string
}

// NewRegistry registers graphs; names must be unique.
func NewRegistry(graphs ...*pregel.Graph) (*Registry, error) {
	r := &Registry{graphs: make(map[string]*pregel.Graph, len(graphs))}
	for _, g := range graphs {
		if _, dup := r.graphs[g.Name()]; dup {
			return nil, fmt.Errorf("runs: graph %q registered twice", g.Name())
		}
		r.graphs[g.Name()] = g
		r.names = append(r.names, g.Name())
	}
	slices.Sort(r.names)
	return r, nil
}

// Get returns the graph registered under name.
func (r *Registry) Get(name string) (*pregel.Graph, bool) {
	g, ok := r.graphs[name]
	return g, ok
}

// List returns the registered graphs sorted by name.
func (r *Registry) List() []*pregel.Graph {
	out := make([]*pregel.Graph, len(r.names))
	for i, n := range r.names {
		out[i] = r.graphs[n]
	}
	return out
}

func (r *Registry) lookup(name string) (*pregel.Graph, error) {
	if g, ok := r.graphs[name]; ok {
		return g, nil
	}
	return nil, fmt.Errorf("graph %q is not registered; graphs are %s: %w", name, strings.Join(r.names, ", "), ErrNotFound)
}

// Dispatcher makes runs progress. The embedded Scheduler (package
// embedded) runs them in this process; the serverless one sends ticks to a
// queue (package tick).
type Dispatcher interface {
	// Dispatch starts or continues a run whose record is pending.
	Dispatch(ctx context.Context, r Run) error
	// Signal tells whoever executes the run that a drain or cancel was
	// requested on its record.
	Signal(ctx context.Context, r Run)
}

// Service applies the lifecycle rules of runs. The HTTP API, the CLI and
// the Lambdas call it; it is safe for concurrent use.
type Service struct {
	Graphs      *Registry
	Runs        Store
	Checkpoints pregel.Checkpointer
	// Threads keeps thread records; nil disables threads.
	Threads    ThreadStore
	Dispatcher Dispatcher
	Logger     *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Tracer, when set, starts the root span of each run created.
	Tracer Tracer
}

// Check reports what s lacks, so that a server built on it fails when it
// is constructed rather than on its first request: Graphs, Runs,
// Checkpoints and Dispatcher are required, and with Threads set, Runs and
// Checkpoints must both be RunDeleters (deleting a thread deletes its
// runs). The error names every missing part.
func (s *Service) Check() error {
	var errs []error
	for _, f := range []struct {
		name string
		nil  bool
	}{
		{"Graphs", s.Graphs == nil},
		{"Runs", s.Runs == nil},
		{"Checkpoints", s.Checkpoints == nil},
		{"Dispatcher", s.Dispatcher == nil},
	} {
		if f.nil {
			errs = append(errs, fmt.Errorf("runs.Service.%s is nil", f.name))
		}
	}
	if s.Threads != nil {
		if _, ok := s.Runs.(RunDeleter); s.Runs != nil && !ok {
			errs = append(errs, fmt.Errorf("runs.Service.Threads is set but Runs (%T) has no DeleteRun method (runs.RunDeleter), which deleting a thread needs", s.Runs))
		}
		if _, ok := s.Checkpoints.(RunDeleter); s.Checkpoints != nil && !ok {
			errs = append(errs, fmt.Errorf("runs.Service.Threads is set but Checkpoints (%T) has no DeleteRun method (runs.RunDeleter), which deleting a thread needs", s.Checkpoints))
		}
	}
	return errors.Join(errs...)
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now().UTC()
}

// CreateRequest asks for a new run.
type CreateRequest struct {
	// RunID makes creation idempotent: the same id with the same graph
	// and input returns the existing run. Empty: a new id.
	RunID     string          `json:"run_id,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ContextID string          `json:"context_id,omitempty"`
	// Message, if set, is the protocol message asking for the run, kept
	// as the first of its Messages (not part of the input's identity).
	Message json.RawMessage `json:"-"`
	// WatchedUntil, if set, marks a new run watched until then from its
	// creation (Run.WatchedUntil): a create that answers with the run's
	// stream, so that a runtime keeping only watched runs' events keeps
	// the first ones too. It does not change an existing run.
	WatchedUntil time.Time `json:"-"`
}

// ValidID reports whether id can name a run: 1 to 128 letters, digits,
// '.', '_', ':' or '-', starting with a letter or digit.
func ValidID(id string) bool {
	// ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$, without a regular expression
	// (its counted repetition costs milliseconds to compile at start).
	if id == "" || strings.IndexByte("._:-", id[0]) >= 0 {
		return false
	}
	return idChars(id)
}

// idChars reports whether s is 1 to 128 bytes of ASCII letters,
// digits and ".", "_", ":" and "-". It is the regular expression [A-Za-z0-9._:-]{1,128} without one:
// compiling a counted repetition costs milliseconds at every process's
// start (a Lambda function's cold start among them).
func idChars(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._:-", c) >= 0) {
			return false
		}
	}
	return true
}

// Create validates the input, stores the run and its step 0 checkpoint,
// and dispatches it. created is false when the run already existed with
// the same graph and input; if that run is still pending, its step 0 and
// its dispatch are done again (both are idempotent), so that retrying a
// request that failed half way leaves a run that executes.
func (s *Service) Create(ctx context.Context, graph string, req CreateRequest) (r Run, created bool, err error) {
	g, err := s.Graphs.lookup(graph)
	if err != nil {
		return Run{}, false, err
	}
	if req.RunID == "" {
		req.RunID = pregel.NewRunID()
	} else if !ValidID(req.RunID) {
		return Run{}, false, fmt.Errorf("run_id %q must be 1 to 128 letters, digits, '.', '_', ':' or '-': %w", req.RunID, ErrInvalid)
	}
	if req.ContextID != "" && !ValidID(req.ContextID) {
		return Run{}, false, fmt.Errorf("context_id %q must be 1 to 128 letters, digits, '.', '_', ':' or '-': %w", req.ContextID, ErrInvalid)
	}
	input, err := compactJSON(req.Input)
	if err != nil {
		return Run{}, false, fmt.Errorf("input is not valid JSON: %w", ErrInvalid)
	}
	cp, err := g.Start(ctx, req.RunID, input)
	if err != nil {
		return Run{}, false, fmt.Errorf("%s: %w", strings.TrimPrefix(err.Error(), "pregel: "), ErrInvalid)
	}
	now := s.now()
	stamp := g.Stamp()
	run := Run{
		GraphVersion: &stamp,
		ID:           req.RunID, Graph: graph, Status: pregel.RunPending, Input: input, ContextID: req.ContextID, CreatedAt: now, UpdatedAt: now, WatchedUntil: req.WatchedUntil,
		Events: []Event{{At: now, Type: EventCreated, Status: pregel.RunPending}}, Messages: appendMessage(nil, req.Message),
	}
	if s.Tracer != nil {
		var end func(error)
		ctx, end = s.Tracer.StartRun(ctx, &run)
		defer func() { end(err) }()
	}
	r, created, err = s.Runs.CreateRun(ctx, run)
	if err != nil {
		return Run{}, false, fmt.Errorf("store run: %w", err)
	}
	if !created {
		if r.Graph != graph || !bytes.Equal(r.Input, input) {
			return Run{}, false, fmt.Errorf("run %q already exists with a different graph or input; choose another run_id: %w", req.RunID, ErrConflict)
		}
		if r.Status != pregel.RunPending {
			return r, false, nil
		}
		// The first request may have failed or stopped before storing
		// step 0 or dispatching the run; both are idempotent, so a retry
		// finishes its work.
	}
	if err := s.Checkpoints.Commit(ctx, cp); err != nil && !errors.Is(err, pregel.ErrStepConflict) {
		return Run{}, false, fmt.Errorf("store step 0: %w", err)
	}
	if err := s.Dispatcher.Dispatch(ctx, r); err != nil {
		return Run{}, false, fmt.Errorf("dispatch run: %w", err)
	}
	return r, created, nil
}

func compactJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return json.RawMessage("{}"), nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Get returns a run. A pending or running run's step and counters come
// from its latest checkpoint, since executors may update the record only
// when its status changes.
func (s *Service) Get(ctx context.Context, id string) (Run, error) {
	r, err := s.Runs.GetRun(ctx, id)
	if err != nil || (r.Status != pregel.RunPending && r.Status != pregel.RunRunning) {
		return r, err
	}
	cp, err := s.Checkpoints.Load(ctx, id, pregel.Latest)
	switch {
	case errors.Is(err, pregel.ErrNotFound):
		return r, nil
	case err != nil:
		return Run{}, fmt.Errorf("load run %q: %w", id, err)
	case cp.Step > r.Step:
		r.Step, r.Counters = cp.Step, cp.Counters
	}
	s.AddUsage(ctx, &r, cp)
	return r, nil
}

// List lists runs.
func (s *Service) List(ctx context.Context, f Filter) (Page, error) {
	if f.Graph != "" {
		if _, ok := s.Graphs.Get(f.Graph); !ok {
			return Page{}, fmt.Errorf("graph %q is not registered; graphs are %s: %w", f.Graph, strings.Join(s.Graphs.names, ", "), ErrInvalid)
		}
	}
	switch f.Status {
	case "", pregel.RunPending, pregel.RunRunning, pregel.RunInterrupted, pregel.RunDrained, pregel.RunCompleted, pregel.RunFailed, pregel.RunCancelled:
	default:
		return Page{}, fmt.Errorf("status %q is not a run status; use pending, running, interrupted, drained, completed, failed or cancelled: %w", f.Status, ErrInvalid)
	}
	if len(f.Version) > 128 || strings.ContainsAny(f.Version, " \t\n") {
		return Page{}, fmt.Errorf("version %q must be a version name or fingerprint, without spaces: %w", f.Version, ErrInvalid)
	}
	if f.Limit < 0 || f.Limit > 500 {
		return Page{}, fmt.Errorf("limit %d must be between 1 and 500 (0 means 50): %w", f.Limit, ErrInvalid)
	}
	return s.Runs.ListRuns(ctx, f)
}

// History lists a run's committed steps with their node statuses, all of
// them: HistoryPage reads a long run's a page at a time.
func (s *Service) History(ctx context.Context, id string) ([]pregel.StepInfo, error) {
	if _, err := s.Runs.GetRun(ctx, id); err != nil {
		return nil, err
	}
	h, err := s.Checkpoints.History(ctx, id)
	if errors.Is(err, pregel.ErrNotFound) {
		return nil, nil
	}
	return h, err
}

// Events returns a run's history, oldest first, and the number of events
// dropped from it (see MaxEvents).
func (s *Service) Events(ctx context.Context, id string) (events []Event, dropped int, err error) {
	r, err := s.Runs.GetRun(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	return r.Events, r.EventsDropped, nil
}

// Checkpoint returns a run's checkpoint at step (pregel.Latest: newest).
func (s *Service) Checkpoint(ctx context.Context, id string, step int) (*pregel.Checkpoint, error) {
	if _, err := s.Runs.GetRun(ctx, id); err != nil {
		return nil, err
	}
	cp, err := s.Checkpoints.Load(ctx, id, step)
	if errors.Is(err, pregel.ErrNotFound) {
		return nil, fmt.Errorf("run %q has no step %d: %w", id, step, ErrNotFound)
	}
	return cp, err
}

// Drain asks a pending or running run to stop at its next superstep
// boundary.
func (s *Service) Drain(ctx context.Context, id, reason string) (Run, error) {
	if len(reason) > 1024 {
		return Run{}, fmt.Errorf("reason is %d bytes; keep it under 1024: %w", len(reason), ErrInvalid)
	}
	r, err := s.mutateRun(ctx, id, func(r *Run) error {
		if r.Status != pregel.RunPending && r.Status != pregel.RunRunning {
			return fmt.Errorf("run %q is %s; only pending or running runs can be drained: %w", id, r.Status, ErrInvalidState)
		}
		if r.CancelRequested {
			return fmt.Errorf("run %q is being cancelled: %w", id, ErrInvalidState)
		}
		if !r.DrainRequested {
			r.DrainRequested, r.DrainReason = true, reason
		}
		return nil
	})
	if err == nil {
		s.Dispatcher.Signal(ctx, r)
	}
	return r, err
}

// Cancel stops a run for good: at once when it is paused, at the executor's
// next check when it is running.
func (s *Service) Cancel(ctx context.Context, id string) (Run, error) {
	if r, ok, err := s.cancelQueued(ctx, id); ok || err != nil {
		return r, err
	}
	r, err := s.mutateRun(ctx, id, func(r *Run) error {
		switch r.Status {
		case pregel.RunInterrupted, pregel.RunDrained:
			r.Status, r.Interrupts, r.Resume = pregel.RunCancelled, nil, nil
		case pregel.RunPending, pregel.RunRunning:
			r.CancelRequested = true
		default:
			return fmt.Errorf("run %q is %s and cannot be cancelled: %w", id, r.Status, ErrInvalidState)
		}
		return nil
	})
	if err == nil && r.CancelRequested {
		s.Dispatcher.Signal(ctx, r)
		if r.Status == pregel.RunPending && r.ThreadID != "" && s.Threads != nil {
			// A thread run that holds its thread but was never started
			// (the hand-off that made it active was cut short before
			// it started it) has no executor to act on the request:
			// end it here and pass the thread on.
			if _, lerr := s.Checkpoints.Load(ctx, id, 0); errors.Is(lerr, pregel.ErrNotFound) {
				if serr := s.startIfActive(ctx, r.ThreadID, id); serr != nil {
					s.logger().Error("cancel a thread run that never started", "run_id", id, "err", serr)
				} else if cur, gerr := s.Runs.GetRun(ctx, id); gerr == nil {
					r = cur
				}
			}
		}
	}
	if err == nil && r.Status == pregel.RunCancelled {
		if s.Tracer != nil {
			s.Tracer.EndRun(ctx, r)
		}
		if terr := s.RunStopped(ctx, r); terr != nil {
			s.logger().Error("pass a cancelled run's thread on", "run_id", id, "err", terr)
		}
	}
	return r, err
}

// Resume continues an interrupted run with the answers in req, or a
// drained run.
func (s *Service) Resume(ctx context.Context, id string, req ResumeRequest) (Run, error) {
	var before Run
	r, err := s.mutateRun(ctx, id, func(r *Run) error {
		before = *r
		switch r.Status {
		case pregel.RunDrained:
			if len(req.Value) > 0 || len(req.Values) > 0 {
				return fmt.Errorf("run %q is drained, not interrupted: it waits for no value; resume it without one: %w", id, ErrInvalid)
			}
		case pregel.RunInterrupted:
			if len(req.Value) == 0 && len(req.Values) == 0 {
				return fmt.Errorf("run %q waits for a value for interrupt(s) %s; send {\"resume\": value}: %w", id, interruptIDs(r.Interrupts), ErrInvalid)
			}
			for k := range req.Values {
				if !slices.ContainsFunc(r.Interrupts, func(in pregel.InterruptInfo) bool { return in.ID == k }) {
					return fmt.Errorf("run %q has no pending interrupt %q; pending: %s: %w", id, k, interruptIDs(r.Interrupts), ErrInvalid)
				}
			}
			if err := pregel.CheckAnswers(r.Interrupts, req.Value, req.Values); err != nil {
				return fmt.Errorf("%s: %w", strings.TrimPrefix(err.Error(), pregel.ErrInvalidResume.Error()+": "), ErrInvalid)
			}
		default:
			if r.SupersededBy != "" {
				return supersededError(*r)
			}
			if won := LastAnswer(*r); won != "" {
				// Several answers to one question: the first applied
				// won, the others are told which it was.
				return fmt.Errorf("run %q was already resumed, %s, and is %s now; this answer was not applied: %w", id, won, r.Status, ErrInvalidState)
			}
			return fmt.Errorf("run %q is %s; only interrupted or drained runs can be resumed: %w", id, r.Status, ErrInvalidState)
		}
		if r.SupersededBy != "" {
			return supersededError(*r)
		}
		r.Status, r.DrainRequested, r.DrainReason = pregel.RunPending, false, ""
		r.Messages = appendMessage(r.Messages, req.Message)
		if s.Tracer != nil {
			s.Tracer.LinkResume(ctx, r)
		}
		if len(req.Value) > 0 || len(req.Values) > 0 {
			r.Resume = &req
		}
		return nil
	})
	if err != nil {
		return Run{}, err
	}
	if err := s.Dispatcher.Dispatch(ctx, r); err != nil {
		// Put the run back as it was, so that the caller can retry. Its
		// history keeps the resume and records the status restored.
		if _, rbErr := s.mutateRun(ctx, id, func(cur *Run) error {
			if cur.Status != pregel.RunPending || cur.Version != r.Version {
				return errRolledBack
			}
			cur.Status, cur.Resume, cur.DrainRequested, cur.DrainReason, cur.Messages = before.Status, before.Resume, before.DrainRequested, before.DrainReason, before.Messages
			return nil
		}); rbErr != nil && !errors.Is(rbErr, errRolledBack) {
			s.logger().Error("roll back a resume that could not be dispatched", "run_id", id, "err", rbErr)
		}
		return Run{}, fmt.Errorf("dispatch run: %w", err)
	}
	return r, nil
}

// errRolledBack stops a rollback when the run has moved on.
var errRolledBack = errors.New("run moved on")

func (s *Service) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func interruptIDs(ins []pregel.InterruptInfo) string {
	ids := make([]string, len(ins))
	for i, in := range ins {
		ids[i] = in.ID
	}
	return strings.Join(ids, ", ")
}

// Mutate reads a run, applies fn and stores the result, retrying when the
// run changed in between. An error from fn is returned as is.
//
// The events of the change (a new status, a drain, cancel or resume
// request; see Event) are appended to the run's history before it is
// stored, at the current time; fn should leave Events alone.
func Mutate(ctx context.Context, store Store, id string, fn func(*Run) error) (Run, error) {
	return mutate(ctx, store, id, func() time.Time { return time.Now().UTC() }, fn)
}

// mutateRun is Mutate with the Service's clock for the events.
func (s *Service) mutateRun(ctx context.Context, id string, fn func(*Run) error) (Run, error) {
	return mutate(ctx, s.Runs, id, s.now, fn)
}

func mutate(ctx context.Context, store Store, id string, now func() time.Time, fn func(*Run) error) (Run, error) {
	for attempt := 0; ; attempt++ {
		r, err := store.GetRun(ctx, id)
		if err != nil {
			return Run{}, err
		}
		before := r
		if err := fn(&r); err != nil {
			return r, err
		}
		settleRun(&r)
		RecordChanges(before, &r, now())
		out, err := store.UpdateRun(ctx, r)
		if !errors.Is(err, ErrConflict) || attempt >= 50 {
			return out, err
		}
		if err := ctx.Err(); err != nil {
			return Run{}, err
		}
	}
}

// FleetFilter selects the runs of a fleet operation (DrainAll, ResumeAll):
// all, those of one graph, of one graph version (name or fingerprint), or
// both.
type FleetFilter struct {
	Graph   string
	Version string
}

// FleetResult says what a fleet operation did: the ids of the runs it
// changed and, by run id, why it could not change the others (a run that
// moved on meanwhile, say).
type FleetResult struct {
	Runs    []string          `json:"runs"`
	Skipped map[string]string `json:"skipped,omitempty"`
}

// DrainAll asks every pending or running run the filter selects to drain
// with reason, as Drain does one: each stops at its next superstep
// boundary, resumable with ResumeAll. Runs waiting already (interrupted,
// drained) are left as they are. It is how a deploy stops the fleet.
func (s *Service) DrainAll(ctx context.Context, f FleetFilter, reason string) (FleetResult, error) {
	if reason == "" {
		return FleetResult{}, fmt.Errorf("a fleet drain needs a reason (e.g. \"deploy\"): %w", ErrInvalid)
	}
	var ids []string
	for _, st := range []pregel.RunStatus{pregel.RunRunning, pregel.RunPending} {
		got, err := s.listAll(ctx, Filter{Graph: f.Graph, Version: f.Version, Status: st})
		if err != nil {
			return FleetResult{}, err
		}
		ids = append(ids, got...)
	}
	res := FleetResult{Runs: []string{}}
	for _, id := range ids {
		if _, err := s.Drain(ctx, id, reason); err != nil {
			if errors.Is(err, ErrInvalidState) || errors.Is(err, ErrNotFound) {
				res.skip(id, err)
				continue
			}
			return res, err
		}
		res.Runs = append(res.Runs, id)
	}
	return res, nil
}

// ResumeAll resumes every run the filter selects that has status (only
// drained: an interrupted run waits for its own answer), as Resume does
// one. A run that cannot be resumed (superseded, or moved on) is
// skipped with the reason.
func (s *Service) ResumeAll(ctx context.Context, f FleetFilter, status pregel.RunStatus) (FleetResult, error) {
	if status != pregel.RunDrained {
		return FleetResult{}, fmt.Errorf("status %q: only drained runs can be resumed together (an interrupted run waits for its own answer); use --status drained: %w", status, ErrInvalid)
	}
	ids, err := s.listAll(ctx, Filter{Graph: f.Graph, Version: f.Version, Status: status})
	if err != nil {
		return FleetResult{}, err
	}
	res := FleetResult{Runs: []string{}}
	for _, id := range ids {
		if _, err := s.Resume(ctx, id, ResumeRequest{}); err != nil {
			if errors.Is(err, ErrInvalidState) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) {
				res.skip(id, err)
				continue
			}
			return res, err
		}
		res.Runs = append(res.Runs, id)
	}
	return res, nil
}

func (r *FleetResult) skip(id string, err error) {
	if r.Skipped == nil {
		r.Skipped = map[string]string{}
	}
	r.Skipped[id] = err.Error()
}

// listAll lists the ids of every run f selects, page by page.
func (s *Service) listAll(ctx context.Context, f Filter) ([]string, error) {
	var ids []string
	f.Limit = 500
	for {
		page, err := s.List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Runs {
			ids = append(ids, r.ID)
		}
		if page.NextPageToken == "" {
			return ids, nil
		}
		f.PageToken = page.NextPageToken
	}
}
