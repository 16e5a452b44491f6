package serverless

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/internal/jsonin"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/schedule"
	"github.com/superstep/superstep/pkg/schedule/awsscheduler"
)

// DetailTypeStartRun is the detail-type of the EventBridge events that
// start runs.
const DetailTypeStartRun = "superstep.StartRun"

// StartRequest starts a run: the detail of a [DetailTypeStartRun] event,
// or the body of a start-queue message. Unknown fields are refused.
type StartRequest struct {
	// Graph names a registered graph. Required.
	Graph string `json:"graph"`
	// RunID makes the start idempotent. Empty: the event's id ("eb-"
	// + EventBridge event id, "sqs-" + SQS message id), so that a
	// redelivered event does not start a second run.
	RunID string `json:"run_id,omitempty"`
	// Input is the run's input: a JSON object of channel values.
	Input json.RawMessage `json:"input,omitempty"`
	// ContextID groups the runs of one conversation.
	ContextID string `json:"context_id,omitempty"`
	// ThreadID, when set, starts the run on the thread, with Strategy
	// (reject, enqueue, interrupt or rollback) if it is busy.
	ThreadID string `json:"thread_id,omitempty"`
	Strategy string `json:"strategy,omitempty"`
	// Schedule and ScheduledTime make the request a firing of a schedule
	// (pkg/schedule/awsscheduler: EventBridge Scheduler fills the time
	// in): the run id is schedule.FiringRunID(Schedule, ScheduledTime),
	// so a firing delivered twice starts one run; a firing that cannot
	// start a run (its thread busy with reject, or gone) is logged and
	// dropped rather than retried.
	Schedule      string `json:"schedule,omitempty"`
	ScheduledTime string `json:"scheduled_time,omitempty"`
}

// HandleAPI is the api function's handler. It tells three event shapes
// apart by their JSON:
//
//   - an API Gateway HTTP API request, payload format 2.0 (also a Lambda
//     function URL request): served by the HTTP API, answered with an
//     [events.APIGatewayV2HTTPResponse];
//   - an EventBridge event (it has "detail-type"): [App.HandleEventBridge];
//     the answer is null, or an error so that Lambda retries the event
//     and then sends it to the function's dead-letter queue or on-failure
//     destination;
//   - SQS records from the start queue: [App.HandleStartQueue], answered
//     with an [events.SQSEventResponse].
//
// Anything else is logged and refused with an error.
func (a *App) HandleAPI(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Version        string `json:"version"`
		RequestContext *struct {
			HTTP       *json.RawMessage `json:"http"`
			HTTPMethod string           `json:"httpMethod"`
		} `json:"requestContext"`
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
		DetailType *string `json:"detail-type"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		err = fmt.Errorf("%w: the event is not a JSON object: %w", ErrBadEvent, err)
		a.Logger.ErrorContext(ctx, "api: unrecognised event", "reason", err.Error(), "event", truncate(string(raw), 2048))
		return nil, err
	}
	switch {
	case len(probe.Records) > 0:
		for _, r := range probe.Records {
			if r.EventSource != "aws:sqs" {
				err := fmt.Errorf("%w: records from %q; the api function takes SQS records (aws:sqs) of the start queue only", ErrBadEvent, r.EventSource)
				a.Logger.ErrorContext(ctx, "api: unrecognised event", "reason", err.Error(), "event", truncate(string(raw), 2048))
				return nil, err
			}
		}
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			err = fmt.Errorf("%w: SQS event: %w", ErrBadEvent, err)
			a.Logger.ErrorContext(ctx, "api: bad SQS event", "reason", err.Error(), "event", truncate(string(raw), 2048))
			return nil, err
		}
		return a.HandleStartQueue(ctx, ev)
	case probe.DetailType != nil:
		var ev events.EventBridgeEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			err = fmt.Errorf("%w: EventBridge event: %w", ErrBadEvent, err)
			a.Logger.ErrorContext(ctx, "api: bad EventBridge event", "reason", err.Error(), "event", truncate(string(raw), 2048))
			return nil, err
		}
		return nil, a.HandleEventBridge(ctx, ev)
	case probe.RequestContext != nil && probe.RequestContext.HTTP != nil:
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			a.Logger.ErrorContext(ctx, "api: bad HTTP API event", "reason", err.Error())
			return problemResponse(http.StatusBadRequest, "", fmt.Sprintf("the request event does not decode: %v", err)), nil
		}
		return a.HandleHTTP(ctx, ev), nil
	case probe.RequestContext != nil && probe.RequestContext.HTTPMethod != "":
		err := fmt.Errorf("%w: an API Gateway payload format %s request; configure the integration with payload format version 2.0", ErrBadEvent, cmp.Or(probe.Version, "1.0"))
		a.Logger.ErrorContext(ctx, "api: unsupported event", "reason", err.Error())
		return nil, err
	default:
		err := fmt.Errorf("%w: want an API Gateway HTTP API request (payload 2.0), an EventBridge event with detail-type %s, or SQS records from the start queue", ErrBadEvent, DetailTypeStartRun)
		a.Logger.ErrorContext(ctx, "api: unrecognised event", "reason", err.Error(), "event", truncate(string(raw), 2048))
		return nil, err
	}
}

// HandleEventBridge starts the run an EventBridge event of detail-type
// [DetailTypeStartRun] asks for; its detail is a [StartRequest]. Any
// other event, or a start that fails, is logged and returned as an error.
func (a *App) HandleEventBridge(ctx context.Context, ev events.EventBridgeEvent) error {
	log := a.Logger.With("event_id", ev.ID, "source", ev.Source, "detail_type", ev.DetailType)
	if ev.DetailType != DetailTypeStartRun {
		err := fmt.Errorf("%w: detail-type %q; the api function takes %q events only", ErrBadEvent, ev.DetailType, DetailTypeStartRun)
		log.ErrorContext(ctx, "api: bad EventBridge event; returned as an error so that it goes to the function's dead-letter queue after Lambda's retries", "reason", err.Error())
		return err
	}
	err := a.start(ctx, log, string(ev.Detail), "eb-"+ev.ID)
	if err != nil {
		log.ErrorContext(ctx, "api: EventBridge start failed; returned as an error so that Lambda retries it, then sends it to the function's dead-letter queue", "bad_event", bad(err), "reason", err.Error())
	}
	return err
}

// HandleStartQueue starts a run per start-queue message; each body is a
// [StartRequest]. Failed messages are reported as in [App.HandleTick].
func (a *App) HandleStartQueue(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return a.batch(ctx, "start", ev, func(ctx context.Context, m events.SQSMessage) error {
		return a.start(ctx, a.Logger.With("message_id", m.MessageId), m.Body, "sqs-"+m.MessageId)
	})
}

// start decodes a StartRequest and creates its run; defaultID is the run
// id when the request has none.
func (a *App) start(ctx context.Context, log *slog.Logger, body, defaultID string) error {
	var req StartRequest
	if err := jsonin.Check([]byte(body)); err != nil { // the limits every entry point applies (pkg/internal/jsonin)
		return fmt.Errorf("%w: start request: %w", ErrBadEvent, err)
	}
	if err := decodeBody(body, &req, true); err != nil {
		return fmt.Errorf("%w: start request: %w; want {\"graph\": \"...\", \"input\": {...}, \"run_id\": \"...\"}", ErrBadEvent, err)
	}
	if req.Graph == "" {
		return fmt.Errorf("%w: start request without a graph; want {\"graph\": \"...\", \"input\": {...}}", ErrBadEvent)
	}
	if req.Schedule != "" {
		return a.fire(ctx, log, req)
	}
	if req.RunID == "" {
		req.RunID = defaultID
	}
	var (
		r       runs.Run
		created bool
		err     error
	)
	if req.ThreadID != "" {
		r, created, err = a.Service.CreateOnThread(ctx, req.ThreadID, runs.ThreadRunRequest{Graph: req.Graph, RunID: req.RunID, Input: req.Input, Strategy: runs.Strategy(req.Strategy)})
	} else {
		r, created, err = a.Service.Create(ctx, req.Graph, runs.CreateRequest{RunID: req.RunID, Input: req.Input, ContextID: req.ContextID})
	}
	if err != nil {
		if errors.Is(err, runs.ErrInvalid) || errors.Is(err, runs.ErrNotFound) || errors.Is(err, runs.ErrConflict) {
			return fmt.Errorf("%w: start %s: %w", ErrBadEvent, req.Graph, err)
		}
		return fmt.Errorf("start %s: %w", req.Graph, err)
	}
	log.InfoContext(ctx, "api: run started", "run_id", r.ID, "graph", r.Graph, "created", created, "status", r.Status)
	return nil
}

// fire starts the run of a schedule's firing (see StartRequest.Schedule).
func (a *App) fire(ctx context.Context, log *slog.Logger, req StartRequest) error {
	if req.RunID != "" || req.ContextID != "" {
		return fmt.Errorf("%w: a schedule's firing takes no run_id or context_id (its run id is the schedule's name and scheduled time)", ErrBadEvent)
	}
	at, err := awsscheduler.ParseFiring(req.ScheduledTime)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	log = log.With("schedule", req.Schedule, "scheduled_time", at, "graph", req.Graph)
	r, created, err := schedule.Start(ctx, a.Service, schedule.Firing{Schedule: req.Schedule, At: at, Graph: req.Graph, Input: req.Input, ThreadID: req.ThreadID, Strategy: runs.Strategy(req.Strategy)})
	if err != nil {
		if errors.Is(err, runs.ErrInvalid) || errors.Is(err, runs.ErrNotFound) || errors.Is(err, runs.ErrConflict) {
			// Trying again would not help (a busy thread with reject is
			// what reject means): the firing is skipped, and says why.
			log.WarnContext(ctx, "api: schedule firing started no run", "reason", runs.Public(err).Error())
			return nil
		}
		return fmt.Errorf("start %s for schedule %s: %w", req.Graph, req.Schedule, err)
	}
	log.InfoContext(ctx, "api: schedule fired", "run_id", r.ID, "created", created, "status", r.Status)
	return nil
}

// BufferedLimit bounds a request HandleHTTP serves: API Gateway buffers
// the response and gives up after 29 seconds, so a stream asked for there
// (GET /v1/runs/{id}/stream) ends before, with the events so far, for the
// client to resume with Last-Event-ID; the stream function's URL streams
// them as they come. A blocking A2A send returns sooner
// (a2a.APIGatewayBlockingTimeout).
const BufferedLimit = 28 * time.Second

// HandleHTTP serves an API Gateway HTTP API request (payload format 2.0)
// with the HTTP API handler, within BufferedLimit. A request event that
// cannot be turned into an HTTP request is answered with a 400 problem.
func (a *App) HandleHTTP(ctx context.Context, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	ctx, cancel := context.WithTimeout(ctx, BufferedLimit)
	defer cancel()
	req, err := httpRequest(ctx, ev)
	if err != nil {
		a.Logger.WarnContext(ctx, "api: bad HTTP API event", "reason", err.Error(), "request_id", ev.RequestContext.RequestID)
		return problemResponse(http.StatusBadRequest, ev.RawPath, err.Error())
	}
	w := &responseBuffer{header: http.Header{}}
	a.ServeHTTP(w, req)
	return w.response()
}

// httpRequest converts an HTTP API request event into an *http.Request.
func httpRequest(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	method := ev.RequestContext.HTTP.Method
	if method == "" {
		return nil, errors.New("the event has no requestContext.http.method")
	}
	path := ev.RawPath
	if path == "" {
		path = ev.RequestContext.HTTP.Path
	}
	// A named stage prefixes the path; the API's routes do not have it.
	if st := ev.RequestContext.Stage; st != "" && st != "$default" {
		if rest, ok := strings.CutPrefix(path, "/"+st); ok && (rest == "" || rest[0] == '/') {
			path = cmp.Or(rest, "/")
		}
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	target := path
	if ev.RawQueryString != "" {
		target += "?" + ev.RawQueryString
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, fmt.Errorf("the request path %q does not parse: %w", target, err)
	}
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return nil, fmt.Errorf("the body is marked base64 but does not decode: %w", err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("the request does not convert: %w", err)
	}
	req.RequestURI = u.RequestURI()
	// The host is the one API Gateway names, not the client's Host header
	// (kept in req.Header): the agent cards' URLs are built from it.
	req.Host = ev.RequestContext.DomainName
	req.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	if p := ev.RequestContext.HTTP.Protocol; p != "" {
		if major, minor, ok := http.ParseHTTPVersion(p); ok {
			req.Proto, req.ProtoMajor, req.ProtoMinor = p, major, minor
		}
	}
	// Payload 2.0 joins repeated headers with commas, and lower-cases
	// their names.
	for k, v := range ev.Headers {
		req.Header.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	return req, nil
}

// responseBuffer is the http.ResponseWriter of one API request.
type responseBuffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *responseBuffer) Header() http.Header { return w.header }

func (w *responseBuffer) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

// Flush does nothing: the response goes out whole.
func (w *responseBuffer) Flush() {}

func (w *responseBuffer) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// response converts what was written into the Lambda response; bodies that
// are not UTF-8 text go base64-encoded.
func (w *responseBuffer) response() events.APIGatewayV2HTTPResponse {
	out := events.APIGatewayV2HTTPResponse{StatusCode: w.status, Headers: make(map[string]string, len(w.header))}
	if out.StatusCode == 0 {
		out.StatusCode = http.StatusOK
	}
	for k, vs := range w.header {
		if http.CanonicalHeaderKey(k) == "Set-Cookie" {
			out.Cookies = append(out.Cookies, vs...)
			continue
		}
		out.Headers[k] = strings.Join(vs, ", ")
	}
	if b := w.body.Bytes(); utf8.Valid(b) {
		out.Body = string(b)
	} else {
		out.Body, out.IsBase64Encoded = base64.StdEncoding.EncodeToString(b), true
	}
	return out
}

// problemResponse is a problem+json response built without the API, for
// events that never reach it.
func problemResponse(status int, instance, detail string) events.APIGatewayV2HTTPResponse {
	body, _ := json.Marshal(api.Problem{
		Type:     "urn:superstep:problem:invalid-request",
		Title:    "Invalid request",
		Status:   status,
		Detail:   detail,
		Instance: instance,
	})
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers: map[string]string{
			"Content-Type":   "application/problem+json",
			"Content-Length": strconv.Itoa(len(body)),
			"Cache-Control":  "no-store",
		},
		Body: string(body),
	}
}
