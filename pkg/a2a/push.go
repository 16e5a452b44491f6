package a2a

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

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
}

// WithPushNotifications turns push notifications on: clients may set,
// get, list and delete a task's push configs (or give one with a
// message), and each change of the task's state is POSTed to every config
// of the task, authenticated as the config says. The configs are kept in
// this process's memory, and deliveries follow the runs this process can
// watch: it serves embedded deployments (`superstep dev`); the serverless
// path does not deliver yet.
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
		s.push = &pusher{
			opts:     o,
			configs:  push.NewInMemoryStore(),
			sender:   push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: o.Timeout, FailOnError: true, AllowPrivateNetworks: o.AllowPrivateNetworks}),
			watching: make(map[string]bool),
		}
	}
}

// pusher keeps push configs and delivers notifications.
type pusher struct {
	opts     PushOptions
	configs  *push.InMemoryPushConfigStore
	sender   *push.HTTPPushSender
	mu       sync.Mutex
	watching map[string]bool // task ids with a delivery loop
}

// checkPushURL refuses a config whose URL is not an absolute http(s) URL.
func checkPushURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return core.NewError(core.ErrInvalidParams, fmt.Sprintf("push config url %q must be an absolute http or https URL", raw))
	}
	return nil
}

// savePush stores a task's push config and starts delivering to it.
func (h *handler) savePush(ctx context.Context, taskID string, cfg *core.PushConfig) (*core.PushConfig, error) {
	p := h.s.push
	if p == nil {
		return nil, core.ErrPushNotificationNotSupported
	}
	if cfg == nil {
		return nil, core.NewError(core.ErrInvalidParams, "params are required: the push config (url, and optionally id, token, authentication)")
	}
	if err := checkPushURL(cfg.URL); err != nil {
		return nil, err
	}
	c := *cfg
	c.TaskID = core.TaskID(taskID)
	saved, err := p.configs.Save(ctx, c.TaskID, &c)
	if err != nil {
		return nil, h.s.internal(ctx, "save push config", taskID, err)
	}
	h.s.deliver(taskID)
	return saved, nil
}

// deliver starts the delivery loop of a task unless it runs: it watches
// the run and sends each new task state to the task's configs, until the
// task is in a terminal state or has no configs left.
func (s *Server) deliver(taskID string) {
	p := s.push
	p.mu.Lock()
	if p.watching[taskID] {
		p.mu.Unlock()
		return
	}
	p.watching[taskID] = true
	p.mu.Unlock()
	go func() {
		defer func() {
			p.mu.Lock()
			delete(p.watching, taskID)
			p.mu.Unlock()
		}()
		ctx := context.Background()
		w := s.watch(taskID)
		defer w.close()
		last := core.TaskStateUnspecified
		seen := -1 // events of the run's history handled (dropped ones included)
		for {
			r, err := s.svc.Get(ctx, taskID)
			if err != nil {
				s.log.WarnContext(ctx, "a2a: push: read task", "task_id", taskID, "error", err)
				return
			}
			if seen < 0 {
				// A new config hears of the state the task is in, then of
				// every change.
				seen = max(len(r.Events)+r.EventsDropped-1, 0)
			}
			configs, err := p.configs.List(ctx, core.TaskID(taskID))
			if err != nil || len(configs) == 0 {
				return
			}
			// Every change of state since the last look, in order, from
			// the run's history: a state that lasted less than a
			// delivery is notified too.
			for _, ev := range s.stateChanges(r, &seen) {
				if ev.Status.State == last {
					continue
				}
				last = ev.Status.State
				for _, c := range configs {
					s.send(ctx, c, ev)
				}
			}
			if last.Terminal() {
				return
			}
			if _, err := w.next(ctx); err != nil {
				return
			}
		}
	}()
}

// stateChanges returns the task states of a run's history events after
// the first *seen ones (counting dropped events), as status updates, and
// moves *seen on. The newest one is the task as it stands (with its
// status message); earlier ones carry the state and time only.
func (s *Server) stateChanges(r runs.Run, seen *int) []*core.TaskStatusUpdateEvent {
	total := len(r.Events) + r.EventsDropped
	if total <= *seen {
		return nil
	}
	start := *seen - r.EventsDropped
	if *seen > 0 && start < 1 {
		start = 1 // dropped events are gone: go on from the oldest kept after the first
	}
	start = max(start, 0)
	*seen = total
	var out []*core.TaskStatusUpdateEvent
	for i := start; i < len(r.Events); i++ {
		ev := r.Events[i]
		if i == len(r.Events)-1 {
			out = append(out, s.statusUpdate(r))
			break
		}
		at := ev.At
		out = append(out, &core.TaskStatusUpdateEvent{
			TaskID:    core.TaskID(r.ID),
			ContextID: contextOf(r),
			Status:    core.TaskStatus{State: eventState(ev), Timestamp: &at},
		})
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

// send delivers one notification, retrying with backoff.
func (s *Server) send(ctx context.Context, c *core.PushConfig, ev core.Event) {
	p := s.push
	wait := p.opts.Backoff
	var err error
	for attempt := 1; attempt <= p.opts.Attempts; attempt++ {
		if err = p.sender.SendPush(ctx, c, ev); err == nil {
			return
		}
		if attempt < p.opts.Attempts {
			time.Sleep(wait)
			wait *= 2
		}
	}
	s.log.WarnContext(ctx, "a2a: push notification not delivered", "task_id", c.TaskID, "config_id", c.ID, "attempts", p.opts.Attempts, "error", err)
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
	c, err := h.s.push.configs.Get(ctx, core.TaskID(r.ID), req.ID)
	if errors.Is(err, push.ErrPushConfigNotFound) {
		return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("task %q has no push config %q", r.ID, req.ID))
	}
	if err != nil {
		return nil, h.s.internal(ctx, "get push config", r.ID, err)
	}
	return c, nil
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
	cs, err := h.s.push.configs.List(ctx, core.TaskID(r.ID))
	if err != nil {
		return nil, h.s.internal(ctx, "list push configs", r.ID, err)
	}
	if cs == nil {
		cs = []*core.PushConfig{}
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
	if err := h.s.push.configs.Delete(ctx, core.TaskID(r.ID), req.ID); err != nil {
		return h.s.internal(ctx, "delete push config", r.ID, err)
	}
	return nil
}
