package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// DefaultConcurrency is the number of runs a Scheduler executes at once
// when its config does not say.
const DefaultConcurrency = 8

// subscriberBuffer bounds the events buffered for one subscriber.
const subscriberBuffer = 256

// ShutdownReason is the drain reason of runs stopped by Scheduler.Shutdown.
const ShutdownReason = "shutdown"

// SchedulerConfig configures a Scheduler. Graphs, Runs and Checkpoints are
// required.
type SchedulerConfig struct {
	Graphs      *runs.Registry
	Runs        runs.Store
	Checkpoints pregel.Checkpointer
	// Concurrency is the most runs executing at once (default
	// DefaultConcurrency); the others wait in a queue.
	Concurrency int
	// Logger receives what cannot be reported to a caller (default
	// slog.Default()).
	Logger *slog.Logger
	// Events keeps the runs' event streams (see WatchEvents). Default:
	// Runs, if it is a runs.EventLog too, else a runs.MemoryEventLog.
	Events runs.EventLog
	// OnStop, if set, is called with a run's record when the run stops
	// executing (completed, failed, cancelled, drained or interrupted),
	// after the record is stored; runs.Service.RunStopped passes a thread on
	// to its next run this way.
	OnStop func(ctx context.Context, r runs.Run) error
	// StartThreadRun, if set, is called instead of executing a run of a
	// thread that has no step 0 yet: such a run waits in its thread's
	// queue, and its thread starts it (runs.Service.StartThreadRun). Without
	// it, such a run is left pending.
	StartThreadRun func(ctx context.Context, r runs.Run) error
	// Tracer, when set, traces each execution of a run.
	Tracer runs.Tracer
	// EventsMode says which runs' events are logged (default
	// EventsWatched: see scheduler_events.go).
	EventsMode EventsMode
	// EventRetention is how many events the log keeps per run when the
	// Scheduler makes it (a MemoryEventLog; 0: DefaultStreamRetention).
	// A store that is the log has its own setting.
	EventRetention int
	// EventMaxAge, when positive, is how long the log keeps events: while
	// started, the Scheduler deletes older ones every tenth of it (at most
	// every minute) if the log is an EventExpirer. Zero keeps them until
	// their run is deleted or the count retention drops them;
	// `superstep dev` sets DefaultEventMaxAge. Negative is refused by
	// Start.
	EventMaxAge time.Duration
}

// Scheduler is the embedded Dispatcher: it executes runs in this process
// with the engine, at most Concurrency at a time, and keeps their records
// up to date (status, step, counters, interrupts, errors).
//
// A Scheduler's life is Start, then Dispatch and Signal calls (usually from
// a Service), then Shutdown. Cancelling the context given to Start stops it
// as a crash would: executing runs stop at once and their records are left
// as they are, so the next Start continues them.
//
// Runs are durable throughout: a run continues from its last committed
// checkpoint, and results recorded for tasks of the step in progress are
// reused rather than computed again. A Scheduler assumes it is the only one
// executing the runs of its stores.
type Scheduler struct {
	graphs      *runs.Registry
	runs        runs.Store
	checkpoints pregel.Checkpointer
	concurrency int
	log         *slog.Logger
	onStop      func(ctx context.Context, r runs.Run) error
	startThread func(ctx context.Context, r runs.Run) error
	tracer      runs.Tracer

	mu     sync.Mutex
	state  schedState
	base   context.Context // from Start; every execution derives from it
	stopFn func() bool     // stops the context.AfterFunc of Start
	queue  []string        // run ids waiting, oldest first
	queued map[string]bool
	active map[string]*execution
	idle   chan struct{} // closed when nothing is queued or executing
	wg     sync.WaitGroup

	subMu  sync.Mutex
	subs   map[string]map[*subscriber]struct{}
	closed bool // Shutdown closed every subscription

	// The event streams: scheduler_events.go.
	events   runs.EventLog
	hub      runs.WatchHub
	batchers map[string]*eventBatcher // by run id, guarded by subMu
	mode     EventsMode
	leases   map[string]time.Time    // run -> events logged until, guarded by subMu
	recent   map[string]recentEvents // run -> events of an unwatched execution, guarded by subMu
	maxAge   time.Duration           // of events; 0: none
	sweeping chan struct{}           // closed to stop the sweep of expired events
	swept    chan struct{}           // closed when the sweep stopped
}

type schedState int

const (
	stateNew      schedState = iota // Dispatch queues; nothing executes
	stateRunning                    // executing
	stateStopping                   // Shutdown in progress: nothing new starts
	stateStopped                    // Shutdown done or Start's context done
)

// execution is one run executing in this process.
type execution struct {
	id   string
	ctl  *pregel.Control
	ctx  context.Context
	stop context.CancelFunc // cancels ctx: Shutdown's hard stop

	// Guarded by Scheduler.mu.
	again  bool // dispatched again while executing
	forced bool // stopped by Shutdown after its grace period

	// Used by the execution's goroutine only.
	started    bool          // the engine emitted run_started
	progressAt time.Time     // when the record last got the step
	finished   *pregel.Event // the engine's run_finished, held back
	// stamp is the graph's version, set on the record at the first
	// step committed on this code when the record names another.
	stamp *pregel.Stamp
}

var _ runs.Dispatcher = (*Scheduler)(nil)

// NewScheduler returns a Scheduler; call Start to make it execute runs.
func NewScheduler(cfg SchedulerConfig) *Scheduler {
	s := &Scheduler{
		graphs:      cfg.Graphs,
		runs:        cfg.Runs,
		checkpoints: cfg.Checkpoints,
		concurrency: cfg.Concurrency,
		log:         cfg.Logger,
		onStop:      cfg.OnStop,
		startThread: cfg.StartThreadRun,
		tracer:      cfg.Tracer,
		queued:      make(map[string]bool),
		active:      make(map[string]*execution),
		subs:        make(map[string]map[*subscriber]struct{}),
		events:      cfg.Events,
		batchers:    make(map[string]*eventBatcher),
		mode:        cfg.EventsMode,
		leases:      make(map[string]time.Time),
		recent:      make(map[string]recentEvents),
		maxAge:      cfg.EventMaxAge,
	}
	if s.mode == "" {
		s.mode = EventsWatched
	}
	if s.events == nil {
		if l, ok := cfg.Runs.(runs.EventLog); ok {
			s.events = l
		} else {
			s.events = runs.NewMemoryEventLog(cfg.EventRetention, 0)
		}
	}
	if s.concurrency <= 0 {
		s.concurrency = DefaultConcurrency
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Start recovers and starts executing runs. Every run whose record is
// pending or running (left so by a crash or by a previous Shutdown) is
// queued, oldest first, and continues from its last committed checkpoint;
// drained and interrupted runs wait to be resumed. Runs dispatched before
// Start wait for it.
//
// ctx bounds the Scheduler's life: when it is cancelled, executing runs
// stop at once and their records are left untouched, as after a crash.
// Use Shutdown for an orderly stop.
func (s *Scheduler) Start(ctx context.Context) error {
	if s.graphs == nil || s.runs == nil || s.checkpoints == nil {
		return errors.New("embedded: scheduler needs Graphs, Runs and Checkpoints")
	}
	if s.maxAge < 0 {
		return fmt.Errorf("embedded: scheduler EventMaxAge %s is negative: want 0 (no limit by age) or more: %w", s.maxAge, runs.ErrInvalid)
	}
	s.mu.Lock()
	if s.state != stateNew {
		s.mu.Unlock()
		return errors.New("embedded: scheduler already started or shut down; make a new one")
	}
	s.mu.Unlock()

	var pending []runs.Run
	for _, st := range []pregel.RunStatus{pregel.RunPending, pregel.RunRunning} {
		f := runs.Filter{Status: st, Limit: runs.MaxPageSize}
		for {
			page, err := s.runs.ListRuns(ctx, f)
			if err != nil {
				return fmt.Errorf("embedded: recover %s runs: %w", st, err)
			}
			pending = append(pending, page.Runs...)
			if page.NextPageToken == "" {
				break
			}
			f.PageToken = page.NextPageToken
		}
	}
	// Oldest first.
	slices.SortStableFunc(pending, func(a, b runs.Run) int { return runs.CompareRuns(b, a) })

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateNew {
		return errors.New("embedded: scheduler already started or shut down; make a new one")
	}
	s.base, s.state = ctx, stateRunning
	for _, r := range pending {
		s.enqueueLocked(r.ID)
	}
	if len(pending) > 0 {
		s.log.InfoContext(ctx, "continuing runs left pending or running", "runs", len(pending))
	}
	s.stopFn = context.AfterFunc(ctx, s.crash)
	if x, ok := s.events.(runs.EventExpirer); ok && s.maxAge > 0 {
		stop, swept := make(chan struct{}), make(chan struct{})
		s.sweeping, s.swept = stop, swept
		go func() {
			defer close(swept)
			s.sweepEvents(ctx, x, s.maxAge, stop)
		}()
	}
	s.pumpLocked()
	return nil
}

// crash stops the Scheduler when Start's context is done.
func (s *Scheduler) crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = stateStopped
	s.queue = nil
	clear(s.queued)
	s.checkIdleLocked()
}

// Dispatch queues a run to execute. It does not block: runs beyond
// Concurrency wait in an unbounded queue. A run already queued is not
// queued twice; one executing is executed again when it stops, so that a
// resume arriving as it stops is not lost. After Shutdown, Dispatch
// accepts the run without executing it: its record stays pending, and the
// next Start continues it.
func (s *Scheduler) Dispatch(ctx context.Context, r runs.Run) error {
	if r.ID == "" {
		return fmt.Errorf("dispatch a run with no id: %w", runs.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateStopping, stateStopped:
		s.log.DebugContext(ctx, "run dispatched to a stopped scheduler; it will continue at the next start", "run_id", r.ID)
		return nil
	}
	if ex, ok := s.active[r.ID]; ok {
		ex.again = true
		return nil
	}
	s.enqueueLocked(r.ID)
	s.pumpLocked()
	return nil
}

func (s *Scheduler) enqueueLocked(id string) {
	if s.queued[id] {
		return
	}
	s.queued[id] = true
	s.queue = append(s.queue, id)
}

// pumpLocked starts queued runs while there is room.
func (s *Scheduler) pumpLocked() {
	for s.state == stateRunning && len(s.active) < s.concurrency && len(s.queue) > 0 {
		id := s.queue[0]
		s.queue[0] = ""
		s.queue = s.queue[1:]
		delete(s.queued, id)
		ctx, stop := context.WithCancel(s.base)
		ex := &execution{id: id, ctl: &pregel.Control{}, ctx: ctx, stop: stop}
		s.active[id] = ex
		s.wg.Go(func() {
			defer s.done(ex)
			s.execute(ex)
		})
	}
}

// done retires an execution and starts what waits.
func (s *Scheduler) done(ex *execution) {
	ex.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.active, ex.id)
	if ex.again && s.state == stateRunning {
		s.enqueueLocked(ex.id)
	}
	s.pumpLocked()
	s.checkIdleLocked()
}

func (s *Scheduler) checkIdleLocked() {
	if s.idle != nil && len(s.active) == 0 && len(s.queue) == 0 {
		close(s.idle)
		s.idle = nil
	}
}

// WaitIdle waits until no run is queued or executing, or ctx is done. It
// suits tests and one-shot commands that create runs and wait for all of
// them.
func (s *Scheduler) WaitIdle(ctx context.Context) error {
	s.mu.Lock()
	if len(s.active) == 0 && len(s.queue) == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Signal passes a drain or cancel request recorded on r to the run. A run
// executing here is drained at its next superstep boundary or cancelled at
// once; a queued run whose cancel was requested is marked cancelled
// without running. A run not yet executing needs nothing more: it reads
// the requests from its record when it starts.
func (s *Scheduler) Signal(ctx context.Context, r runs.Run) {
	if !r.CancelRequested && !r.DrainRequested {
		return
	}
	s.mu.Lock()
	ex, active := s.active[r.ID]
	queued := s.queued[r.ID]
	if !active && queued && r.CancelRequested {
		delete(s.queued, r.ID)
		s.queue = slices.DeleteFunc(s.queue, func(id string) bool { return id == r.ID })
	}
	s.mu.Unlock()
	switch {
	case active && r.CancelRequested:
		ex.ctl.Cancel()
	case active:
		ex.ctl.RequestDrain(r.DrainReason)
	case queued && r.CancelRequested:
		s.cancelQueued(context.WithoutCancel(ctx), r.ID)
	}
}

// cancelQueued marks a run that never started cancelled.
func (s *Scheduler) cancelQueued(ctx context.Context, id string) {
	r, err := runs.Mutate(ctx, s.runs, id, func(r *runs.Run) error {
		if r.Status != pregel.RunPending && r.Status != pregel.RunRunning {
			return errSkipRun
		}
		if !r.CancelRequested {
			return errors.New("the record has no cancel request")
		}
		r.Status, r.CancelRequested = pregel.RunCancelled, false
		r.Interrupts, r.Resume = nil, nil
		return nil
	})
	switch {
	case errors.Is(err, errSkipRun):
	case err != nil:
		// Let the run's execution carry the cancel out.
		s.log.WarnContext(ctx, "cancel queued run; it will be cancelled when it starts", "run_id", id, "error", err)
		_ = s.Dispatch(ctx, runs.Run{ID: id})
	default:
		s.publish(pregel.Event{Type: pregel.EventRunFinished, RunID: id, Graph: r.Graph, Step: r.Step, Time: time.Now(), RunStatus: pregel.RunCancelled, History: r.HistoryLen()})
		s.stopped(ctx, r)
	}
}

// stopped calls OnStop for a run that stopped.
func (s *Scheduler) stopped(ctx context.Context, r runs.Run) {
	if s.onStop == nil {
		return
	}
	if err := s.onStop(ctx, r); err != nil && ctx.Err() == nil {
		s.log.ErrorContext(ctx, "after a run stopped", "run_id", r.ID, "error", err)
	}
}

// Shutdown stops the Scheduler in order: it asks every executing run to
// drain with reason ShutdownReason (visible on its record), waits up to
// grace for them to reach a superstep boundary, then stops the ones left
// at once; each ends drained at its last committed step, and results
// recorded for tasks of its unfinished step are kept. Queued runs stay
// pending and continue at the next Start. Drained runs wait to be resumed.
// Subscriptions are closed at the end.
//
// Shutdown returns once every run's goroutine has finished, or with ctx's
// error if ctx ends first.
func (s *Scheduler) Shutdown(ctx context.Context, grace time.Duration) error {
	s.mu.Lock()
	if s.state == stateNew || s.state == stateRunning {
		s.state = stateStopping
	}
	s.queue = nil
	clear(s.queued)
	execs := make([]*execution, 0, len(s.active))
	for _, ex := range s.active {
		execs = append(execs, ex)
	}
	crashed := s.base != nil && s.base.Err() != nil
	s.checkIdleLocked()
	s.mu.Unlock()

	for _, ex := range execs {
		ex.ctl.RequestDrain(ShutdownReason)
		if !crashed {
			s.recordShutdownDrain(ctx, ex.id)
		}
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		// Runs still stopping past ctx: the streams that follow them end
		// all the same, so their clients reconnect to the next server.
		s.closeSubscriptions()
		return fmt.Errorf("embedded: shutdown: %w", ctx.Err())
	case <-timer.C:
		s.mu.Lock()
		for _, ex := range s.active {
			ex.forced = true
			ex.stop()
		}
		left := len(s.active)
		s.mu.Unlock()
		if left > 0 {
			s.log.WarnContext(ctx, "runs did not drain in time; stopping them", "runs", left, "grace", grace)
		}
		select {
		case <-done:
		case <-ctx.Done():
			s.closeSubscriptions()
			return fmt.Errorf("embedded: shutdown: %w", ctx.Err())
		}
	}
	s.mu.Lock()
	s.state = stateStopped
	if s.stopFn != nil {
		s.stopFn()
	}
	sweeping, swept := s.sweeping, s.swept
	s.sweeping = nil
	s.mu.Unlock()
	if sweeping != nil {
		close(sweeping)
		<-swept
	}
	s.closeSubscriptions()
	return nil
}

// recordShutdownDrain records Shutdown's drain request on a run.
func (s *Scheduler) recordShutdownDrain(ctx context.Context, id string) {
	_, err := runs.Mutate(ctx, s.runs, id, func(r *runs.Run) error {
		if r.DrainRequested || r.CancelRequested || (r.Status != pregel.RunPending && r.Status != pregel.RunRunning) {
			return errSkipRun
		}
		r.DrainRequested, r.DrainReason = true, ShutdownReason
		return nil
	})
	if err != nil && !errors.Is(err, errSkipRun) {
		s.log.WarnContext(ctx, "record shutdown drain request", "run_id", id, "error", err)
	}
}

// errSkipRun stops the execution of a run that needs none.
var errSkipRun = errors.New("run needs no execution")

// errThreadRun: the run waits for its thread to start it.
var errThreadRun = errors.New("run of a thread not started")

// execute runs one queued run to where it stops.
func (s *Scheduler) execute(ex *execution) {
	ctx := ex.ctx
	log := s.log.With("run_id", ex.id)
	defer s.stopEvents(s.startEvents(ex.id))
	var graph *pregel.Graph
	r, err := runs.Mutate(s.base, s.runs, ex.id, func(r *runs.Run) error {
		if r.Status != pregel.RunPending && r.Status != pregel.RunRunning {
			return errSkipRun
		}
		if r.ThreadID != "" && r.Status == pregel.RunPending {
			// A run of a thread starts when its thread says so, from
			// the thread's state: not before its step 0 is stored.
			if _, err := s.checkpoints.Load(ctx, r.ID, 0); errors.Is(err, pregel.ErrNotFound) {
				return errThreadRun
			} else if err != nil {
				return err
			}
		}
		if r.CancelRequested {
			r.Status, r.CancelRequested, r.Interrupts, r.Resume = pregel.RunCancelled, false, nil, nil
			return nil
		}
		g, ok := s.graphs.Get(r.Graph)
		if !ok {
			return fmt.Errorf("graph %q is not registered", r.Graph)
		}
		graph = g
		if r.GraphVersion == nil {
			st := g.Stamp()
			r.GraphVersion = &st
		}
		r.Status = pregel.RunRunning
		return nil
	})
	switch {
	case errors.Is(err, errSkipRun):
		return
	case errors.Is(err, errThreadRun):
		if s.startThread != nil {
			if err := s.startThread(s.base, r); err != nil && s.base.Err() == nil {
				log.Error("start a run of a thread", "thread_id", r.ThreadID, "error", err)
			}
		}
		return
	case err != nil:
		if s.base.Err() == nil {
			log.Error("cannot start run; it stays as it is until the next start", "error", err)
		}
		return
	case r.Status == pregel.RunCancelled:
		if s.tracer != nil {
			s.tracer.EndRun(s.base, r)
		}
		s.publish(pregel.Event{Type: pregel.EventRunFinished, RunID: r.ID, Graph: r.Graph, Step: r.Step, Time: time.Now(), RunStatus: pregel.RunCancelled, History: r.HistoryLen()})
		s.stopped(s.base, r)
		return
	}
	if r.DrainRequested {
		ex.ctl.RequestDrain(r.DrainReason)
	}

	opts := []pregel.RunOption{
		pregel.WithRunID(r.ID),
		pregel.WithStore(s.checkpoints),
		pregel.WithControl(ex.ctl),
		pregel.WithObserver(s.observer(ex, r)),
	}
	if s.tracer != nil {
		opts = append(opts, s.tracer.RunOptions(ctx, r)...)
	}
	if st := graph.Stamp(); r.GraphVersion.Fingerprint != st.Fingerprint || r.GraphVersion.Version != st.Version {
		// The record names other code: it takes this code's stamp once
		// a step commits here.
		ex.stamp = &st
	}
	{
		// When the run's state was written by other code (the stamp of
		// its latest checkpoint, or the record's for a checkpoint stored
		// without one), the engine checks that the run can continue here
		// (pregel.Graph.Adopt) before anything runs.
		st := graph.Stamp()
		opts = append(opts, pregel.WithPrior(*r.GraphVersion, func(applied []string) {
			s.update(ex.id, func(r *runs.Run) {
				r.Events = append(r.Events, runs.Event{At: time.Now().UTC(), Type: runs.EventAdopted, Status: r.Status, Step: r.Step,
					Detail: fmt.Sprintf("from version %s to %s: %s", r.GraphVersion.Label(), st.Label(), strings.Join(applied, "; "))})
			})
		}))
	}
	var res *pregel.Result
	_, err = s.checkpoints.Load(ctx, r.ID, 0)
	switch {
	case errors.Is(err, pregel.ErrNotFound):
		res, err = graph.Run(ctx, r.Input, opts...)
	case err == nil:
		res, err = graph.Resume(ctx, r.ID, slices.Concat(opts, resumeOptions(r.Resume))...)
		if errors.Is(err, pregel.ErrInvalidResume) && r.Resume != nil && len(s.pendingInterrupts(r.ID)) == 0 {
			// The values were taken before a crash and their step has
			// been committed since: continue without them.
			res, err = graph.Resume(ctx, r.ID, opts...)
		}
	default:
		err = fmt.Errorf("load step 0: %w", err)
	}
	s.settle(ex, r, res, err)
}

// resumeOptions passes a run's resume request to the engine. The values
// are JSON already: json.RawMessage keeps WithResume from encoding them
// again.
func resumeOptions(rr *runs.ResumeRequest) []pregel.RunOption {
	if rr == nil {
		return nil
	}
	var opts []pregel.RunOption
	if len(rr.Value) > 0 {
		opts = append(opts, pregel.WithResume(rr.Value))
	}
	if len(rr.Values) > 0 {
		byID := make(map[string]any, len(rr.Values))
		for id, v := range rr.Values {
			byID[id] = v
		}
		opts = append(opts, pregel.WithResumeByID(byID))
	}
	return opts
}

// progressEvery is how often at most an executing run's record gets the
// step it reached.
const progressEvery = 100 * time.Millisecond

// observer keeps the record's progress up to date and forwards events to
// subscribers. It holds back run_finished until the record is final.
func (s *Scheduler) observer(ex *execution, r runs.Run) pregel.Observer {
	return func(ev pregel.Event) {
		switch ev.Type {
		case pregel.EventRunStarted:
			ex.started = true
			if r.Resume != nil || len(r.Interrupts) > 0 {
				// The engine has recorded the resume values.
				s.update(ex.id, func(r *runs.Run) { r.Resume, r.Interrupts = nil, nil })
			}
		case pregel.EventStepFinished:
			// The record shows progress at most every progressEvery (the
			// run's end sets its final step): a step of a fast loop costs
			// no record write and no checkpoint read.
			if now := time.Now(); now.Sub(ex.progressAt) < progressEvery {
				break
			} else {
				ex.progressAt = now
			}
			cp, err := s.checkpoints.Load(s.base, ex.id, ev.Step)
			if err != nil {
				s.logStoreError("load checkpoint for run progress", ex.id, err)
				break
			}
			s.update(ex.id, func(r *runs.Run) {
				if cp.Step >= r.Step {
					r.Step, r.Counters = cp.Step, cp.Counters
				}
				if ex.stamp != nil {
					// The state is this code's now (migrations applied).
					r.GraphVersion = ex.stamp
				}
			})
		case pregel.EventRunFinished:
			ex.finished = &ev
			return
		}
		s.publish(ev)
	}
}

// update applies fn to a run's record, logging failures.
func (s *Scheduler) update(id string, fn func(*runs.Run)) {
	_, err := runs.Mutate(s.base, s.runs, id, func(r *runs.Run) error {
		fn(r)
		return nil
	})
	if err != nil {
		s.logStoreError("update run record", id, err)
	}
}

func (s *Scheduler) logStoreError(msg, id string, err error) {
	if s.base.Err() != nil {
		return // stopping as after a crash; the next Start repairs
	}
	s.log.Warn(msg, "run_id", id, "error", err)
}

// outcome is what an execution writes to the run's record.
type outcome struct {
	status     pregel.RunStatus
	hasStep    bool
	step       int
	counters   pregel.Counters
	interrupts []pregel.InterruptInfo
	err        string
	failedNode string
	drain      string
	// forceDrain: drain replaces a drain reason already recorded.
	forceDrain bool
}

// settle records where the run stopped and publishes run_finished.
func (s *Scheduler) settle(ex *execution, r runs.Run, res *pregel.Result, err error) {
	log := s.log.With("run_id", r.ID)
	if s.base.Err() != nil {
		// Stopped as by a crash: leave the record for the next Start.
		return
	}
	s.mu.Lock()
	forced := ex.forced
	s.mu.Unlock()
	cancelled := ex.ctl.Cancelled()

	var o outcome
	if res != nil {
		o = outcome{status: res.Status, hasStep: true, step: res.Step, counters: res.Counters, interrupts: res.Interrupts, drain: res.DrainReason}
	}
	switch {
	case (res == nil || res.Status == pregel.RunCancelled) && cancelled:
		o.status = pregel.RunCancelled
	case (res == nil || res.Status == pregel.RunCancelled) && forced:
		o.status, o.drain = pregel.RunDrained, ShutdownReason
	case res != nil && res.Status == pregel.RunCancelled:
		// Nothing cancelled the run on purpose: leave it for the next
		// Start.
		log.Error("run stopped unexpectedly; it stays running until the next start")
		return
	case res == nil && errors.Is(err, pregel.ErrIncompatible):
		// Deployed code cannot continue the run: it stops before
		// anything ran, resumable on compatible code.
		log.Warn("run stopped: its graph changed incompatibly", "error", err)
		o.status, o.drain, o.forceDrain = pregel.RunDrained, err.Error(), true
		o.interrupts = nil
	case res == nil && errors.Is(err, pregel.ErrInvalidResume):
		// The resume value was refused: the run waits again.
		log.Warn("resume value refused; the run waits for another", "error", err)
		o.status = pregel.RunInterrupted
		o.interrupts = s.pendingInterrupts(r.ID)
	case res == nil || res.Status == pregel.RunFailed:
		o.status = pregel.RunFailed
		o.err, o.failedNode = s.publicError(log, err)
	}

	final, uerr := runs.Mutate(s.base, s.runs, r.ID, func(rec *runs.Run) error {
		if rec.Status != pregel.RunPending && rec.Status != pregel.RunRunning {
			return fmt.Errorf("record is %s: %w", rec.Status, errSkipRun)
		}
		status := o.status
		if rec.CancelRequested && status.Resumable() {
			// A cancel arrived as the run paused.
			status = pregel.RunCancelled
		}
		rec.Status = status
		if o.hasStep {
			rec.Step, rec.Counters = o.step, o.counters
		}
		rec.Interrupts = o.interrupts
		rec.Error, rec.FailedNode = o.err, o.failedNode
		rec.CancelRequested = false
		if o.drain != "" && (!rec.DrainRequested || o.forceDrain) {
			rec.DrainRequested, rec.DrainReason = true, o.drain
		}
		if ex.started || status != pregel.RunDrained {
			rec.Resume = nil
		}
		return nil
	})
	if uerr != nil {
		log.Error("record where the run stopped; it stays running until the next start", "status", o.status, "error", uerr)
		return
	}
	ev := pregel.Event{Type: pregel.EventRunFinished, RunID: final.ID, Graph: final.Graph, Time: time.Now()}
	if ex.finished != nil {
		ev = *ex.finished
	}
	ev.Step, ev.RunStatus, ev.Interrupts, ev.Error = final.Step, final.Status, final.Interrupts, final.Error
	ev.History = final.HistoryLen()
	ev.Reason = ""
	if final.DrainRequested {
		ev.Reason = final.DrainReason
	}
	s.publish(ev)
	s.stopped(s.base, final)
}

// publicError turns a run's failure into words fit for its caller, logging
// internal errors.
func (s *Scheduler) publicError(log *slog.Logger, err error) (msg, node string) {
	var ne *pregel.NodeError
	switch {
	case errors.As(err, &ne):
		return fmt.Sprintf("node %q failed after %d attempt(s): %s", ne.Node, ne.Attempts, ne.Message), ne.Node
	case errors.Is(err, pregel.ErrStepLimit), errors.Is(err, pregel.ErrWriteConflict):
		return strings.TrimPrefix(err.Error(), "pregel: "), ""
	default:
		log.Error("run failed", "error", err)
		return "internal error", ""
	}
}

// pendingInterrupts lists the interrupts of a run's step in progress that
// wait for a value.
func (s *Scheduler) pendingInterrupts(id string) []pregel.InterruptInfo {
	cp, err := s.checkpoints.Load(s.base, id, pregel.Latest)
	if err != nil {
		s.logStoreError("load checkpoint for interrupts", id, err)
		return nil
	}
	pending, err := s.checkpoints.PendingTasks(s.base, id, cp.Step+1)
	if err != nil {
		s.logStoreError("load pending tasks for interrupts", id, err)
		return nil
	}
	var out []pregel.InterruptInfo
	for _, p := range pending {
		if p.Status != pregel.NodeInterrupted {
			continue
		}
		for _, in := range p.Interrupts {
			if _, ok := p.Resume[in.ID]; !ok {
				out = append(out, in)
			}
		}
	}
	return out
}

// subscriber is one Subscribe call.
type subscriber struct {
	ch chan pregel.Event
}

// Subscribe returns the live events of a run and a function that ends the
// subscription. Subscribing before the run starts is fine; events of every
// later execution of the run (after a resume, say) arrive on the same
// channel. The run_finished event of an execution is sent once the run's
// record is updated, with the status, step and error the record shows.
//
// Slow subscribers never slow a run down: each has a buffer of 256
// events, and when it is full the oldest buffered event is dropped to make
// room, so the newest (such as run_finished) always arrive. The channel is
// closed by the returned function and by Shutdown.
//
// The runtimes' streams (the HTTP API's, A2A's, the CLI's, the
// inspector's) follow a run with a Cursor over WatchEvents and the log
// instead, which resumes by event id.
func (s *Scheduler) Subscribe(runID string) (<-chan pregel.Event, func()) {
	sub := &subscriber{ch: make(chan pregel.Event, subscriberBuffer)}
	s.subMu.Lock()
	defer s.subMu.Unlock()
	if s.closed {
		close(sub.ch)
		return sub.ch, func() {}
	}
	if s.subs[runID] == nil {
		s.subs[runID] = make(map[*subscriber]struct{})
	}
	s.subs[runID][sub] = struct{}{}
	s.markWatchedLocked(runID)
	return sub.ch, func() {
		s.subMu.Lock()
		defer s.subMu.Unlock()
		if _, ok := s.subs[runID][sub]; !ok {
			return
		}
		delete(s.subs[runID], sub)
		if len(s.subs[runID]) == 0 {
			delete(s.subs, runID)
		}
		s.leaseLocked(runID)
		close(sub.ch)
	}
}

// publish logs ev in the run's stream and sends it to the run's
// subscribers without blocking.
func (s *Scheduler) publish(ev pregel.Event) {
	s.logEvent(ev)
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for sub := range s.subs[ev.RunID] {
		for sent := false; !sent; {
			select {
			case sub.ch <- ev:
				sent = true
			default:
				select {
				case <-sub.ch: // drop the oldest
				default:
				}
			}
		}
	}
}

func (s *Scheduler) closeSubscriptions() {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	s.closed = true
	s.hub.Close()
	for id, subs := range s.subs {
		for sub := range subs {
			close(sub.ch)
		}
		delete(s.subs, id)
	}
}
