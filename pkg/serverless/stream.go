package serverless

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
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

// EventsMode says when the tick and node functions keep a run's events,
// which GET /v1/runs/{id}/stream and A2A streams serve.
type EventsMode string

// The modes of Config.Events (RUN_EVENTS).
const (
	// EventsWatched, the default: the events of watched runs only. A
	// stream (GET /v1/runs/{id}/stream, A2A message/stream or
	// resubscribe) marks its run watched for WatchLease, and renews the
	// mark while it lasts (runs.Run.WatchedUntil, one run record update
	// a minute); the tick and node functions keep the events of the
	// supersteps they start while the mark holds. An unwatched run pays
	// nothing; a stream shows what happened since it (or a watcher
	// before it, within the lease) started, and of a run nobody watched,
	// only how it ended.
	EventsWatched EventsMode = "watched"
	// EventsOn: every run's events, about one PutItem (1 WRU) per
	// superstep; any stream replays the run from its start.
	EventsOn EventsMode = "on"
	// EventsOff: none; streams show how runs end, nothing else.
	EventsOff EventsMode = "off"
)

// WatchLease is how long a stream's mark on its run lasts (EventsWatched):
// the run's events are kept that long after the last watcher left, so a
// client that reconnects within it misses nothing.
const WatchLease = 2 * time.Minute

// isWatched is the tick handler's EventFilter under EventsWatched.
func isWatched(r runs.Run) bool { return r.WatchedUntil.After(time.Now()) }

// errNoRenewal tells runs.Mutate that the record needs no write.
var errNoRenewal = errors.New("no renewal needed")

// watchingLog is the EventReader of streams under EventsWatched: reading
// a run's stream marks the run watched (runs.Run.WatchedUntil) for lease,
// renewed when half of it has passed.
type watchingLog struct {
	runs.EventReader
	runs   runs.Store
	lease  time.Duration
	logger *slog.Logger

	mu      sync.Mutex
	renewed map[string]time.Time // run -> when this process last renewed
	waiting map[string]bool      // runs markSoon waits for
}

// maxRenewals bounds the runs a watchingLog remembers renewing.
const maxRenewals = 4096

// WatchUntil is when a mark made at now ends: the API marks a run it
// creates to answer with its stream.
func (w *watchingLog) WatchUntil(now time.Time) time.Time { return now.Add(w.lease) }

// EventsSince renews the run's mark, then reads its stream.
func (w *watchingLog) EventsSince(ctx context.Context, runID string, after int64, limit int) (runs.EventPage, error) {
	w.renew(ctx, runID)
	return w.EventReader.EventsSince(ctx, runID, after, limit)
}

func (w *watchingLog) renew(ctx context.Context, runID string) {
	now := time.Now()
	w.mu.Lock()
	if last, ok := w.renewed[runID]; ok && now.Sub(last) < w.lease/2 {
		w.mu.Unlock()
		return
	}
	if w.renewed == nil || len(w.renewed) >= maxRenewals {
		w.renewed = map[string]time.Time{}
	}
	w.renewed[runID] = now
	w.mu.Unlock()
	_, err := runs.Mutate(ctx, w.runs, runID, func(r *runs.Run) error {
		switch r.Status {
		case pregel.RunCompleted, pregel.RunFailed, pregel.RunCancelled:
			return errNoRenewal // nothing more happens
		}
		if r.WatchedUntil.Sub(now) > w.lease/2 {
			return errNoRenewal // another watcher renewed it
		}
		r.WatchedUntil = now.Add(w.lease)
		return nil
	})
	if err != nil && !errors.Is(err, errNoRenewal) {
		// Try again at the next read.
		w.mu.Lock()
		delete(w.renewed, runID)
		w.mu.Unlock()
		if errors.Is(err, runs.ErrNotFound) {
			// A stream that watches before its run is created (A2A
			// message/stream): mark the run as soon as it exists,
			// before its first tick if possible.
			w.markSoon(runID)
		} else if ctx.Err() == nil {
			w.logger.Warn("mark the run watched; its stream may miss events", "run_id", runID, "error", err)
		}
	}
}

// markRetry and markWait pace markSoon.
const (
	markRetry = 50 * time.Millisecond
	markWait  = 5 * time.Second
)

// markSoon marks a run that does not exist yet once it does: it looks
// every markRetry, for markWait, once per run at a time.
func (w *watchingLog) markSoon(runID string) {
	w.mu.Lock()
	if w.waiting == nil {
		w.waiting = map[string]bool{}
	}
	if w.waiting[runID] || len(w.waiting) >= maxRenewals {
		w.mu.Unlock()
		return
	}
	w.waiting[runID] = true
	w.mu.Unlock()
	go func() {
		defer func() {
			w.mu.Lock()
			delete(w.waiting, runID)
			w.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), markWait)
		defer cancel()
		t := time.NewTicker(markRetry)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := w.runs.GetRun(ctx, runID); err == nil {
				w.renew(ctx, runID)
				return
			}
		}
	}()
}
