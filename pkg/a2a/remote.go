package a2a

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/superstep/superstep/pkg/pregel"
)

// Aliases of the A2A types a remote-agent node's mapping functions use, so
// that graphs need not import the SDK under another name.
type (
	// Message is an A2A message.
	Message = core.Message
	// Part is one part of a message or artifact.
	Part = core.Part
	// Task is an A2A task.
	Task = core.Task
)

// TextMessage returns a user message with one text part.
func TextMessage(text string) *Message {
	return core.NewMessage(core.MessageRoleUser, core.NewTextPart(text))
}

// DataMessage returns a user message with one data part holding v, which
// must encode as JSON.
func DataMessage(v any) (*Message, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("a2a: encode data part: %w", err)
	}
	d, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("a2a: encode data part: %w", err)
	}
	return core.NewMessage(core.MessageRoleUser, core.NewDataPart(d)), nil
}

// Defaults of remote-agent nodes.
const (
	// DefaultClientTimeout bounds each call to a remote agent.
	DefaultClientTimeout = 60 * time.Second
	// DefaultRemotePoll is how often a remote task that is still working
	// after a blocking send is read again.
	DefaultRemotePoll = 500 * time.Millisecond
	// maxConversations bounds the remote tasks a node remembers.
	maxConversations = 4096
)

// RemoteResult is what a remote agent answered, when it answered without
// asking for more.
type RemoteResult struct {
	// Task is the remote task, completed; nil when the agent answered
	// with a message instead of a task.
	Task *Task
	// Message is the agent's answer when it gave no task, else the
	// completed task's status message (if any).
	Message *Message
}

// Parts returns the parts of the answer: the task's artifacts' parts in
// order, else the message's.
func (r *RemoteResult) Parts() []*Part {
	var out []*Part
	if r.Task != nil {
		for _, a := range r.Task.Artifacts {
			if a != nil {
				out = append(out, a.Parts...)
			}
		}
	}
	if len(out) == 0 && r.Message != nil {
		out = append(out, r.Message.Parts...)
	}
	return out
}

// Text returns the text parts of the answer, joined by newlines.
func (r *RemoteResult) Text() string {
	var texts []string
	for _, p := range r.Parts() {
		if p == nil {
			continue
		}
		if t, ok := p.Content.(core.Text); ok {
			texts = append(texts, string(t))
		}
	}
	return strings.Join(texts, "\n")
}

// Data decodes the first data part of the answer into v. It fails when
// the answer has no data part.
func (r *RemoteResult) Data(v any) error {
	for _, p := range r.Parts() {
		if p == nil {
			continue
		}
		if d, ok := p.Content.(core.Data); ok {
			raw, err := json.Marshal(d.Value)
			if err != nil {
				return fmt.Errorf("a2a: remote data part: %w", err)
			}
			if err := json.Unmarshal(raw, v); err != nil {
				return fmt.Errorf("a2a: remote data part: %w", err)
			}
			return nil
		}
	}
	return errors.New("a2a: the remote answer has no data part")
}

// ErrRemoteTask is wrapped by the errors of remote tasks that failed, were
// canceled or were rejected.
var ErrRemoteTask = errors.New("remote task did not complete")

// RemoteError reports a remote task that failed, was canceled or was
// rejected. It wraps ErrRemoteTask.
type RemoteError struct {
	Agent  string
	TaskID string
	State  core.TaskState
	// Message is the text of the remote task's status message.
	Message string
}

// Error reports the remote agent's state and message.
func (e *RemoteError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("remote agent %q: task %s %s: %s", e.Agent, e.TaskID, stateName(e.State), msg)
}

// Unwrap makes errors.Is(err, ErrRemoteTask) true.
func (e *RemoteError) Unwrap() error { return ErrRemoteTask }

// RemoteOption configures a remote-agent node.
type RemoteOption func(*remoteConfig)

type remoteConfig struct {
	timeout time.Duration
	poll    time.Duration
	client  *http.Client
	headers http.Header
}

// ClientTimeout bounds each call to the remote agent (default
// DefaultClientTimeout); the node's own pregel.WithTimeout bounds the
// whole execution, and pregel.WithRetry retries it.
func ClientTimeout(d time.Duration) RemoteOption { return func(c *remoteConfig) { c.timeout = d } }

// HTTPClient sets the HTTP client used for the card and the calls.
func HTTPClient(h *http.Client) RemoteOption { return func(c *remoteConfig) { c.client = h } }

// Header adds a header to every request to the remote agent, such as
// Authorization.
func Header(name, value string) RemoteOption {
	return func(c *remoteConfig) { c.headers.Add(name, value) }
}

// RemotePollInterval sets how often a remote task still working after a
// blocking send is read again (default DefaultRemotePoll).
func RemotePollInterval(d time.Duration) RemoteOption { return func(c *remoteConfig) { c.poll = d } }

// RemoteNode is a pregel node that calls a remote A2A agent. Create it
// with [RemoteAgent]; it is safe for concurrent use by many runs.
type RemoteNode[S any] struct {
	cardURL string
	request func(ctx context.Context, state S) (*Message, error)
	result  func(ctx context.Context, state S, res *RemoteResult) (S, error)
	cfg     remoteConfig

	mu    sync.Mutex
	conn  *remoteConn
	convs map[string]conversation
	order []string
}

var (
	_ pregel.Node[struct{}] = (*RemoteNode[struct{}])(nil)
	_ pregel.Describer      = (*RemoteNode[struct{}])(nil)
)

// remoteConn is a client for the remote agent, made from its card.
type remoteConn struct {
	card   *core.AgentCard
	client *a2aclient.Client
}

// conversation is a remote task waiting for an answer; the node's next
// execution for the same run and task answers it.
type conversation struct {
	taskID    core.TaskID
	contextID string
}

// RemoteAgent returns a node that calls the A2A agent whose card is at
// cardURL (the card's own URL, or the agent's base URL to which
// /.well-known/agent-card.json is added). The client speaks A2A 1.0 or
// 0.3, as the card offers.
//
// request builds the message sent from the state (nil: the state as one
// data part); result turns the agent's answer into the node's writes (nil:
// no writes). The remote task then maps back:
//
//   - completed (or a plain message answer): result is called;
//   - failed, canceled, rejected: the node fails with a *RemoteError
//     carrying the remote message (pregel.WithRetry applies);
//   - input-required, auth-required: the run is interrupted with the
//     remote question as payload ({"question", "remote_agent",
//     "remote_task_id", "remote_context_id", "remote_state", and
//     "auth_required": true for auth-required}); resuming the run sends the
//     resume value to the remote task (a JSON string as a text part, any
//     other value as a data part) and continues.
//
// The answer goes to the remote task that asked: the one this process
// remembers, or else (another process, another Lambda) the one waiting in
// the node's own context, which the node finds with ListTasks (A2A 1.0).
// Unless request sets a context id, each pregel task's first message gets
// one of its own for this. When the task cannot be found (an A2A 0.3
// agent), the conversation is replayed: the first message is sent again
// and the recorded answers are given in order, which suits agents that ask
// the same questions for the same input.
func RemoteAgent[S any](cardURL string, request func(ctx context.Context, state S) (*Message, error), result func(ctx context.Context, state S, res *RemoteResult) (S, error), opts ...RemoteOption) *RemoteNode[S] {
	n := &RemoteNode[S]{
		cardURL: cardURL,
		request: request,
		result:  result,
		cfg:     remoteConfig{timeout: DefaultClientTimeout, poll: DefaultRemotePoll, headers: http.Header{}},
		convs:   make(map[string]conversation),
	}
	for _, o := range opts {
		o(&n.cfg)
	}
	base := n.cfg.client
	if base == nil {
		base = &http.Client{}
	}
	if len(n.cfg.headers) > 0 {
		h := *base
		rt := h.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		h.Transport = headerTransport{base: rt, headers: n.cfg.headers}
		base = &h
	}
	n.cfg.client = base
	if n.cfg.timeout <= 0 {
		n.cfg.timeout = DefaultClientTimeout
	}
	if n.cfg.poll <= 0 {
		n.cfg.poll = DefaultRemotePoll
	}
	return n
}

// Describe implements pregel.Describer.
func (n *RemoteNode[S]) Describe() pregel.NodeInfo {
	return pregel.NodeInfo{
		Description: "calls the A2A agent at " + n.cardURL,
		Metadata:    map[string]string{"a2a.card_url": n.cardURL},
	}
}

// Execute implements pregel.Node.
func (n *RemoteNode[S]) Execute(ctx context.Context, state S) (S, error) {
	var zero S
	conn, err := n.connect(ctx)
	if err != nil {
		return zero, err
	}
	key := ""
	if info, ok := pregel.TaskFrom(ctx); ok {
		key = info.RunID + "/" + info.TaskID
	}
	// The answers this task was given so far, one per question, and the
	// interrupt to return if the remote agent asks again.
	given, next, cannotAsk := answers(ctx)
	first, err := n.message(ctx, state, key)
	if err != nil {
		return zero, err
	}
	replay := 0 // answers to give again, in order, to a new remote task
	var res core.SendMessageResult
	if len(given) > 0 {
		// Resumed: the last answer is for the question a remote task
		// waits on. Continue that task if it can be found, else replay
		// the conversation with a new one.
		if conv, ok := n.findConversation(ctx, conn, key, first.ContextID); ok {
			res, err = n.send(ctx, conn, answerMessage(conv.taskID, conv.contextID, given[len(given)-1]))
		} else {
			replay = len(given)
			res, err = n.send(ctx, conn, first)
		}
	} else {
		res, err = n.send(ctx, conn, first)
	}
	if err != nil {
		return zero, err
	}
	for i := 0; ; {
		task, ok := res.(*core.Task)
		if !ok {
			m, _ := res.(*core.Message)
			return n.finish(ctx, state, &RemoteResult{Message: m})
		}
		if task, err = n.settle(ctx, conn, task); err != nil {
			return zero, err
		}
		switch task.Status.State {
		case core.TaskStateCompleted:
			return n.finish(ctx, state, &RemoteResult{Task: task, Message: task.Status.Message})
		case core.TaskStateInputRequired, core.TaskStateAuthRequired:
			if i < replay {
				res, err = n.send(ctx, conn, answerMessage(task.ID, task.ContextID, given[i]))
				if err != nil {
					return zero, err
				}
				i++
				continue
			}
			if next == nil {
				return zero, fmt.Errorf("a2a: %q asks for input but the node cannot interrupt the run: %w", conn.card.Name, cannotAsk)
			}
			raw, err := json.Marshal(questionPayload(conn.card, task))
			if err != nil {
				return zero, fmt.Errorf("a2a: encode the question of %q: %w", conn.card.Name, err)
			}
			next.Interrupt.Value = raw
			n.keepConversation(key, conversation{taskID: task.ID, contextID: task.ContextID})
			return zero, next
		default:
			return zero, &RemoteError{Agent: conn.card.Name, TaskID: string(task.ID), State: task.Status.State, Message: messageText(task.Status.Message)}
		}
	}
}

// answers returns the resume values of the executing task's interrupts,
// in order, and the interrupt that comes after them: the one to return if
// the remote agent asks again. Outside a pregel task there is none, and
// err says why.
func answers(ctx context.Context) (given []json.RawMessage, next *pregel.InterruptError, err error) {
	for {
		v, err := pregel.Interrupt[json.RawMessage](ctx, nil)
		if err == nil {
			given = append(given, v)
			continue
		}
		var ie *pregel.InterruptError
		if errors.As(err, &ie) {
			return given, ie, nil
		}
		return given, nil, err
	}
}

// findConversation finds the remote task that waits for this task's
// answer: remembered by this process, or else listed by the remote agent
// (A2A 1.0) in the context the first message used.
func (n *RemoteNode[S]) findConversation(ctx context.Context, conn *remoteConn, key, contextID string) (conversation, bool) {
	if c, ok := n.takeConversation(key); ok {
		return c, true
	}
	if contextID == "" {
		return conversation{}, false
	}
	cctx, cancel := context.WithTimeout(ctx, n.cfg.timeout)
	defer cancel()
	resp, err := conn.client.ListTasks(cctx, &core.ListTasksRequest{ContextID: contextID})
	if err != nil || resp == nil {
		return conversation{}, false // e.g. an A2A 0.3 agent: no tasks/list
	}
	var (
		best *core.Task
		n0   int
	)
	for _, t := range resp.Tasks {
		if t == nil || (t.Status.State != core.TaskStateInputRequired && t.Status.State != core.TaskStateAuthRequired) {
			continue
		}
		n0++
		if best == nil || later(t, best) {
			best = t
		}
	}
	// In a context of our own the newest waiting task is ours; in the
	// caller's context only a single waiting task is.
	if best == nil || (!strings.HasPrefix(contextID, contextPrefix) && n0 != 1) {
		return conversation{}, false
	}
	return conversation{taskID: best.ID, contextID: best.ContextID}, true
}

func later(a, b *core.Task) bool {
	if a.Status.Timestamp == nil || b.Status.Timestamp == nil {
		return false
	}
	return a.Status.Timestamp.After(*b.Status.Timestamp)
}

// contextPrefix starts the context ids the node gives its messages when
// the request function sets none.
const contextPrefix = "superstep-"

// contextFor is the context id of the remote tasks of one pregel task.
func contextFor(key string) string {
	sum := sha256.Sum256([]byte(key))
	return contextPrefix + hex.EncodeToString(sum[:16])
}

// message builds the first message from the state. Unless the request
// function chose a context, the message gets one of its own per pregel
// task (key), where it can be found again after a restart.
func (n *RemoteNode[S]) message(ctx context.Context, state S, key string) (*Message, error) {
	var (
		msg *Message
		err error
	)
	if n.request != nil {
		msg, err = n.request(ctx, state)
	} else {
		msg, err = DataMessage(state)
	}
	if err != nil {
		return nil, fmt.Errorf("a2a: build the message for %s: %w", n.cardURL, err)
	}
	if msg == nil || len(msg.Parts) == 0 {
		return nil, fmt.Errorf("a2a: the message for %s is empty; return a message with at least one part", n.cardURL)
	}
	out := *msg
	out.TaskID = "" // a new remote task
	if out.ID == "" {
		out.ID = core.NewMessageID()
	}
	if out.Role == core.MessageRoleUnspecified {
		out.Role = core.MessageRoleUser
	}
	if out.ContextID == "" && key != "" {
		out.ContextID = contextFor(key)
	}
	return &out, nil
}

func (n *RemoteNode[S]) finish(ctx context.Context, state S, res *RemoteResult) (S, error) {
	if n.result == nil {
		var zero S
		return zero, nil
	}
	out, err := n.result(ctx, state, res)
	if err != nil {
		return out, fmt.Errorf("a2a: map the answer of %s: %w", n.cardURL, err)
	}
	return out, nil
}

// send sends a message and waits (blocking) for the remote answer.
func (n *RemoteNode[S]) send(ctx context.Context, conn *remoteConn, msg *Message) (core.SendMessageResult, error) {
	cctx, cancel := context.WithTimeout(ctx, n.cfg.timeout)
	defer cancel()
	res, err := conn.client.SendMessage(cctx, &core.SendMessageRequest{Message: msg})
	if err != nil {
		return nil, fmt.Errorf("a2a: send message to %q: %w", conn.card.Name, err)
	}
	if res == nil {
		return nil, fmt.Errorf("a2a: %q answered with nothing", conn.card.Name)
	}
	return res, nil
}

// settle reads a remote task until it is no longer submitted or working.
// If the node is stopped meanwhile, it asks the remote agent to cancel the
// task.
func (n *RemoteNode[S]) settle(ctx context.Context, conn *remoteConn, task *core.Task) (*core.Task, error) {
	t := time.NewTicker(n.cfg.poll)
	defer t.Stop()
	for task.Status.State == core.TaskStateSubmitted || task.Status.State == core.TaskStateWorking {
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.timeout)
			_, _ = conn.client.CancelTask(cctx, &core.CancelTaskRequest{ID: task.ID})
			cancel()
			return nil, fmt.Errorf("a2a: wait for task %s of %q: %w", task.ID, conn.card.Name, ctx.Err())
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, n.cfg.timeout)
		next, err := conn.client.GetTask(cctx, &core.GetTaskRequest{ID: task.ID})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("a2a: read task %s of %q: %w", task.ID, conn.card.Name, err)
		}
		task = next
	}
	return task, nil
}

// connect fetches the card and makes a client, once per node (again after
// a failure).
func (n *RemoteNode[S]) connect(ctx context.Context) (*remoteConn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn != nil {
		return n.conn, nil
	}
	cctx, cancel := context.WithTimeout(ctx, n.cfg.timeout)
	defer cancel()
	card, err := fetchCard(cctx, n.cfg.client, n.cardURL)
	if err != nil {
		return nil, err
	}
	h := n.cfg.client
	client, err := a2aclient.NewFromCard(cctx, card,
		a2aclient.WithJSONRPCTransport(h),
		a2aclient.WithRESTTransport(h),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: h}),
		a2av0.WithRESTTransport(a2av0.RESTTransportConfig{Client: h}),
	)
	if err != nil {
		return nil, fmt.Errorf("a2a: connect to the agent of %s: %w", n.cardURL, err)
	}
	n.conn = &remoteConn{card: card, client: client}
	return n.conn, nil
}

// fetchCard reads an agent card of A2A 1.0 or 0.3.
func fetchCard(ctx context.Context, h *http.Client, cardURL string) (*core.AgentCard, error) {
	u := cardURL
	if !strings.HasSuffix(u, ".json") {
		u = strings.TrimRight(u, "/") + a2asrv.WellKnownAgentCardPath
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("a2a: agent card URL %q: %w", cardURL, err)
	}
	resp, err := h.Do(req)
	if err != nil {
		return nil, fmt.Errorf("a2a: fetch agent card %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("a2a: read agent card %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("a2a: fetch agent card %s: %s", u, resp.Status)
	}
	// The compatibility parser reads both formats, except 1.0 security
	// schemes; the 1.0 parser reads those.
	card, err := a2av0.NewAgentCardParser()(body)
	if err != nil {
		card, err = agentcard.DefaultCardParser(body)
	}
	if err != nil {
		return nil, fmt.Errorf("a2a: parse agent card %s: %w", u, err)
	}
	if card.Name == "" {
		card.Name = cardURL
	}
	return card, nil
}

// questionPayload is the interrupt payload of a remote task that waits for
// input.
func questionPayload(card *core.AgentCard, task *core.Task) map[string]any {
	q := messageText(task.Status.Message)
	if q == "" {
		q = fmt.Sprintf("the agent %q needs input", card.Name)
	}
	p := map[string]any{
		"question":          q,
		"remote_agent":      card.Name,
		"remote_task_id":    string(task.ID),
		"remote_context_id": task.ContextID,
		"remote_state":      stateName(task.Status.State),
	}
	if task.Status.State == core.TaskStateAuthRequired {
		p[AuthRequiredKey] = true
	}
	if task.Status.Message != nil {
		for _, part := range task.Status.Message.Parts {
			if part == nil {
				continue
			}
			if d, ok := part.Content.(core.Data); ok {
				p["data"] = d.Value
				break
			}
		}
	}
	return p
}

// answerMessage sends a resume value to a remote task: a JSON string as
// text, any other value as data.
func answerMessage(taskID core.TaskID, contextID string, answer json.RawMessage) *Message {
	var part *core.Part
	var s string
	if err := json.Unmarshal(answer, &s); err == nil {
		part = core.NewTextPart(s)
	} else if v, err := decodeJSON(answer); err == nil && v != nil {
		part = core.NewDataPart(v)
	} else {
		part = core.NewTextPart(string(answer))
	}
	msg := core.NewMessage(core.MessageRoleUser, part)
	msg.TaskID, msg.ContextID = taskID, contextID
	return msg
}

// messageText joins the text parts of a message.
func messageText(m *Message) string {
	if m == nil {
		return ""
	}
	var texts []string
	for _, p := range m.Parts {
		if p == nil {
			continue
		}
		if t, ok := p.Content.(core.Text); ok && t != "" {
			texts = append(texts, string(t))
		}
	}
	return strings.Join(texts, "\n")
}

func (n *RemoteNode[S]) takeConversation(key string) (conversation, bool) {
	if key == "" {
		return conversation{}, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.convs[key]
	delete(n.convs, key)
	return c, ok
}

func (n *RemoteNode[S]) keepConversation(key string, c conversation) {
	if key == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.convs[key]; !ok {
		n.order = append(n.order, key)
	}
	n.convs[key] = c
	for len(n.order) > maxConversations {
		delete(n.convs, n.order[0])
		n.order = n.order[1:]
	}
	if len(n.order) > 2*len(n.convs)+16 {
		// Drop keys already taken.
		kept := n.order[:0]
		for _, k := range n.order {
			if _, ok := n.convs[k]; ok {
				kept = append(kept, k)
			}
		}
		n.order = kept
	}
}

// headerTransport adds headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.headers {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	return t.base.RoundTrip(r)
}
