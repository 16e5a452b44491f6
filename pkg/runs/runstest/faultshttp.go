package runstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// HTTPThreads is a ThreadAPI over superstep's HTTP API (/v1/threads,
// /v1/runs), at the address URL returns at each request (a server
// started again may listen elsewhere). A request refused before it was
// sent (the connection refused) is ErrUnavailable; one whose answer was
// lost (the connection broken, no complete answer) ErrOutcomeUnknown.
type HTTPThreads struct {
	URL    func() string
	Graph  string
	Client *http.Client
}

func (h *HTTPThreads) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.URL()+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	c := h.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		if refused(err) {
			return 0, fmt.Errorf("%s %s: %w (%v)", method, path, ErrUnavailable, err)
		}
		return 0, fmt.Errorf("%s %s: %w (%v)", method, path, ErrOutcomeUnknown, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w (%v)", method, path, ErrOutcomeUnknown, err)
	}
	if resp.StatusCode < 300 && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return 0, fmt.Errorf("%s %s: %w\n%s", method, path, err, raw)
		}
	}
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusConflict && resp.StatusCode != http.StatusNotFound {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, nil
}

// refused reports whether err is a connection refused: nothing was sent.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNREFUSED)
}

// CreateThread implements ThreadAPI.
func (h *HTTPThreads) CreateThread(ctx context.Context, thread string) error {
	_, err := h.do(ctx, "POST", "/v1/threads", map[string]string{"thread_id": thread}, nil)
	return err
}

// CreateRun implements ThreadAPI.
func (h *HTTPThreads) CreateRun(ctx context.Context, thread, run string, st runs.Strategy) error {
	body := map[string]any{"graph": h.Graph, "run_id": run, "input": map[string]any{"messages": []string{run}}, "strategy": st}
	code, err := h.do(ctx, "POST", "/v1/threads/"+url.PathEscape(thread)+"/runs", body, nil)
	switch {
	case err != nil:
		return err
	case code == http.StatusConflict:
		return ErrBusy
	case code == http.StatusNotFound:
		return fmt.Errorf("create run %s: thread %s not found", run, thread)
	}
	return nil
}

// Messages implements ThreadAPI.
func (h *HTTPThreads) Messages(ctx context.Context, thread string) ([]string, error) {
	var st runs.ThreadState
	code, err := h.do(ctx, "GET", "/v1/threads/"+url.PathEscape(thread)+"/state", nil, &st)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("state of %s: %d", thread, code)
	}
	return messages(st.Values)
}

func messages(values map[string]json.RawMessage) ([]string, error) {
	var msgs []string
	if raw, ok := values["messages"]; ok {
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return nil, fmt.Errorf("messages: %w", err)
		}
	}
	return msgs, nil
}

// Run implements ThreadAPI.
func (h *HTTPThreads) Run(ctx context.Context, id string) (RunView, error) {
	var r struct {
		Status          pregel.RunStatus           `json:"status"`
		SupersededBy    string                     `json:"superseded_by"`
		Discarded       bool                       `json:"discarded"`
		CancelRequested bool                       `json:"cancel_requested"`
		Values          map[string]json.RawMessage `json:"values"`
	}
	code, err := h.do(ctx, "GET", "/v1/runs/"+url.PathEscape(id), nil, &r)
	switch {
	case err != nil:
		return RunView{}, err
	case code == http.StatusNotFound:
		return RunView{}, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
	case code != http.StatusOK:
		return RunView{}, fmt.Errorf("run %s: %d", id, code)
	}
	msgs, err := messages(r.Values)
	return RunView{Status: r.Status, Discarded: r.Discarded, SupersededBy: r.SupersededBy, CancelRequested: r.CancelRequested, Messages: msgs}, err
}

// Events implements ThreadAPI.
func (h *HTTPThreads) Events(ctx context.Context, id string) ([]RunEvent, error) {
	var l struct {
		Events []RunEvent `json:"events"`
	}
	code, err := h.do(ctx, "GET", "/v1/runs/"+url.PathEscape(id)+"/events", nil, &l)
	switch {
	case err != nil:
		return nil, err
	case code == http.StatusNotFound:
		return nil, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
	case code != http.StatusOK:
		return nil, fmt.Errorf("events of run %s: %d", id, code)
	}
	return l.Events, nil
}

// Cancel implements ThreadAPI.
func (h *HTTPThreads) Cancel(ctx context.Context, id string) error {
	return h.change(ctx, id, "cancel", nil)
}

// Resume implements ThreadAPI.
func (h *HTTPThreads) Resume(ctx context.Context, id string) error {
	return h.change(ctx, id, "resume", map[string]any{"resume": "yes"})
}

func (h *HTTPThreads) change(ctx context.Context, id, what string, body any) error {
	code, err := h.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/"+what, body, nil)
	switch {
	case err != nil:
		return err
	case code == http.StatusConflict:
		return fmt.Errorf("%s %s: %w", what, id, runs.ErrInvalidState)
	case code == http.StatusNotFound:
		return fmt.Errorf("%s %s: %w", what, id, runs.ErrNotFound)
	}
	return nil
}
