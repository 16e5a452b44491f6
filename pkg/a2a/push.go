package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// pushRunLister is a [runs.PushStore] that lists the runs with configs; a server
// delivering itself resumes their deliveries (ResumePush).
type pushRunLister interface {
	PushRuns(ctx context.Context) ([]string, error)
}

// PushOptions configures push notifications (WithPushNotifications).
type PushOptions struct {
	// AllowPrivateNetworks lets notifications go to loopback, private and
	// link-local addresses. Off, the sender refuses them (checking the
	// resolved address of every connection), so that a client cannot
	// make the server call its own network (SSRF).
	AllowPrivateNetworks bool
	// Attempts bounds the deliveries of one notification (default 4).
	Attempts int
	// Backoff is the wait before the first retry, doubled before each
	// next one (default 1s).
	Backoff time.Duration
	// Timeout bounds one delivery (default 10s).
	Timeout time.Duration
	// Store keeps the configs and their delivery cursors (default: in
	// this process's memory, lost on exit).
	Store runs.PushStore
	// DeliverElsewhere: this server keeps configs but sends nothing;
	// another process calls DeliverPush when a task changes state (the
	// serverless sweep function, fed by the table's stream).
	DeliverElsewhere bool
}

// WithPushNotifications turns push notifications on: clients may set,
// get, list and delete a task's push configs (or give one with a
// message), and each change of the task's state is POSTed once to every
// config of the task, authenticated as the config says, in the order of
// the run's history. Configs and their cursors are kept in o.Store.
// Unless o.DeliverElsewhere, this server delivers: it follows the runs it
// has configs for (call ResumePush at start to pick up those of an
// earlier process).
func WithPushNotifications(o PushOptions) Option {
	return func(s *Server) {
		if o.Attempts <= 0 {
			o.Attempts = 4
		}
		if o.Backoff <= 0 {
			o.Backoff = time.Second
		}
		if o.Timeout <= 0 {
			o.Timeout = 10 * time.Second
		}
		if o.Store == nil {
			o.Store = runs.NewMemoryPushStore()
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.push = &pusher{
			ctx:      ctx,
			stop:     cancel,
			opts:     o,
			configs:  o.Store,
			sender:   push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: o.Timeout, FailOnError: true, AllowPrivateNetworks: o.AllowPrivateNetworks}),
			legacy:   newLegacySender(o.Timeout, o.AllowPrivateNetworks),
			watching: make(map[string]bool),
		}
	}
}

// maxPushFailures is how many store errors in a row stop a delivery
// loop.
const maxPushFailures = 5

// Bounds of a push config, so that every store keeps it in one item
// (DynamoDB's sort keys are at most 1 KB).
const (
	maxPushID     = 256
	maxPushConfig = 16 << 10
)

// pusher keeps push configs and delivers notifications.
type pusher struct {
	// ctx ends the delivery loops (stop, StopPush); loops counts them.
	ctx      context.Context
	stop     context.CancelFunc
	loops    sync.WaitGroup
	opts     PushOptions
	configs  runs.PushStore
	sender   *push.HTTPPushSender
	legacy   *legacySender // configs set in 0.3 calls
	mu       sync.Mutex
	watching map[string]bool // task ids with a delivery loop
}

// checkPush refuses, when it is set, a push config this server could not
// honour: a URL that is not an absolute http(s) URL, or that the sender
// would refuse (a loopback, private or link-local address, unless
// PushOptions.AllowPrivateNetworks), and authentication it cannot send
// (the sender sends Bearer and Basic credentials only; a 0.3 config
// with credentials but no schemes would go out without them).
func (p *pusher) checkPush(ctx context.Context, c *core.PushConfig) error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return core.NewError(core.ErrInvalidParams, "the push config's url must be an absolute http or https URL")
	}
	if !p.opts.AllowPrivateNetworks {
		if why := privateHost(ctx, u.Hostname()); why != "" {
			return core.NewError(core.ErrInvalidParams, fmt.Sprintf("the push config's url names %s, to which this server sends no notifications (it does not call its own network); use a public address", why))
		}
	}
	if a := c.Auth; a != nil {
		switch strings.ToLower(a.Scheme) {
		case "bearer", "basic":
		case "":
			return core.NewError(core.ErrInvalidParams, `the push config's authentication names no scheme; this server sends "Bearer" or "Basic" credentials: give one of them (0.3: "schemes": ["Bearer"]), or leave authentication out`)
		default:
			return core.NewError(core.ErrInvalidParams, fmt.Sprintf(`the push config's authentication scheme %q is not one this server can send; it sends "Bearer" or "Basic" credentials (0.3: the first of "schemes")`, a.Scheme))
		}
		if a.Credentials == "" {
			return core.NewError(core.ErrInvalidParams, fmt.Sprintf("the push config's authentication has scheme %q but no credentials; give the credentials to send, or leave authentication out", a.Scheme))
		}
	}
	return nil
}

// privateHost says why host is one the sender refuses ("the loopback
// address 127.0.0.1"), or "" if it is not: a loopback, private,
// link-local, unspecified or multicast address, or a name that resolves
// only to such addresses. A name that does not resolve now is let
// through: the sender checks every connection anyway.
func privateHost(ctx context.Context, host string) string {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Sprintf("the loopback name %q", host)
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if blockedAddr(ip) {
			return fmt.Sprintf("the address %s (loopback, private or link-local)", ip)
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h)
	if err != nil || len(addrs) == 0 {
		return ""
	}
	for _, a := range addrs {
		if !blockedAddr(a) {
			return ""
		}
	}
	return fmt.Sprintf("%q, which resolves only to loopback, private or link-local addresses", host)
}

// blockedAddr reports whether the push sender refuses ip.
func blockedAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast()
}

// redacted is a config as answers show it: without its secrets (the
// token and the authentication credentials), which only the receiver
// needs; the scheme stays.
func redacted(c *core.PushConfig) *core.PushConfig {
	out := *c
	out.Token = ""
	if c.Auth != nil {
		out.Auth = &core.PushAuthInfo{Scheme: c.Auth.Scheme}
	}
	return &out
}

// decodePush reads a stored config (pushVersion says the version it was
// set in).
func decodePush(c runs.PushConfig) (*core.PushConfig, error) {
	var out core.PushConfig
	if err := json.Unmarshal(c.Config, &out); err != nil {
		return nil, fmt.Errorf("push config %q: %w", c.ID, err)
	}
	out.ID, out.TaskID = c.ID, core.TaskID(c.RunID)
	return &out, nil
}

// savePush stores a task's push config and, unless deliveries are made
// elsewhere, starts delivering to it. The config first hears of the state
// the task is in, then of every change.
func (h *handler) savePush(ctx context.Context, taskID string, cfg *core.PushConfig) (*core.PushConfig, error) {
	return h.savePushFrom(ctx, taskID, cfg, false)
}

// savePushFrom is savePush; fromStart, for a config given with the
// message that created the task, has it hear of every state from
// submitted on, however far the run got before the config was stored.
func (h *handler) savePushFrom(ctx context.Context, taskID string, cfg *core.PushConfig, fromStart bool) (*core.PushConfig, error) {
	p := h.s.push
	if p == nil {
		return nil, core.ErrPushNotificationNotSupported
	}
	if cfg == nil {
		return nil, core.NewError(core.ErrInvalidParams, "params are required: the push config (url, and optionally id, token, authentication)")
	}
	if a := cfg.Auth; a != nil && a.Scheme == "" && a.Credentials == "" {
		// An empty authentication message ("authentication": {}, as
		// proto3 clients write an unset one): nothing to send.
		c := *cfg
		c.Auth = nil
		cfg = &c
	}
	if err := p.checkPush(ctx, cfg); err != nil {
		return nil, err
	}
	c := *cfg
	c.TaskID = core.TaskID(taskID)
	if c.ID == "" {
		// The spec gives a config an id "to support multiple notification
		// callbacks" (0.3 PushNotificationConfig.id); without one it is
		// the task's default config, which get finds without an id and a
		// later id-less config replaces.
		c.ID = DefaultPushConfigID
	}
	if len(c.ID) > maxPushID || !utf8.ValidString(c.ID) {
		return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("the push config's id must be UTF-8 of at most %d bytes", maxPushID))
	}
	raw, err := encodePush(&c, isLegacy(ctx))
	if err != nil {
		return nil, core.NewError(core.ErrInvalidParams, "the push config is not valid JSON")
	}
	if len(raw) > maxPushConfig {
		return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("the push config is %d bytes: at most %d (url, token and credentials together)", len(raw), maxPushConfig))
	}
	r, err := h.s.svc.Runs.GetRun(ctx, taskID)
	if err != nil {
		return nil, h.s.internal(ctx, "save push config: get run", taskID, err)
	}
	rec := runs.PushConfig{RunID: taskID, ID: c.ID, Config: raw, Seen: max(len(r.Events)+r.EventsDropped-1, 0), CreatedAt: time.Now().UTC()}
	if fromStart {
		rec.Seen = 0
	}
	if err := p.configs.PutPushConfig(ctx, rec); err != nil {
		return nil, h.s.internal(ctx, "save push config", taskID, err)
	}
	if !p.opts.DeliverElsewhere {
		h.s.deliver(taskID)
	}
	return redacted(&c), nil
}

// DefaultPushConfigID is the id of a push config given without one: the
// task's default config, the one a get without a config id returns.
const DefaultPushConfigID = "default"

// ResumePush starts the delivery loops of the tasks with push configs in
// the store, when the store lists them (runs.MemoryPushStore, SQLite):
// a server that restarts goes on from each config's cursor. It does
// nothing without push notifications or when deliveries are made
// elsewhere.
func (s *Server) ResumePush(ctx context.Context) error {
	p := s.push
	if p == nil || p.opts.DeliverElsewhere {
		return nil
	}
	l, ok := p.configs.(pushRunLister)
	if !ok {
		return nil
	}
	ids, err := l.PushRuns(ctx)
	if err != nil {
		return fmt.Errorf("a2a: resume push deliveries: %w", err)
	}
	for _, id := range ids {
		s.deliver(id)
	}
	return nil
}

// StopPush stops this server's push delivery loops and waits until they
// have returned, or until ctx ends. Call it when the server stops, before
// the push store is closed: a loop still running would then fail on the
// closed store. Deliveries not made are made by the next process
// (ResumePush), from each config's cursor.
func (s *Server) StopPush(ctx context.Context) error {
	p := s.push
	if p == nil {
		return nil
	}
	p.mu.Lock()
	p.stop()
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.loops.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("a2a: stop push deliveries: %w", ctx.Err())
	}
}

// deliver starts the delivery loop of a task unless it runs: it watches
// the run and delivers each new task state (DeliverPush), until the task
// is in a terminal state and delivered, or has no configs left.
func (s *Server) deliver(taskID string) {
	p := s.push
	p.mu.Lock()
	if p.watching[taskID] {
		p.mu.Unlock()
		return
	}
	if p.ctx.Err() != nil {
		p.mu.Unlock()
		return // stopped (StopPush): the store may be closed
	}
	p.watching[taskID] = true
	p.loops.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.loops.Done()
		defer func() {
			p.mu.Lock()
			delete(p.watching, taskID)
			p.mu.Unlock()
		}()
		ctx := p.ctx
		w := s.watch(taskID)
		defer w.close()
		failures := 0
		for {
			done, err := s.deliverPush(ctx, taskID)
			if ctx.Err() != nil {
				return // stopped: the next process goes on from the cursors
			}
			switch {
			case err != nil:
				// A store error: try again at the next change or poll,
				// a few times in a row at most.
				if failures++; failures >= maxPushFailures {
					s.log.WarnContext(ctx, "a2a: push deliveries stopped", "task_id", taskID, "error", err)
					return
				}
				s.log.WarnContext(ctx, "a2a: push deliveries: will try again", "task_id", taskID, "error", err)
			case done:
				return
			default:
				failures = 0
			}
			if _, err := w.next(ctx); err != nil {
				return
			}
		}
	}()
}

// DeliverPush sends a task's push configs the changes of its state they
// have not been sent, in order, and moves each config's cursor on: once
// per change, whichever process calls it, however often. A delivery that
// fails is retried with backoff, then given up (logged). The error is
// for reading or writing the stores only (the caller may retry): a task
// that does not exist, or has no configs, is not an error. The
// serverless sweep function calls it for each run whose record changes
// status; a server that delivers itself calls it as its runs change.
func (s *Server) DeliverPush(ctx context.Context, taskID string) error {
	if s.push == nil {
		return nil
	}
	_, err := s.deliverPush(ctx, taskID)
	return err
}

// deliverPush is DeliverPush; done reports that nothing more will be
// delivered (the task is terminal and every config caught up, or it has
// no configs, or no run).
func (s *Server) deliverPush(ctx context.Context, taskID string) (done bool, err error) {
	p := s.push
	configs, err := p.configs.ListPushConfigs(ctx, taskID)
	if err != nil {
		return false, fmt.Errorf("list push configs: %w", err)
	}
	if len(configs) == 0 {
		return true, nil
	}
	// The record alone (not Service.Get, which also reads the newest
	// checkpoint of a running run for its step and usage): a change of
	// state is a write of the record, with its step.
	r, err := s.svc.Runs.GetRun(ctx, taskID)
	if errors.Is(err, runs.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read task: %w", err)
	}
	for _, rec := range configs {
		c, err := decodePush(rec)
		if err != nil {
			s.log.ErrorContext(ctx, "a2a: push config unreadable; skipped", "task_id", taskID, "config_id", rec.ID, "error", err)
			continue
		}
		legacy := pushVersion(rec.Config) == "0.3"
		seen, stored, last := rec.Seen, rec.Seen, core.TaskState(rec.Last)
		for _, ch := range s.stateChanges(r, rec.Seen) {
			seen = ch.seen
			if ch.ev.Status.State == last {
				continue
			}
			last = ch.ev.Status.State
			if legacy {
				s.sendTask(ctx, c, r, ch.ev)
			} else {
				s.send(ctx, c, ch.ev)
			}
			// The cursor moves after each notification: a crash
			// repeats at most the one in flight.
			if err := p.configs.AdvancePushConfig(ctx, taskID, rec.ID, seen, string(last)); err != nil && !errors.Is(err, runs.ErrNotFound) {
				return false, fmt.Errorf("advance push config: %w", err)
			}
			stored = seen
		}
		if seen > stored {
			// Events that changed no state: move past them.
			if err := p.configs.AdvancePushConfig(ctx, taskID, rec.ID, seen, string(last)); err != nil && !errors.Is(err, runs.ErrNotFound) {
				return false, fmt.Errorf("advance push config: %w", err)
			}
		}
	}
	state, _ := status(r)
	return state.Terminal(), nil
}

// stateChange is a task state to notify, and the delivery cursor once
// it is delivered (the events of the run's history it accounts for).
type stateChange struct {
	ev   *core.TaskStatusUpdateEvent
	seen int
}

// stateChanges returns the task states of a run's history events after
// the first seen ones (counting dropped events), as status updates. The
// newest one is the task as it stands (with its status message); earlier
// ones carry the state and time only.
func (s *Server) stateChanges(r runs.Run, seen int) []stateChange {
	total := len(r.Events) + r.EventsDropped
	if total <= seen {
		return nil
	}
	start := seen - r.EventsDropped
	if seen > 0 && start < 1 {
		start = 1 // dropped events are gone: go on from the oldest kept after the first
	}
	start = max(start, 0)
	var out []stateChange
	for i := start; i < len(r.Events); i++ {
		pos := i + 1 // the cursor after event i: the first event is never dropped
		if i > 0 {
			pos += r.EventsDropped
		}
		ev := r.Events[i]
		if i == len(r.Events)-1 {
			out = append(out, stateChange{s.statusUpdate(r), pos})
			break
		}
		at := ev.At
		out = append(out, stateChange{&core.TaskStatusUpdateEvent{
			TaskID:    core.TaskID(r.ID),
			ContextID: contextOf(r),
			Status:    core.TaskStatus{State: eventState(ev), Timestamp: &at},
		}, pos})
	}
	return out
}

// eventState is the task state after a history event of its run.
func eventState(ev runs.Event) core.TaskState {
	switch ev.Type {
	case runs.EventCreated:
		return core.TaskStateSubmitted
	case runs.EventInterrupted:
		return core.TaskStateInputRequired
	}
	switch ev.Status {
	case pregel.RunCompleted:
		return core.TaskStateCompleted
	case pregel.RunFailed:
		return core.TaskStateFailed
	case pregel.RunCancelled:
		return core.TaskStateCanceled
	case pregel.RunInterrupted:
		return core.TaskStateInputRequired
	}
	return core.TaskStateWorking
}

// send delivers one notification, retrying with backoff. Neither the
// config's secrets nor its URL (which may carry some) are logged: the
// task, the config id and the receiver's host are.
func (s *Server) send(ctx context.Context, c *core.PushConfig, ev core.Event) {
	p := s.push
	wait := p.opts.Backoff
	var err error
	for attempt := 1; attempt <= p.opts.Attempts; attempt++ {
		if err = p.sender.SendPush(ctx, c, ev); err == nil {
			return
		}
		if attempt < p.opts.Attempts {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				attempt = p.opts.Attempts
			case <-t.C:
			}
			wait *= 2
		}
	}
	s.log.WarnContext(ctx, "a2a: push notification not delivered", "task_id", c.TaskID, "config_id", c.ID, "host", hostOf(c.URL), "attempts", p.opts.Attempts, "error", sendError(err))
}

// sendTask delivers one notification to a config set in a 0.3 call: the
// task, in the state of ev, retrying with backoff as send does.
func (s *Server) sendTask(ctx context.Context, c *core.PushConfig, r runs.Run, ev *core.TaskStatusUpdateEvent) {
	zero := 0
	task, err := s.task(ctx, r, taskView{history: &zero})
	if err != nil {
		s.log.WarnContext(ctx, "a2a: push notification not delivered: build the task", "task_id", c.TaskID, "config_id", c.ID, "error", err)
		return
	}
	task.Status = ev.Status
	p := s.push
	wait := p.opts.Backoff
	for attempt := 1; attempt <= p.opts.Attempts; attempt++ {
		if err = p.legacy.send(ctx, c, task); err == nil {
			return
		}
		if attempt < p.opts.Attempts {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				attempt = p.opts.Attempts
			case <-t.C:
			}
			wait *= 2
		}
	}
	s.log.WarnContext(ctx, "a2a: push notification not delivered", "task_id", c.TaskID, "config_id", c.ID, "host", hostOf(c.URL), "attempts", p.opts.Attempts, "version", "0.3", "error", sendError(err))
}

// hostOf is the host of a receiver's URL.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// sendError is a delivery error without the URL: the transport's cause,
// or the answer's status.
func sendError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// CreateTaskPushConfig implements a2asrv.RequestHandler.
func (h *handler) CreateTaskPushConfig(ctx context.Context, cfg *core.PushConfig) (*core.PushConfig, error) {
	if h.s.push == nil {
		return nil, core.ErrPushNotificationNotSupported
	}
	if cfg == nil {
		return nil, core.NewError(core.ErrInvalidParams, "params are required")
	}
	r, err := h.run(ctx, cfg.TaskID)
	if err != nil {
		return nil, err
	}
	if state, _ := status(r); state.Terminal() {
		return nil, core.NewError(core.ErrUnsupportedOperation, fmt.Sprintf("task %q is %s: it will not change any more", r.ID, stateName(state)))
	}
	return h.savePush(ctx, r.ID, cfg)
}

// GetTaskPushConfig implements a2asrv.RequestHandler.
func (h *handler) GetTaskPushConfig(ctx context.Context, req *core.GetTaskPushConfigRequest) (*core.PushConfig, error) {
	if h.s.push == nil {
		return nil, core.ErrPushNotificationNotSupported
	}
	if req == nil {
		return nil, core.NewError(core.ErrInvalidParams, "params are required")
	}
	r, err := h.run(ctx, req.TaskID)
	if err != nil {
		return nil, err
	}
	id := req.ID
	if id == "" {
		id = DefaultPushConfigID
	}
	rec, err := h.s.push.configs.GetPushConfig(ctx, r.ID, id)
	if errors.Is(err, runs.ErrNotFound) {
		return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("task %q has no push config %q", r.ID, id))
	}
	if err != nil {
		return nil, h.s.internal(ctx, "get push config", r.ID, err)
	}
	c, err := decodePush(rec)
	if err != nil {
		return nil, h.s.internal(ctx, "get push config", r.ID, err)
	}
	return redacted(c), nil
}

// ListTaskPushConfigs implements a2asrv.RequestHandler.
func (h *handler) ListTaskPushConfigs(ctx context.Context, req *core.ListTaskPushConfigRequest) (*core.ListTaskPushConfigResponse, error) {
	if h.s.push == nil {
		return nil, core.ErrPushNotificationNotSupported
	}
	if req == nil {
		return nil, core.NewError(core.ErrInvalidParams, "params are required")
	}
	r, err := h.run(ctx, req.TaskID)
	if err != nil {
		return nil, err
	}
	recs, err := h.s.push.configs.ListPushConfigs(ctx, r.ID)
	if err != nil {
		return nil, h.s.internal(ctx, "list push configs", r.ID, err)
	}
	cs := []*core.PushConfig{}
	for _, rec := range recs {
		c, err := decodePush(rec)
		if err != nil {
			return nil, h.s.internal(ctx, "list push configs", r.ID, err)
		}
		cs = append(cs, redacted(c))
	}
	return &core.ListTaskPushConfigResponse{Configs: cs}, nil
}

// DeleteTaskPushConfig implements a2asrv.RequestHandler.
func (h *handler) DeleteTaskPushConfig(ctx context.Context, req *core.DeleteTaskPushConfigRequest) error {
	if h.s.push == nil {
		return core.ErrPushNotificationNotSupported
	}
	if req == nil {
		return core.NewError(core.ErrInvalidParams, "params are required")
	}
	r, err := h.run(ctx, req.TaskID)
	if err != nil {
		return err
	}
	if err := h.s.push.configs.DeletePushConfig(ctx, r.ID, req.ID); err != nil {
		return h.s.internal(ctx, "delete push config", r.ID, err)
	}
	return nil
}
