package serverless

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// FunctionURLMargin is how long before the function's deadline a request
// served by HandleFunctionURL ends: streams close cleanly then (the
// client resumes with Last-Event-ID, or A2A tasks/resubscribe) instead
// of being cut off by Lambda's timeout. pkg/api's streams end another
// api.StreamDeadlineMargin before.
const FunctionURLMargin = 2 * time.Second

// HandleFunctionURL is the stream function's handler: a Lambda function
// URL request, with the function URL in RESPONSE_STREAM mode, served by
// the HTTP API (the same handler as HandleAPI's, A2A streaming included)
// through aws-lambda-go's lambdaurl, so that the response body reaches the
// client as it is written. Each request's context ends FunctionURLMargin
// before the invocation's deadline.
func (a *App) HandleFunctionURL(ctx context.Context, req *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	return lambdaurl.Wrap(http.HandlerFunc(a.serveStreamed))(ctx, req)
}

// serveStreamed serves one function URL request: before the deadline, with
// a writer that can be flushed (lambdaurl's writes go straight to the
// response stream; the HTTP API and A2A handlers flush as they go).
func (a *App) serveStreamed(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-FunctionURLMargin))
		defer cancel()
	}
	a.ServeHTTP(flushWriter{w}, r.WithContext(ctx))
}

// flushWriter gives an http.ResponseWriter whose writes are not buffered
// a Flush that does nothing.
type flushWriter struct{ http.ResponseWriter }

func (flushWriter) Flush() {}

// Unwrap gives http.ResponseController the writer beneath.
func (w flushWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logEvents is the A2A agents' source of live run events on the stream
// function: it follows a run's stream in the table (runs.Cursor, polling
// every runs.DefaultCursorPoll).
type logEvents struct {
	log    runs.EventReader
	logger *slog.Logger
	// poll is how often the log is read (default runs.DefaultCursorPoll).
	poll time.Duration
}

// Subscribe implements a2a.EventSource: the run's events from now on. If
// the log cannot be read, the channel is closed and the agents follow the
// run record instead.
func (l *logEvents) Subscribe(runID string) (<-chan pregel.Event, func()) {
	ch := make(chan pregel.Event, 64)
	ctx, cancel := context.WithCancel(context.Background())
	readCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	page, err := l.log.EventsSince(readCtx, runID, 0, 1)
	stop()
	if err != nil {
		l.logger.Warn("a2a: read the run's stream; following the run record instead", "run_id", runID, "error", err)
		cancel()
		close(ch)
		return ch, func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		cur := runs.NewCursor(l.log, runID, page.Last)
		cur.Poll = l.poll
		defer cur.Close()
		for {
			ev, err := cur.Next(ctx)
			var dropped *runs.EventsDroppedError
			switch {
			case errors.As(err, &dropped):
				continue
			case err != nil:
				if ctx.Err() == nil {
					l.logger.Warn("a2a: follow the run's stream; following the run record instead", "run_id", runID, "error", err)
				}
				return
			}
			select {
			case ch <- ev.Event:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, func() {
		cancel()
		<-done
	}
}
