// Package lambdatest is a local stand-in for the AWS Lambda service's
// asynchronous invocations, for tests that drive the real aws-sdk-go-v2
// lambda client: it speaks Invoke's wire format (POST
// /2015-03-31/functions/{name}/invocations with X-Amz-Invocation-Type
// Event, answered 202) and delivers each event to the handler registered
// for the function, as Lambda's own event queue does: later, possibly
// twice, out of order, retrying a failed invocation MaxRetries times and
// then handing the event to the function's on-failure destination.
package lambdatest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// MaxPayload is the largest payload Lambda accepts for an asynchronous
// invocation.
const MaxPayload = 256 * 1024

// Handler runs one invocation; an error (or a panic) is a failed one.
type Handler func(ctx context.Context, payload []byte) error

// Function is a function the server invokes.
type Function struct {
	Handler Handler
	// MaxRetries is how many times a failed invocation is tried again
	// (Lambda's MaximumRetryAttempts, 0 to 2; -1: none). Zero means 2.
	MaxRetries int
	// RetryDelay is the wait before each retry (Lambda: about a minute,
	// then two). Zero: 100 ms.
	RetryDelay time.Duration
	// Timeout is each invocation's deadline (default 30 s).
	Timeout time.Duration
	// OnFailure, when set, receives an event that failed every attempt,
	// as Lambda's on-failure destination does: a JSON invocation record
	// (see Record).
	OnFailure func(ctx context.Context, record []byte) error
}

// Faults makes the event queue hostile. Its choices come from one seeded
// generator.
type Faults struct {
	// MaxDelay delays each delivery by a random time up to it, so that
	// events overtake one another.
	MaxDelay time.Duration
	// Duplicate is the chance (0 to 1) that an event is delivered twice.
	Duplicate float64
	// Seed seeds the generator.
	Seed uint64
}

// Record is what an on-failure destination receives (the fields of
// Lambda's invocation record that tests read).
type Record struct {
	Version        string          `json:"version"`
	Timestamp      time.Time       `json:"timestamp"`
	RequestContext RecordContext   `json:"requestContext"`
	RequestPayload json.RawMessage `json:"requestPayload"`
	Response       struct {
		StatusCode    int    `json:"statusCode"`
		FunctionError string `json:"functionError"`
	} `json:"responseContext"`
	ResponsePayload struct {
		ErrorMessage string `json:"errorMessage"`
	} `json:"responsePayload"`
}

// RecordContext is an invocation record's requestContext.
type RecordContext struct {
	RequestID              string `json:"requestId"`
	FunctionArn            string `json:"functionArn"`
	Condition              string `json:"condition"`
	ApproximateInvokeCount int    `json:"approximateInvokeCount"`
}

// Server is the stand-in Lambda service. Start it with [Start].
type Server struct {
	// URL is the endpoint for the lambda client (BaseEndpoint).
	URL string

	t      testing.TB
	funcs  map[string]*Function
	faults Faults
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	rng *rand.Rand

	seq atomic.Int64
	// Counts.
	accepted, invoked, retried, failed, duplicated, pending atomic.Int64
}

// Region and Account are what the function ARNs the server reports name.
const (
	Region  = "us-east-1"
	Account = "123456789012"
)

// Start serves funcs (by function name) until the test ends; the test's
// clean-up stops the deliveries and waits for those under way.
func Start(t testing.TB, funcs map[string]*Function, faults Faults) *Server {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{t: t, funcs: funcs, faults: faults, ctx: ctx, stop: stop, rng: rand.New(rand.NewPCG(faults.Seed, faults.Seed^0x9e3779b97f4a7c15))}
	srv := httptest.NewServer(s)
	s.URL = srv.URL
	t.Cleanup(func() {
		srv.Close()
		stop()
		s.wg.Wait()
	})
	return s
}

// Stats are the server's counts.
type Stats struct {
	// Accepted: Invoke requests answered 202. Invoked: handler calls
	// (retries and duplicates included). Retried: calls after a failed
	// one. Failed: events sent to the on-failure destination (or dropped
	// without one). Duplicated: events delivered twice on purpose.
	Accepted, Invoked, Retried, Failed, Duplicated int64
}

// Stats returns the counts so far.
func (s *Server) Stats() Stats {
	return Stats{s.accepted.Load(), s.invoked.Load(), s.retried.Load(), s.failed.Load(), s.duplicated.Load()}
}

// Idle reports whether no event is waiting or being delivered.
func (s *Server) Idle() bool { return s.pending.Load() == 0 }

// ARN is the function ARN of name.
func ARN(name string) string {
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", Region, Account, name)
}

// functionName is the function and qualifier a FunctionName path value
// names: a name, a partial or full ARN, with or without a qualifier.
func functionName(v string) (name, qualifier string) {
	if i := strings.Index(v, "function:"); i >= 0 {
		v = v[i+len("function:"):]
	}
	name, qualifier, _ = strings.Cut(v, ":")
	return name, qualifier
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const prefix, suffix = "/2015-03-31/functions/", "/invocations"
	path := r.URL.EscapedPath()
	if r.Method != http.MethodPost || !strings.HasPrefix(path, prefix) || !strings.HasSuffix(path, suffix) {
		apiError(w, http.StatusNotFound, "UnknownOperationException", "only Invoke is served: POST /2015-03-31/functions/{name}/invocations")
		return
	}
	raw, err := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(path, prefix), suffix))
	if err != nil {
		apiError(w, http.StatusBadRequest, "InvalidParameterValueException", "FunctionName: "+err.Error())
		return
	}
	name, qual := functionName(raw)
	fn, ok := s.funcs[name]
	if !ok {
		apiError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+ARN(name))
		return
	}
	if it := r.Header.Get("X-Amz-Invocation-Type"); it != "Event" {
		apiError(w, http.StatusBadRequest, "InvalidParameterValueException", fmt.Sprintf("X-Amz-Invocation-Type %q: this stand-in serves asynchronous invocations (Event) only", it))
		return
	}
	payload, err := io.ReadAll(io.LimitReader(r.Body, MaxPayload+1))
	if err != nil {
		apiError(w, http.StatusBadRequest, "InvalidRequestContentException", err.Error())
		return
	}
	if len(payload) > MaxPayload {
		apiError(w, http.StatusRequestEntityTooLarge, "RequestTooLargeException", fmt.Sprintf("Request must be smaller than %d bytes for the InvokeAsync operation", MaxPayload))
		return
	}
	if !json.Valid(payload) {
		apiError(w, http.StatusBadRequest, "InvalidRequestContentException", "Could not parse request body into json")
		return
	}
	id := fmt.Sprintf("req-%d", s.seq.Add(1))
	arn := ARN(name)
	if q := r.URL.Query().Get("Qualifier"); q != "" {
		qual = q
	}
	if qual != "" {
		arn += ":" + qual
	}
	s.accepted.Add(1)
	s.deliver(fn, arn, id, payload, s.delay())
	s.mu.Lock()
	dup := s.faults.Duplicate > 0 && s.rng.Float64() < s.faults.Duplicate
	s.mu.Unlock()
	if dup {
		s.duplicated.Add(1)
		s.deliver(fn, arn, id, payload, s.delay()+s.faults.MaxDelay/2)
	}
	w.Header().Set("X-Amzn-RequestId", id)
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) delay() time.Duration {
	if s.faults.MaxDelay <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.rng.Int64N(int64(s.faults.MaxDelay)))
}

// deliver invokes fn with payload after wait, retrying as Lambda does.
func (s *Server) deliver(fn *Function, arn, id string, payload []byte, wait time.Duration) {
	s.pending.Add(1)
	s.wg.Go(func() {
		defer s.pending.Add(-1)
		retries := fn.MaxRetries
		switch {
		case retries == 0:
			retries = 2
		case retries < 0:
			retries = 0
		}
		delay := fn.RetryDelay
		if delay <= 0 {
			delay = 100 * time.Millisecond
		}
		var last error
		for attempt := 0; attempt <= retries; attempt++ {
			if attempt > 0 {
				s.retried.Add(1)
				wait = delay * time.Duration(attempt)
			}
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(wait):
			}
			if last = s.invoke(fn, arn, id, payload); last == nil {
				return
			}
		}
		s.failed.Add(1)
		if fn.OnFailure == nil {
			return
		}
		rec := Record{Version: "1.0", Timestamp: time.Now().UTC(), RequestPayload: payload,
			RequestContext: RecordContext{RequestID: id, FunctionArn: arn, Condition: "RetriesExhausted", ApproximateInvokeCount: retries + 1}}
		rec.Response.StatusCode, rec.Response.FunctionError = http.StatusOK, "Unhandled"
		rec.ResponsePayload.ErrorMessage = last.Error()
		body, _ := json.Marshal(rec)
		if err := fn.OnFailure(s.ctx, body); err != nil && s.ctx.Err() == nil {
			s.t.Errorf("lambdatest: on-failure destination of %s: %v", arn, err)
		}
	})
}

// invoke runs one attempt; a panic is a failed invocation, as a crashed
// runtime is.
func (s *Server) invoke(fn *Function, arn, id string, payload []byte) (err error) {
	s.invoked.Add(1)
	timeout := fn.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: id, InvokedFunctionArn: arn})
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("lambdatest: the invocation panicked: %v", p)
		}
	}()
	return fn.Handler(ctx, payload)
}

// apiError answers as Lambda's REST JSON errors are.
func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": msg})
}
