package serverless

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/superstep/superstep/pkg/agent/memorytools"
	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/tick"
)

// ErrBadEvent is wrapped by errors about events and messages that can
// never be processed (undecodable, unknown graph, input the graph
// rejects). They are logged at error level and reported as failed, so
// that they reach the dead-letter queue, or the function's on-failure
// destination, rather than being dropped.
var ErrBadEvent = errors.New("serverless: bad event")

// bad reports whether err means the message can never be processed.
func bad(err error) bool {
	return errors.Is(err, ErrBadEvent) || errors.Is(err, tick.ErrBadMessage)
}

// HandleTick is the tick function's handler: each record's body is a
// [tick.Tick] for [tick.Handler.Tick]. Records that fail, for whatever
// reason, are reported in BatchItemFailures and come back after the
// visibility timeout; bad ones are logged with the reason and end in the
// dead-letter queue after maxReceiveCount.
func (a *App) HandleTick(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if a.Ticks == nil {
		return events.SQSEventResponse{}, a.unwired("tick messages", FunctionTick)
	}
	return a.batch(ctx, "tick", ev, func(ctx context.Context, m events.SQSMessage) error {
		var t tick.Tick
		if err := decodeBody(m.Body, &t, false); err != nil {
			return fmt.Errorf("%w: tick message: %w", ErrBadEvent, err)
		}
		return a.Ticks.Tick(ctx, t)
	})
}

// HandleNode is the node function's handler: each record's body is a
// [tick.NodeTask] for [tick.Handler.Node]. Failures are reported as in
// [App.HandleTick].
func (a *App) HandleNode(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if a.Ticks == nil {
		return events.SQSEventResponse{}, a.unwired("node task messages", FunctionNode)
	}
	return a.batch(ctx, "node", ev, func(ctx context.Context, m events.SQSMessage) error {
		var t tick.NodeTask
		if err := decodeBody(m.Body, &t, false); err != nil {
			return fmt.Errorf("%w: node task message: %w", ErrBadEvent, err)
		}
		return a.Ticks.Node(ctx, t)
	})
}

// batch calls fn for each record and reports the ones that failed. On a
// FIFO queue, the records after a failed one are reported as failed
// without being processed, to keep their order.
func (a *App) batch(ctx context.Context, kind string, ev events.SQSEvent, fn func(context.Context, events.SQSMessage) error) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for i, m := range ev.Records {
		log := a.Logger.With("handler", kind, "message_id", m.MessageId, "receive_count", m.Attributes["ApproximateReceiveCount"])
		// A node reaches the long-term store, and its memory tools the
		// run's thread, through the context.
		ctx := longterm.WithScope(longterm.WithStore(ctx, a.LongTerm), memorytools.ThreadScope(a.Store, a.Store))
		if a.Tracer != nil {
			ctx = a.Tracer.FromMessage(ctx, m)
		}
		err := fn(ctx, m)
		if err == nil {
			continue
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		logFailure(ctx, log, m, err)
		if strings.HasSuffix(m.EventSourceARN, ".fifo") {
			for _, rest := range ev.Records[i+1:] {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rest.MessageId})
			}
			break
		}
	}
	return resp, nil
}

// logFailure says why a message failed and what happens to it next.
func logFailure(ctx context.Context, log *slog.Logger, m events.SQSMessage, err error) {
	switch {
	case bad(err):
		log.ErrorContext(ctx, "bad message: it can never be processed; reported as failed, it goes to the dead-letter queue after maxReceiveCount",
			"reason", err.Error(), "body", truncate(m.Body, 2048))
	case errors.Is(err, tick.ErrClaimed):
		log.InfoContext(ctx, "a task of this message is executing elsewhere; it is retried after the visibility timeout", "reason", err.Error())
	case ctx.Err() != nil:
		log.WarnContext(ctx, "stopped before the message was processed (time-out); it is retried after the visibility timeout", "reason", err.Error())
	default:
		log.WarnContext(ctx, "message failed; it is retried after the visibility timeout", "reason", err.Error())
	}
}

// decodeBody decodes a message body that must be one JSON object. strict
// refuses unknown fields.
func decodeBody(body string, v any, strict bool) error {
	trimmed := strings.TrimSpace(body)
	if !strings.HasPrefix(trimmed, "{") {
		return fmt.Errorf("the body is not a JSON object: %q", truncate(trimmed, 64))
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the body is not valid JSON for this message: %w", err)
	}
	if dec.More() {
		return errors.New("the body holds more than one JSON value")
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
