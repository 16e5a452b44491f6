//go:build !superstep.lambda

package superstep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

func newRunsWatchCmd(env Env, f *serverFlags) *cobra.Command {
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "watch RUN_ID",
		Short: "Follow a run live: its steps and nodes as they finish, the text models stream",
		Long: `Follow a run over the server's event stream (GET /v1/runs/{id}/stream): one
line per superstep and per finished node, and the text that model nodes
stream as it comes. A run that has stopped is replayed. The command ends
when the run stops (completed, failed, cancelled, interrupted or
drained) and exits with the code of that status, as run does. A dropped
connection is opened again from the last event received, so nothing is
missed or shown twice.

With --json, each event of the stream is printed as one JSON object per
line: {"id": ..., "event": ..., "data": ...}, the last one the "end" event.

` + exitCodesHelp,
		Example: `  superstep runs watch 5c1e8d0f
  superstep runs create assistant --input @examples/assistant/input.json --json | jq -r .run_id | xargs superstep runs watch`,
		Args: exactArgs("RUN_ID"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			ctx := c.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return watchRun(ctx, env, f.json, cl, args[0])
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: no limit)")
	return c
}

// watchLine is a stream message as --json prints it.
type watchLine struct {
	ID    string          `json:"id,omitempty"`
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// watchRun follows run id and prints it to env.Stdout; it returns the
// exit error of the run's final status.
func watchRun(ctx context.Context, env Env, asJSON bool, cl *client, id string) error {
	p := newProgress(env.Stdout)
	p.tokens = true
	enc := json.NewEncoder(env.Stdout)
	o := followOptions{
		Modes: []string{api.ModeEvents},
		OnEvent: func(m sseMessage) error {
			if asJSON {
				return enc.Encode(watchLine{ID: m.ID, Event: m.Event, Data: rawOrString(m.Data)})
			}
			switch m.Event {
			case "reset":
				var r api.StreamReset
				_ = json.Unmarshal(m.Data, &r)
				fmt.Fprintf(env.Stderr, "superstep: %s\n", r.Reason)
				return nil
			}
			var ev runs.StreamEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				return failed(fmt.Errorf("the stream of run %q holds an unreadable %s event: %w", id, m.Event, err))
			}
			p.observe(ev.Event)
			return nil
		},
		OnReconnect: func(lastID string, err error) {
			from := "the start"
			if lastID != "" {
				from = "event " + lastID
			}
			fmt.Fprintf(env.Stderr, "superstep: the stream of run %s broke (%v); reconnecting after %s\n", id, err, from)
		},
	}
	end, err := cl.follow(ctx, id, o)
	if errors.Is(err, errNoStream) {
		return failed(fmt.Errorf("the server at %s does not stream runs; use '%s runs show %s'", cl.base, progName(env), id))
	}
	if err != nil {
		return err
	}
	if asJSON {
		raw, err := json.Marshal(end)
		if err != nil {
			return failed(err)
		}
		if err := enc.Encode(watchLine{Event: "end", Data: raw}); err != nil {
			return err
		}
	} else {
		writeEnd(env.Stdout, progName(env), end)
	}
	if code := ExitCode(end.Status); code != ExitOK {
		return &ExitError{Code: code, Silent: true}
	}
	return nil
}

// rawOrString is data as JSON: itself when it is JSON, else a string.
func rawOrString(data []byte) json.RawMessage {
	if json.Valid(data) {
		return data
	}
	raw, _ := json.Marshal(string(data))
	return raw
}

// writeEnd prints what the user can do about a run that stopped.
func writeEnd(w io.Writer, prog string, end api.StreamEnd) {
	switch end.Status {
	case pregel.RunInterrupted:
		writeWaiting(w, prog, end.RunID, end.Interrupts)
	case pregel.RunDrained:
		fmt.Fprintf(w, "run %s drained at step %d; continue it with: %s runs resume %s\n", end.RunID, end.Step, prog, end.RunID)
	case pregel.RunFailed:
		if end.FailedNode != "" {
			fmt.Fprintf(w, "run %s failed in node %s: %s\n", end.RunID, end.FailedNode, oneLine(end.Error, 200))
		}
	}
}

// waitStream waits for run id to stop by following its stream, then
// reads its record. On a server that does not stream, it polls.
func waitStream(ctx context.Context, cl *client, id string, timeout time.Duration) (api.Run, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	// The messages mode sends least: the stream's end is all that is
	// needed.
	_, err := cl.follow(ctx, id, followOptions{Modes: []string{api.ModeMessages}})
	switch {
	case errors.Is(err, errNoStream):
		return waitRun(ctx, cl, id, 0)
	case err != nil && ctx.Err() != nil:
		var r api.Run
		_, _ = cl.do(context.WithoutCancel(ctx), http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, nil, &r)
		return r, failed(fmt.Errorf("run %q is still %s: %w", id, orDash(string(r.Status)), ctx.Err()))
	case err != nil:
		return api.Run{}, err
	}
	var r api.Run
	_, err = cl.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, nil, &r)
	return r, err
}
