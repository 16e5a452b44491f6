package a2a

import (
	"time"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/internal/jsonin"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// handler serves one agent's A2A methods on the durable engine. Both the
// 1.0 and the 0.3 JSON-RPC bindings call it. Errors it returns are seen by
// callers as they are (the SDK sends err.Error() as the JSON-RPC message),
// so each is either an *core.Error with a message fit for the caller or a
// bare sentinel.
type handler struct {
	s *Server
	a *agent
}

var _ a2asrv.RequestHandler = (*handler)(nil)

// run returns the run behind a task id, if it is a run of this agent's
// graph.
func (h *handler) run(ctx context.Context, id core.TaskID) (runs.Run, error) {
	if id == "" {
		return runs.Run{}, core.NewError(core.ErrInvalidParams, "the task id is empty")
	}
	notFound := core.NewError(core.ErrTaskNotFound, fmt.Sprintf("task %q not found", id))
	if !runs.ValidID(string(id)) {
		return runs.Run{}, notFound
	}
	r, err := h.s.svc.Get(ctx, string(id))
	switch {
	case errors.Is(err, runs.ErrNotFound):
		return runs.Run{}, notFound
	case err != nil:
		return runs.Run{}, h.s.internal(ctx, "get run", string(id), err)
	case r.Graph != h.a.graph.Name():
		return runs.Run{}, notFound
	}
	return r, nil
}

// GetTask implements a2asrv.RequestHandler.
func (h *handler) GetTask(ctx context.Context, req *core.GetTaskRequest) (*core.Task, error) {
	if req == nil {
		return nil, core.NewError(core.ErrInvalidParams, "params are required")
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, core.NewError(core.ErrInvalidParams, "historyLength must not be negative")
	}
	r, err := h.run(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	return h.s.task(ctx, r, taskView{history: req.HistoryLength, artifacts: true})
}

// ListTasks implements a2asrv.RequestHandler: the runs of this graph,
// newest first, filtered by context id, state and update time.
func (h *handler) ListTasks(ctx context.Context, req *core.ListTasksRequest) (*core.ListTasksResponse, error) {
	if req == nil {
		req = &core.ListTasksRequest{}
	}
	size := req.PageSize
	switch {
	case size == 0:
		size = 50
	case size < 1 || size > 100:
		return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("pageSize %d must be between 1 and 100", size))
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, core.NewError(core.ErrInvalidParams, "historyLength must not be negative")
	}
	if req.ContextID != "" && !runs.ValidID(req.ContextID) {
		return &core.ListTasksResponse{Tasks: []*core.Task{}, PageSize: size}, nil
	}
	f := runs.Filter{Graph: h.a.graph.Name(), ContextID: req.ContextID, Limit: size, PageToken: req.PageToken}
	if req.Status == "UNRECOGNIZED" {
		// @a2a-js/sdk 1.3 sends the proto enum's unknown value when no
		// status is given.
		req.Status = core.TaskStateUnspecified
	}
	switch req.Status {
	case core.TaskStateUnspecified, core.TaskStateWorking:
	case core.TaskStateSubmitted:
		f.Status = pregel.RunPending
	case core.TaskStateInputRequired, core.TaskStateAuthRequired:
		f.Status = pregel.RunInterrupted
	case core.TaskStateCompleted:
		f.Status = pregel.RunCompleted
	case core.TaskStateFailed, core.TaskStateRejected:
		f.Status = pregel.RunFailed // rejected runs are failed runs marked so
	case core.TaskStateCanceled:
		f.Status = pregel.RunCancelled
	default:
		return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("status %q is not a task state", req.Status))
	}
	page, err := h.s.svc.List(ctx, f)
	switch {
	case errors.Is(err, runs.ErrInvalid) && req.PageToken != "":
		// The store's words stay in the log: they name the store.
		h.s.log.InfoContext(ctx, "a2a: list tasks: page token refused", "graph", h.a.graph.Name(), "error", err)
		return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("pageToken %q is not one this agent issued (or it has expired); list again without it", req.PageToken))
	case errors.Is(err, runs.ErrInvalid):
		return nil, core.NewError(core.ErrInvalidParams, publicMessage(err))
	case err != nil:
		return nil, h.s.internal(ctx, "list runs", "", err)
	}
	history := req.HistoryLength
	if history == nil {
		zero := 0
		history = &zero
	}
	// A run's task matches when it was updated at or after
	// statusTimestampAfter (spec: ">="), and has the state asked for
	// (a run status may give several task states).
	matches := func(r runs.Run) bool {
		if req.StatusTimestampAfter != nil && r.UpdatedAt.Before(*req.StatusTimestampAfter) {
			return false
		}
		if req.Status != core.TaskStateUnspecified {
			if state, _ := status(r); state != req.Status {
				return false
			}
		}
		return true
	}
	out := &core.ListTasksResponse{Tasks: []*core.Task{}, PageSize: size, NextPageToken: page.NextPageToken}
	budget := api.NewValueBudget() // one for the whole page
	for _, r := range page.Runs {
		if !matches(r) {
			continue
		}
		t, err := h.s.task(ctx, r, taskView{history: history, artifacts: req.IncludeArtifacts, budget: budget})
		if err != nil {
			return nil, err
		}
		out.Tasks = append(out.Tasks, t)
	}
	// totalSize counts every matching task, not the page: one more pass
	// over the listing, reading records only.
	if out.TotalSize, err = h.count(ctx, f, matches); err != nil {
		return nil, err
	}
	return out, nil
}

// count counts the runs of a listing that match.
func (h *handler) count(ctx context.Context, f runs.Filter, matches func(runs.Run) bool) (int, error) {
	f.Limit, f.PageToken = 500, ""
	n := 0
	for {
		page, err := h.s.svc.List(ctx, f)
		if err != nil {
			return 0, h.s.internal(ctx, "count runs", "", err)
		}
		for _, r := range page.Runs {
			if matches(r) {
				n++
			}
		}
		if page.NextPageToken == "" {
			return n, nil
		}
		f.PageToken = page.NextPageToken
	}
}

// CancelTask implements a2asrv.RequestHandler: it cancels the run. A
// paused run is cancelled at once; a running one is asked to stop, and the
// answer waits a little for it. Cancelling a task in a terminal state
// (canceled included: spec 1.0 §3.1.5) is TaskNotCancelable.
func (h *handler) CancelTask(ctx context.Context, req *core.CancelTaskRequest) (*core.Task, error) {
	if req == nil {
		return nil, core.NewError(core.ErrInvalidParams, "params are required")
	}
	r, err := h.run(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	r, err = h.s.svc.Cancel(ctx, r.ID)
	switch {
	case errors.Is(err, runs.ErrInvalidState):
		state, _ := status(r)
		return nil, core.NewError(core.ErrTaskNotCancelable, fmt.Sprintf("task %q is %s and cannot be canceled", r.ID, stateName(state)))
	case errors.Is(err, runs.ErrNotFound):
		return nil, core.NewError(core.ErrTaskNotFound, fmt.Sprintf("task %q not found", req.ID))
	case err != nil:
		return nil, h.s.internal(ctx, "cancel run", r.ID, err)
	}
	if !settled(r) && h.s.cancelWait > 0 {
		if r, err = h.s.wait(ctx, r.ID, h.s.cancelWait); err != nil {
			return nil, err
		}
	}
	return h.s.task(ctx, r, taskView{artifacts: true})
}

// SendMessage implements a2asrv.RequestHandler. A message without a task
// id starts a run; one with the id of an input-required (or drained) task
// resumes it. A blocking call waits until the task finishes or pauses (at
// most the blocking timeout), a non-blocking one answers at once.
func (h *handler) SendMessage(ctx context.Context, req *core.SendMessageRequest) (core.SendMessageResult, error) {
	p, err := h.prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	r, err := h.commit(ctx, p)
	if err != nil {
		return nil, err
	}
	if req.Config != nil && req.Config.PushConfig != nil && !r.Rejected {
		if _, err := h.savePushFrom(ctx, r.ID, req.Config.PushConfig, req.Message.TaskID == ""); err != nil {
			return nil, err
		}
	}
	view := taskView{artifacts: true}
	if req.Config != nil {
		view.history = req.Config.HistoryLength
	}
	if req.Config == nil || !req.Config.ReturnImmediately {
		if r, err = h.s.wait(ctx, r.ID, h.s.blockFor); err != nil {
			return nil, err
		}
	}
	return h.s.task(ctx, r, view)
}

// SendStreamingMessage implements a2asrv.RequestHandler: the task, then
// its status updates until it finishes or pauses; a completed task's
// artifact comes before its final status.
func (h *handler) SendStreamingMessage(ctx context.Context, req *core.SendMessageRequest) iter.Seq2[core.Event, error] {
	return func(yield func(core.Event, error) bool) {
		if !h.s.streaming {
			yield(nil, core.ErrUnsupportedOperation)
			return
		}
		p, err := h.prepare(ctx, req)
		if err != nil {
			yield(nil, err)
			return
		}
		// Watch before the run starts, so that no event is missed.
		if m, ok := h.s.events.(watchMarker); ok {
			p.watchedUntil = m.WatchUntil(time.Now())
		}
		w := h.s.watch(p.id)
		defer w.close()
		r, err := h.commit(ctx, p)
		if err == nil && req.Config != nil && req.Config.PushConfig != nil && !r.Rejected {
			_, err = h.savePushFrom(ctx, r.ID, req.Config.PushConfig, req.Message.TaskID == "")
		}
		if err != nil {
			yield(nil, err)
			return
		}
		h.s.stream(ctx, w, p.id, &r, yield)
	}
}

// SubscribeToTask implements a2asrv.RequestHandler: the task as it stands,
// then its updates until it finishes or pauses.
func (h *handler) SubscribeToTask(ctx context.Context, req *core.SubscribeToTaskRequest) iter.Seq2[core.Event, error] {
	return func(yield func(core.Event, error) bool) {
		if !h.s.streaming {
			yield(nil, core.ErrUnsupportedOperation)
			return
		}
		if req == nil {
			yield(nil, core.NewError(core.ErrInvalidParams, "params are required"))
			return
		}
		w := h.s.watch(string(req.ID))
		defer w.close()
		r, err := h.run(ctx, req.ID)
		if err != nil {
			yield(nil, err)
			return
		}
		if state, _ := status(r); state.Terminal() {
			// Spec 1.0 §3.1.6: subscribing to a task in a terminal state
			// is an UnsupportedOperationError.
			yield(nil, core.NewError(core.ErrUnsupportedOperation, fmt.Sprintf("task %q is %s: it has no more updates to stream; read it with GetTask (tasks/get)", r.ID, stateName(state))))
			return
		}
		h.s.stream(ctx, w, r.ID, &r, yield)
	}
}

// plan is what a message asks for: a new run (its input and context) or
// the resume of an existing one.
type plan struct {
	id        string
	resume    bool
	reject    string // why the graph cannot take the message: the task is rejected
	input     json.RawMessage
	contextID string
	thread    bool // the run starts on the thread named by contextID
	req       runs.ResumeRequest
	msg       *core.Message
	// watchedUntil marks a new run watched from its creation (a
	// streaming message, on a runtime that keeps only watched runs'
	// events): see runs.CreateRequest.WatchedUntil.
	watchedUntil time.Time
}

// prepare validates a message and decides what it does, changing nothing.
// A message without a task id starts a run, unless the graph cannot take
// its content: then its task is rejected. A message with the id of an
// input-required task answers it with its content; one with the id of a
// drained task continues it.
func (h *handler) prepare(ctx context.Context, req *core.SendMessageRequest) (plan, error) {
	if req == nil || req.Message == nil {
		return plan{}, core.NewError(core.ErrInvalidParams, "params.message is required")
	}
	msg := req.Message
	// Both are required (0.3 schema, 1.0 proto: REQUIRED).
	if msg.ID == "" {
		return plan{}, core.NewError(core.ErrInvalidParams, "params.message.messageId is required: give each message a unique id (a UUID, say)")
	}
	switch msg.Role {
	case core.MessageRoleUser, core.MessageRoleAgent:
	default:
		return plan{}, core.NewError(core.ErrInvalidParams, "params.message.role is required: \"user\" (0.3) or \"ROLE_USER\" (1.0)")
	}
	if req.Config != nil && req.Config.HistoryLength != nil && *req.Config.HistoryLength < 0 {
		return plan{}, core.NewError(core.ErrInvalidParams, "historyLength must not be negative")
	}
	if req.Config != nil && req.Config.PushConfig != nil {
		if h.s.push == nil {
			return plan{}, core.ErrPushNotificationNotSupported
		}
		if err := h.s.push.checkPush(ctx, req.Config.PushConfig); err != nil {
			return plan{}, err
		}
	}
	c, err := readParts(msg.Parts)
	if err != nil {
		return plan{}, err
	}
	if len(c.texts) > 0 && h.a.text == "" && msg.TaskID == "" {
		// Spec 1.0 §3.1.1: a media type the agent does not take is a
		// ContentTypeNotSupportedError (-32005). (Text answering a
		// question is the resume value: any graph takes it.)
		return plan{}, core.NewError(core.ErrUnsupportedContentType, fmt.Sprintf("graph %q takes no text (its card's input modes: application/json); send a data part holding a JSON object of channel values (channels: %s)", h.a.graph.Name(), strings.Join(h.a.graph.Channels(), ", ")))
	}
	if msg.TaskID != "" {
		return h.prepareResume(ctx, msg, c)
	}
	p := plan{id: pregel.NewRunID(), contextID: msg.ContextID, msg: msg, thread: h.s.threads()}
	if p.contextID == "" {
		p.contextID = core.NewContextID()
	} else if !runs.ValidID(p.contextID) {
		return plan{}, core.NewError(core.ErrInvalidParams, fmt.Sprintf("contextId %q must be 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit", p.contextID))
	}
	p.input, p.reject = h.a.input(c, string(msg.ID))
	return p, nil
}

// prepareResume checks that a message can answer or continue its task.
func (h *handler) prepareResume(ctx context.Context, msg *core.Message, c content) (plan, error) {
	r, err := h.run(ctx, msg.TaskID)
	if err != nil {
		return plan{}, err
	}
	if msg.ContextID != "" && msg.ContextID != contextOf(r) {
		return plan{}, core.NewError(core.ErrInvalidParams, fmt.Sprintf("the message's contextId %q is not the task's (%q)", msg.ContextID, contextOf(r)))
	}
	p := plan{id: r.ID, resume: true, msg: msg}
	switch r.Status {
	case pregel.RunInterrupted:
		v, err := resumeValue(c)
		if err != nil {
			return plan{}, err
		}
		if id, _ := msg.Metadata[InterruptIDKey].(string); id != "" {
			p.req.Values = map[string]json.RawMessage{id: v}
		} else {
			p.req.Value = v
		}
	case pregel.RunDrained:
	default:
		state, _ := status(r)
		won := ""
		if w := runs.LastAnswer(r); w != "" {
			// Several answers to one question: say which was applied.
			won = fmt.Sprintf(" (its last question was already answered, %s; this message was not applied)", w)
		}
		if state.Terminal() {
			// Spec 1.0 §3.1.1: a message to a task in a terminal state is
			// an UnsupportedOperationError.
			return plan{}, core.NewError(core.ErrUnsupportedOperation, fmt.Sprintf("task %q is %s and takes no more input%s; send a message without a taskId (in the same contextId) to start a new task", r.ID, stateName(state), won))
		}
		// The message is well formed; the task cannot take it now: the
		// operation is not supported in the task's state (-32004), as for
		// a task in a terminal state, not invalid params.
		return plan{}, core.NewError(core.ErrUnsupportedOperation, fmt.Sprintf("task %q is %s%s; it takes input only when it is input-required", r.ID, stateName(state), won))
	}
	return p, nil
}

// commit starts or resumes the run of a plan. Input that the graph
// cannot take, or that its own validation refuses, gives a rejected task,
// stored like any other (a failed run marked rejected: runs.Service.Reject).
func (h *handler) commit(ctx context.Context, p plan) (runs.Run, error) {
	if p.resume {
		p.req.Message = h.record(ctx, p)
		if p.msg != nil && p.msg.ID != "" {
			// Answers that come too late are told which message won.
			p.req.By = fmt.Sprintf("message %q", p.msg.ID)
		}
		r, err := h.s.svc.Resume(ctx, p.id, p.req)
		switch {
		case errors.Is(err, runs.ErrInvalidState):
			return runs.Run{}, core.NewError(core.ErrUnsupportedOperation, publicMessage(err))
		case errors.Is(err, runs.ErrInvalid):
			return runs.Run{}, core.NewError(core.ErrInvalidParams, publicMessage(err))
		case errors.Is(err, runs.ErrNotFound):
			return runs.Run{}, core.NewError(core.ErrTaskNotFound, fmt.Sprintf("task %q not found", p.id))
		case err != nil:
			return runs.Run{}, h.s.internal(ctx, "resume run", p.id, err)
		}
		return r, nil
	}
	req := runs.CreateRequest{RunID: p.id, Input: p.input, ContextID: p.contextID, Message: h.record(ctx, p), WatchedUntil: p.watchedUntil}
	reason := p.reject
	if reason == "" && p.thread {
		r, why, err := h.startOnThread(ctx, p, req)
		if err != nil || why == "" {
			return r, err
		}
		reason = why
	} else if reason == "" {
		r, _, err := h.s.svc.Create(ctx, h.a.graph.Name(), req)
		switch {
		case errors.Is(err, runs.ErrInvalid):
			reason = publicMessage(err)
		case err != nil:
			return runs.Run{}, h.s.internal(ctx, "create run", p.id, err)
		default:
			return r, nil
		}
	}
	r, err := h.s.svc.Reject(ctx, h.a.graph.Name(), req, reason)
	if err != nil {
		return runs.Run{}, h.s.internal(ctx, "store rejected run", p.id, err)
	}
	return r, nil
}

// watchMarker is an event source that keeps only watched runs' events
// (the serverless runtime's): WatchUntil is how long a stream opened at
// now marks its run watched.
type watchMarker interface {
	WatchUntil(now time.Time) time.Time
}

// startOnThread starts the run of a plan on the thread its context id
// names, creating the thread if it does not exist, with the server's
// strategy for a thread that has an active task. why, when not empty,
// says why the input is refused (the task is then rejected).
func (h *handler) startOnThread(ctx context.Context, p plan, req runs.CreateRequest) (r runs.Run, why string, err error) {
	_, err = h.s.svc.GetThread(ctx, p.contextID)
	switch {
	case errors.Is(err, runs.ErrNotFound):
		// A new conversation. Its input must fit the empty state: input
		// the graph refuses gives a rejected task and no thread.
		if _, err := h.a.graph.Start(ctx, p.id, p.input); err != nil {
			return runs.Run{}, publicMessage(fmt.Errorf("%s: %w", strings.TrimPrefix(err.Error(), "pregel: "), runs.ErrInvalid)), nil
		}
		_, _, err = h.s.svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: p.contextID})
		if err != nil && !errors.Is(err, runs.ErrConflict) { // conflict: it exists, with metadata
			return runs.Run{}, "", h.s.internal(ctx, "create thread", p.id, err)
		}
	case err != nil:
		return runs.Run{}, "", h.s.internal(ctx, "get thread", p.id, err)
	}
	strategy := h.s.strategy
	if strategy == StrategyParallel {
		strategy = runs.StrategyReject // then, if busy, a task of its own
	}
	r, _, err = h.s.svc.CreateOnThread(ctx, p.contextID, runs.ThreadRunRequest{
		Graph: h.a.graph.Name(), RunID: p.id, Input: p.input, Strategy: strategy, Message: req.Message, WatchedUntil: req.WatchedUntil,
	})
	var busy *runs.BusyError
	switch {
	case errors.As(err, &busy):
		state := h.activeState(ctx, busy)
		if h.s.strategy != StrategyParallel || state == core.TaskStateInputRequired || state == core.TaskStateAuthRequired {
			return runs.Run{}, "", h.busy(busy, state)
		}
		// Spec 1.0 §3.4.1 (and 0.3 "Life of a Task"): several tasks may
		// run at once in one context. This one starts beside the
		// working task, off the thread, from the message alone.
		r, _, err = h.s.svc.Create(ctx, h.a.graph.Name(), req)
		switch {
		case errors.Is(err, runs.ErrInvalid):
			return runs.Run{}, publicMessage(err), nil
		case err != nil:
			return runs.Run{}, "", h.s.internal(ctx, "create run beside the thread", p.id, err)
		}
		return r, "", nil
	case errors.Is(err, runs.ErrInvalid):
		return runs.Run{}, publicMessage(err), nil
	case err != nil:
		return runs.Run{}, "", h.s.internal(ctx, "create run on thread", p.id, err)
	}
	return r, "", nil
}

// activeState is the state of the task that holds a busy thread
// (working if it cannot be read).
func (h *handler) activeState(ctx context.Context, b *runs.BusyError) core.TaskState {
	state := core.TaskStateWorking
	if r, err := h.s.svc.Get(ctx, b.ActiveRun); err == nil {
		state, _ = status(r)
	}
	return state
}

// busy is the error of a message refused because its context's thread
// has an active task (strategy reject, or parallel beside a task that
// waits for input): it names the task and what to do.
func (h *handler) busy(b *runs.BusyError, state core.TaskState) error {
	what := "wait until it finishes (GetTask, SubscribeToTask) or cancel it (CancelTask)"
	switch state {
	case core.TaskStateInputRequired, core.TaskStateAuthRequired:
		what = "answer it (a message with its taskId) or cancel it (CancelTask)"
	}
	why := "this agent takes one task per context at a time"
	if h.s.strategy == StrategyParallel {
		why = "its conversation waits for that answer"
	}
	return core.NewError(core.ErrUnsupportedOperation, fmt.Sprintf(
		"context %q already has an active task, %q (%s): %s; %s, then send this message again",
		b.Thread, b.ActiveRun, stateName(state), why, what,
	)).WithDetails(map[string]any{"contextId": b.Thread, "activeTaskId": b.ActiveRun, "activeTaskState": stateName(state), "strategy": string(h.s.strategy)})
}

// record is the message of a plan as the run keeps it for the task's
// history (runs.Run.Messages): the client's message, with its task and
// context ids.
func (h *handler) record(ctx context.Context, p plan) json.RawMessage {
	if p.msg == nil {
		return nil
	}
	m := *p.msg
	m.TaskID = core.TaskID(p.id)
	if p.contextID != "" {
		m.ContextID = p.contextID
	}
	raw, err := json.Marshal(&m)
	if err != nil {
		h.s.log.WarnContext(ctx, "a2a: message not kept in the task's history", "run_id", p.id, "error", err)
		return nil
	}
	return raw
}

// GetExtendedAgentCard implements a2asrv.RequestHandler: there is no
// extended card, and the card does not declare one, so spec 1.0 §3.3.4
// says UnsupportedOperationError ("If AgentCard.capabilities.extendedAgentCard
// is false or not present, attempts to call the Get Extended Agent Card
// operation MUST return UnsupportedOperationError"). The 0.3 method has
// its own code (serveRPC).
func (h *handler) GetExtendedAgentCard(context.Context, *core.GetExtendedAgentCardRequest) (*core.AgentCard, error) {
	return nil, core.NewError(core.ErrUnsupportedOperation, "this agent has no extended agent card (its card does not declare capabilities.extendedAgentCard); read the public card at .well-known/agent-card.json")
}

// publicMessage is the message of a runs error meant for callers, without
// the sentinel's words at its end, and with JSON type errors in words for
// the caller rather than in Go's.
func publicMessage(err error) string {
	msg := jsonin.Explain(runs.Public(err))
	for _, sentinel := range []error{runs.ErrInvalid, runs.ErrInvalidState, runs.ErrConflict, runs.ErrNotFound} {
		msg = strings.TrimSuffix(msg, ": "+sentinel.Error())
	}
	return msg
}

// stateName is a task state as people write it: "input-required".
func stateName(s core.TaskState) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_")), "_", "-")
}
