//go:build !superstep.lambda

package superstep

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/api"
)

// sseMessage is one message of a server-sent event stream.
type sseMessage struct {
	ID    string // empty when the message carries none
	Event string // "message" when the message names none
	Data  []byte
}

// maxSSELine bounds one line of a stream (a "values" event carries the
// whole state).
const maxSSELine = 64 << 20

// readSSE reads messages from r and calls fn with each, until r ends or fn
// returns an error (returned as is). Comment lines are skipped.
func readSSE(r io.Reader, fn func(sseMessage) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	var (
		m       sseMessage
		data    strings.Builder
		hasData bool
	)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if hasData { // as in EventSource: a message without data is not dispatched
				if m.Event == "" {
					m.Event = "message"
				}
				m.Data = []byte(data.String())
				if err := fn(m); err != nil {
					return err
				}
			}
			m, hasData = sseMessage{}, false
			data.Reset()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			m.ID = value
		case "event":
			m.Event = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// errNoStream: the server does not stream runs (it answered 501); callers
// fall back to polling.
var errNoStream = errors.New("the server does not stream runs")

// streamIdle is how long a stream may stay silent before the client takes
// the connection for dead and reconnects: the server sends a heartbeat
// every api.DefaultHeartbeat.
const streamIdle = 3 * api.DefaultHeartbeat

// followOptions say how to follow a run's stream.
type followOptions struct {
	// Modes are the stream modes asked for (see api.ModeValues...).
	Modes []string
	// OnEvent is called with each message but the final "end" (which
	// follow returns); an error stops following and is returned.
	OnEvent func(sseMessage) error
	// OnReconnect, when set, is told of a lost connection before the
	// client reconnects.
	OnReconnect func(lastID string, err error)
	// Idle overrides streamIdle.
	Idle time.Duration
	// Attempts is how many connections in a row may fail without an
	// event before follow gives up (default 6).
	Attempts int
}

// follow reads the stream of run id until its "end" event, which it
// returns. A connection that drops, or stays silent for longer than the
// server's heartbeats allow, is opened again with Last-Event-ID, so that
// no event is missed or repeated.
func (c *client) follow(ctx context.Context, id string, o followOptions) (api.StreamEnd, error) {
	idle := cmp.Or(o.Idle, streamIdle)
	attempts := cmp.Or(o.Attempts, 6)
	var (
		lastID string
		fails  int
		delay  = 100 * time.Millisecond
	)
	for {
		var end *api.StreamEnd
		progressed := false
		err := c.streamOnce(ctx, id, o.Modes, lastID, idle, func(m sseMessage) error {
			progressed = true
			if m.ID != "" {
				lastID = m.ID
			}
			switch m.Event {
			case "end":
				var e api.StreamEnd
				if err := json.Unmarshal(m.Data, &e); err != nil {
					return failed(fmt.Errorf("the stream of run %q ended with an unreadable event: %w", id, err))
				}
				end = &e
				return errStreamDone
			case "error":
				var p api.Problem
				_ = json.Unmarshal(m.Data, &p)
				return fmt.Errorf("the server stopped the stream: %s", p.Detail)
			}
			if o.OnEvent != nil {
				return o.OnEvent(m)
			}
			return nil
		})
		if end != nil {
			return *end, nil
		}
		var ee *ExitError
		switch {
		case ctx.Err() != nil:
			return api.StreamEnd{}, failed(fmt.Errorf("stopped following run %q: %w", id, context.Cause(ctx)))
		case errors.Is(err, errNoStream), errors.As(err, &ee):
			return api.StreamEnd{}, err
		}
		if progressed {
			fails, delay = 0, 100*time.Millisecond
		}
		fails++
		if fails >= attempts {
			return api.StreamEnd{}, failed(fmt.Errorf("lost the stream of run %q after %d attempts: %w", id, fails, err))
		}
		if o.OnReconnect != nil {
			o.OnReconnect(lastID, err)
		}
		select {
		case <-ctx.Done():
			return api.StreamEnd{}, failed(fmt.Errorf("stopped following run %q: %w", id, context.Cause(ctx)))
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

var errStreamDone = errors.New("end of stream")

// streamOnce opens the stream once, after lastID, and reads it until it
// ends, fn returns an error, or nothing comes for idle. Errors the server
// answers before the stream are ExitErrors (4xx: usage) or errNoStream.
func (c *client) streamOnce(ctx context.Context, id string, modes []string, lastID string, idle time.Duration, fn func(sseMessage) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	u := *c.base
	u.Path += "/v1/runs/" + url.PathEscape(id) + "/stream"
	if len(modes) > 0 {
		u.RawQuery = url.Values{"mode": {strings.Join(modes, ",")}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return failed(fmt.Errorf("stream run %q: %w", id, err))
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	// The client's timeout bounds whole answers; a stream lasts as long
	// as the run, and the idle timer bounds its silences instead.
	hc := *c.http
	hc.Timeout = 0
	timer := time.AfterFunc(idle, func() { cancel(fmt.Errorf("no event or heartbeat for %s", idle)) })
	defer timer.Stop()
	resp, err := hc.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			return cause
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode == http.StatusNotImplemented {
			return errNoStream
		}
		ae := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(data, &ae.Problem) != nil || (ae.Problem.Detail == "" && ae.Problem.Title == "") {
			ae.Problem.Detail = fmt.Sprintf("the server answered %s: %s", resp.Status, oneLine(string(data), 200))
		}
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return badInput(ae)
		}
		return fmt.Errorf("stream run %q: %w", id, ae) // 5xx: try again
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return failed(fmt.Errorf("stream run %q: the server answered %q, not an event stream (is --server a superstep server?)", id, ct))
	}
	body := &idleReader{r: resp.Body, timer: timer, idle: idle}
	err = readSSE(body, fn)
	if errors.Is(err, errStreamDone) {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
		return cause
	}
	return err
}

// idleReader pushes back its timer on every read that returns data.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	idle  time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.timer.Reset(r.idle)
	}
	return n, err
}
