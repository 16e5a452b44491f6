package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/superstep/superstep/pkg/internal/jsonin"
	"github.com/superstep/superstep/pkg/pregel"
)

// Bounds on the channel values a response embeds. They keep every response
// well under AWS Lambda's 6 MB response payload limit, the same way on
// every runtime; values left out are fetched whole, by parts, from the
// values endpoints (see README.md).
const (
	// MaxInlineValueBytes is the largest channel value (or input value)
	// a response embeds; a larger one is left out with an Omitted marker.
	MaxInlineValueBytes = 256 << 10
	// ValueBudgetBytes bounds the channel values embedded in one
	// response, all together; values past it are left out too.
	ValueBudgetBytes = 2 << 20
	// ValuePartBytes is the most one response of a values endpoint
	// carries: larger values are fetched in parts with Range requests.
	ValuePartBytes = 2 << 20
)

// Omitted replaces, in a response, a value that was left out: too large
// for the response, or nested deeper than jsonin.MaxDepth. The response
// also lists the names of the values left out (omitted_values,
// omitted_input), so a value that merely looks like a marker is not
// mistaken for one.
type Omitted struct {
	Omitted OmittedValue `json:"omitted"`
}

// OmittedValue describes a value left out of a response.
type OmittedValue struct {
	// Bytes is the size of the value's JSON.
	Bytes int `json:"bytes"`
	// Reason says why it was left out.
	Reason string `json:"reason"`
	// Href is where to GET the value (a path on this server; values
	// larger than ValuePartBytes are fetched with Range requests).
	Href string `json:"href"`
}

// ValueBudget hands out the bytes of channel values one response may
// embed. The zero value is not usable; create it with NewValueBudget.
type ValueBudget struct {
	left int
}

// NewValueBudget returns the budget of one response: ValueBudgetBytes.
func NewValueBudget() *ValueBudget { return &ValueBudget{left: ValueBudgetBytes} }

// Fit returns values with those that do not fit replaced by an Omitted
// marker whose href is href(channel), and the names of those left out,
// sorted. Values are taken smallest first, so that a large value does not
// crowd out the small ones. A value is left out when it is larger than
// MaxInlineValueBytes, nests deeper than jsonin.MaxDepth, or no longer
// fits the budget.
func (b *ValueBudget) Fit(values map[string]json.RawMessage, href func(channel string) string) (map[string]json.RawMessage, []string) {
	if len(values) == 0 {
		return values, nil
	}
	names := slices.Collect(maps.Keys(values))
	slices.SortFunc(names, func(x, y string) int {
		if d := len(values[x]) - len(values[y]); d != 0 {
			return d
		}
		return strings.Compare(x, y)
	})
	out := make(map[string]json.RawMessage, len(values))
	var omitted []string
	for _, ch := range names {
		raw := values[ch]
		reason := ""
		switch {
		case len(raw) > MaxInlineValueBytes:
			reason = fmt.Sprintf("larger than %d bytes", MaxInlineValueBytes)
		case jsonin.Depth(raw, jsonin.MaxDepth) > jsonin.MaxDepth:
			reason = fmt.Sprintf("nested deeper than %d levels", jsonin.MaxDepth)
		case len(raw) > b.left:
			reason = fmt.Sprintf("the response already carries %d bytes of values", ValueBudgetBytes-b.left)
		}
		if reason == "" {
			out[ch] = raw
			b.left -= len(raw)
			continue
		}
		marker, _ := json.Marshal(Omitted{OmittedValue{Bytes: len(raw), Reason: reason, Href: href(ch)}})
		out[ch] = marker
		omitted = append(omitted, ch)
	}
	slices.Sort(omitted)
	return out, omitted
}

// FitInput is Fit for a run's input, a JSON object of channel values: the
// input with the values that do not fit replaced by markers pointing at
// GET /v1/runs/{run_id}/input/{channel}.
func (b *ValueBudget) FitInput(runID string, input json.RawMessage) (json.RawMessage, []string) {
	var in map[string]json.RawMessage
	if len(input) == 0 || json.Unmarshal(input, &in) != nil || in == nil {
		if len(input) > MaxInlineValueBytes || jsonin.Depth(input, jsonin.MaxDepth) > jsonin.MaxDepth {
			// Not an object of channels (an old record, say): all or
			// nothing.
			marker, _ := json.Marshal(Omitted{OmittedValue{Bytes: len(input), Reason: "too large or too deep to embed", Href: InputHref(runID, "")}})
			return marker, []string{""}
		}
		return input, nil
	}
	fitted, omitted := b.Fit(in, func(ch string) string { return InputHref(runID, ch) })
	if len(omitted) == 0 {
		return input, nil
	}
	raw, err := json.Marshal(fitted)
	if err != nil {
		return nil, omitted
	}
	return raw, omitted
}

// FitInterrupts returns a run's pending interrupts with the payloads that
// do not fit replaced by markers pointing at
// GET /v1/runs/{run_id}/interrupts/{interrupt_id}, and the ids of those.
func (b *ValueBudget) FitInterrupts(runID string, ins []pregel.InterruptInfo) ([]pregel.InterruptInfo, []string) {
	if len(ins) == 0 {
		return ins, nil
	}
	values := make(map[string]json.RawMessage, len(ins))
	for _, in := range ins {
		values[in.ID] = in.Value
	}
	fitted, omitted := b.Fit(values, func(id string) string { return InterruptHref(runID, id) })
	if len(omitted) == 0 {
		return ins, nil
	}
	out := make([]pregel.InterruptInfo, len(ins))
	for i, in := range ins {
		out[i] = in
		out[i].Value = fitted[in.ID]
	}
	return out, omitted
}

// InterruptHref is the path of a pending interrupt's payload.
func InterruptHref(runID, interruptID string) string {
	return "/v1/runs/" + url.PathEscape(runID) + "/interrupts/" + url.PathEscape(interruptID)
}

// getInterrupt serves GET /v1/runs/{run_id}/interrupts/{interrupt_id}:
// the payload of a pending interrupt, whole or by byte range.
func (h *Handler) getInterrupt(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r); err != nil {
		return err
	}
	id, iid := r.PathValue("run_id"), r.PathValue("interrupt_id")
	run, err := h.svc.Get(r.Context(), id)
	if err != nil {
		return runErr(id, err)
	}
	var ids []string
	for _, in := range run.Interrupts {
		if in.ID == iid {
			value := in.Value
			if len(value) == 0 {
				value = json.RawMessage("null")
			}
			return h.serveValue(w, r, value, fmt.Sprintf("the payload of interrupt %q", iid))
		}
		ids = append(ids, in.ID)
	}
	if len(ids) == 0 {
		return notFoundf("run %q has no pending interrupt %q; it waits on none", id, iid)
	}
	return notFoundf("run %q has no pending interrupt %q; it waits on %s", id, iid, strings.Join(ids, ", "))
}

// ValueHref is the path of a channel's value at a step (a step number or
// "latest").
func ValueHref(runID, step, channel string) string {
	return "/v1/runs/" + url.PathEscape(runID) + "/checkpoints/" + url.PathEscape(step) + "/values/" + url.PathEscape(channel)
}

// InputHref is the path of the value a run's input gave a channel (the
// whole input when channel is empty).
func InputHref(runID, channel string) string {
	if channel == "" {
		return "/v1/runs/" + url.PathEscape(runID) + "/input"
	}
	return "/v1/runs/" + url.PathEscape(runID) + "/input/" + url.PathEscape(channel)
}

// getValue serves GET /v1/runs/{run_id}/checkpoints/{step}/values/{channel}:
// one channel's value, whole or by byte range.
func (h *Handler) getValue(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r); err != nil {
		return err
	}
	id, s, ch := r.PathValue("run_id"), r.PathValue("step"), r.PathValue("channel")
	step, err := parseStep(s)
	if err != nil {
		return err
	}
	if _, err := h.svc.Get(r.Context(), id); err != nil {
		return runErr(id, err)
	}
	cp, err := h.svc.Checkpoint(r.Context(), id, step)
	if err != nil {
		return err
	}
	raw, ok := cp.Values[ch]
	if !ok {
		return notFoundf("channel %q has no value at step %d of run %q; the channels with a value are %s", ch, cp.Step, id, channelList(cp.Values))
	}
	return h.serveValue(w, r, raw, fmt.Sprintf("the value of channel %q at step %d", ch, cp.Step))
}

// getInput serves GET /v1/runs/{run_id}/input[/{channel}]: the run's
// input, or the value it gave one channel.
func (h *Handler) getInput(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r); err != nil {
		return err
	}
	id, ch := r.PathValue("run_id"), r.PathValue("channel")
	run, err := h.svc.Get(r.Context(), id)
	if err != nil {
		return runErr(id, err)
	}
	input := run.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if ch == "" {
		return h.serveValue(w, r, input, fmt.Sprintf("the input of run %q", id))
	}
	var in map[string]json.RawMessage
	_ = json.Unmarshal(input, &in)
	raw, ok := in[ch]
	if !ok {
		return notFoundf("the input of run %q gives channel %q no value; it gives %s", id, ch, channelList(in))
	}
	return h.serveValue(w, r, raw, fmt.Sprintf("the input value of channel %q", ch))
}

func channelList(m map[string]json.RawMessage) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// serveValue answers with a JSON value: whole when it fits one response,
// else by parts. A Range header (one range, "bytes=FIRST-LAST",
// "bytes=FIRST-" or "bytes=-SUFFIX") gets 206 with at most ValuePartBytes
// of it and a Content-Range saying which; the client concatenates the
// parts.
func (h *Handler) serveValue(w http.ResponseWriter, r *http.Request, raw []byte, what string) error {
	hdr := w.Header()
	hdr.Set("Accept-Ranges", "bytes")
	size := int64(len(raw))
	spec := r.Header.Get("Range")
	if spec == "" {
		if size > ValuePartBytes {
			return &problem{Status: http.StatusBadRequest, Type: typeValueTooLarge, Title: "Value too large for one response",
				Detail: fmt.Sprintf("%s is %d bytes, more than one response carries (%d); fetch it in parts with a Range header: \"Range: bytes=0-%d\", then from byte %d on, and join them",
					what, size, ValuePartBytes, ValuePartBytes-1, ValuePartBytes)}
		}
		hdr.Set("Content-Type", "application/json")
		hdr.Set("Content-Length", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(raw)
		}
		return nil
	}
	first, last, ok := parseRange(spec, size)
	if !ok {
		hdr.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
		return &problem{Status: http.StatusRequestedRangeNotSatisfiable, Type: typeInvalidRequest, Title: "Range not satisfiable",
			Detail: fmt.Sprintf("range %q does not fit %s (%d bytes); ask for one range of bytes 0 to %d, as \"bytes=FIRST-LAST\"", spec, what, size, size-1)}
	}
	last = min(last, first+ValuePartBytes-1)
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
	hdr.Set("Content-Length", strconv.FormatInt(last-first+1, 10))
	w.WriteHeader(http.StatusPartialContent)
	if r.Method != http.MethodHead {
		_, _ = w.Write(raw[first : last+1])
	}
	return nil
}

// parseRange reads a single byte range of a value of size bytes.
func parseRange(spec string, size int64) (first, last int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(spec), "bytes=")
	if !found || strings.Contains(rest, ",") || size == 0 {
		return 0, 0, false
	}
	a, b, found := strings.Cut(strings.TrimSpace(rest), "-")
	if !found {
		return 0, 0, false
	}
	switch {
	case a == "":
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size - 1, true
	default:
		f, err := strconv.ParseInt(a, 10, 64)
		if err != nil || f < 0 || f >= size {
			return 0, 0, false
		}
		l := size - 1
		if b != "" {
			if l, err = strconv.ParseInt(b, 10, 64); err != nil || l < f {
				return 0, 0, false
			}
			l = min(l, size-1)
		}
		return f, l, true
	}
}

// parseStep reads a step number or "latest".
func parseStep(s string) (int, error) {
	if s == "latest" {
		return pregel.Latest, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, invalidf("step %q must be a step number (0, 1, ...) or \"latest\"", s)
	}
	return n, nil
}
