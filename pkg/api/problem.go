package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"

	"github.com/superstep/superstep/pkg/internal/jsonin"
	"github.com/superstep/superstep/pkg/runs"
)

// Problem is an RFC 9457 problem document, the body of every error
// response (Content-Type application/problem+json).
type Problem struct {
	// Type identifies the kind of problem; see the Type* constants.
	Type string `json:"type"`
	// Title is a short summary of the kind of problem.
	Title string `json:"title"`
	// Status repeats the HTTP status code.
	Status int `json:"status"`
	// Detail says what went wrong with this request and how to fix it.
	Detail string `json:"detail,omitempty"`
	// Instance is the path of the request.
	Instance string `json:"instance,omitempty"`
}

// Problem types.
const (
	typeInvalidRequest   = "urn:superstep:problem:invalid-request"
	typeNotFound         = "urn:superstep:problem:not-found"
	typeConflict         = "urn:superstep:problem:conflict"
	typeInvalidState     = "urn:superstep:problem:invalid-state"
	typeUnauthorized     = "urn:superstep:problem:unauthorized"
	typeForbidden        = "urn:superstep:problem:forbidden"
	typeMethodNotAllowed = "urn:superstep:problem:method-not-allowed"
	typeTooLarge         = "urn:superstep:problem:body-too-large"
	typeValueTooLarge    = "urn:superstep:problem:value-too-large"
	typeInternal         = "urn:superstep:problem:internal"

	titleInvalidRequest = "Invalid request"
	titleNotFound       = "Not found"
	titleUnauthorized   = "Unauthorized"
)

// problem is an error that carries its response.
type problem Problem

func (p *problem) Error() string { return p.Detail }

func invalidf(format string, args ...any) error {
	return &problem{Status: http.StatusBadRequest, Type: typeInvalidRequest, Title: titleInvalidRequest, Detail: fmt.Sprintf(format, args...)}
}

func notFoundf(format string, args ...any) error {
	return &problem{Status: http.StatusNotFound, Type: typeNotFound, Title: titleNotFound, Detail: fmt.Sprintf(format, args...)}
}

func internalProblem() *problem {
	return &problem{Status: http.StatusInternalServerError, Type: typeInternal, Title: "Internal server error", Detail: "internal error"}
}

// writeError answers with the problem err describes. Errors of the runs
// package map to 4xx with their message; anything else is logged and
// answered with a bare 500.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var p *problem
	if !errors.As(err, &p) {
		p = h.classify(r, err)
	}
	out := *p
	out.Instance = r.URL.Path
	writeProblem(w, &out)
}

func (h *Handler) classify(r *http.Request, err error) *problem {
	kinds := []struct {
		sentinel error
		status   int
		typ      string
		title    string
	}{
		{runs.ErrNotFound, http.StatusNotFound, typeNotFound, titleNotFound},
		{runs.ErrInvalid, http.StatusBadRequest, typeInvalidRequest, titleInvalidRequest},
		{runs.ErrInvalidState, http.StatusConflict, typeInvalidState, "Not allowed in the run's current status"},
		{runs.ErrConflict, http.StatusConflict, typeConflict, "Conflict"},
	}
	for _, k := range kinds {
		if errors.Is(err, k.sentinel) {
			if pub := runs.Public(err); pub != err {
				// The store's words name the store: they stay in the log.
				h.log.InfoContext(r.Context(), "api: request refused", "method", r.Method, "path", r.URL.Path, "error", err)
				err = pub
			}
			return &problem{Status: k.status, Type: k.typ, Title: k.title, Detail: detail(err, k.sentinel)}
		}
	}
	level := slog.LevelError
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		level = slog.LevelInfo // the client went away
	}
	h.log.Log(r.Context(), level, "api: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	return internalProblem()
}

// detail is err's message without the trailing ": <sentinel>" that the
// runs package appends, and with JSON type errors in words for the caller
// rather than in Go's.
func detail(err, sentinel error) string {
	msg := strings.TrimSuffix(jsonin.Explain(err), ": "+sentinel.Error())
	if msg == "" || msg == sentinel.Error() {
		return sentinel.Error()
	}
	return msg
}

func writeProblem(w http.ResponseWriter, p *problem) {
	body, _ := marshal(Problem(*p))
	hdr := w.Header()
	hdr.Set("Content-Type", "application/problem+json")
	hdr.Del("Content-Length")
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// writeJSON answers with v as JSON.
func (h *Handler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) error {
	body, err := marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
	return nil
}

// marshal encodes v followed by a newline, leaving <, > and & as they are
// (Mermaid arrows stay readable).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// decode reads a JSON request body into v, a pointer to a struct. An empty
// body leaves v untouched when allowEmpty is set. Every failure is a
// problem saying what to fix.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return &problem{Status: http.StatusRequestEntityTooLarge, Type: typeTooLarge, Title: "Request body too large",
				Detail: fmt.Sprintf("the request body exceeds %d bytes; send less (large inputs belong in external storage, referenced from the input)", mbe.Limit)}
		}
		h.log.DebugContext(r.Context(), "api: read request body", "path", r.URL.Path, "error", err)
		return invalidf("the request body could not be read whole: the client stopped sending it or sent it too slowly; send it again")
	}
	if err := jsonin.Check(data); err != nil {
		return invalidf("%s", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if allowEmpty {
			return nil
		}
		return invalidf("the request body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalidf("%s", describeJSONError(err, data, v))
	}
	if _, err := dec.Token(); err != io.EOF {
		line, col := position(data, dec.InputOffset())
		return invalidf("the request body has more data after its JSON object, at line %d, column %d; send a single JSON object", line, col)
	}
	return nil
}

// describeJSONError explains a decoding error in terms of the request.
func describeJSONError(err error, data []byte, v any) string {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		line, col := position(data, se.Offset)
		return fmt.Sprintf("the request body is not valid JSON: %s at line %d, column %d (byte offset %d)", se.Error(), line, col, se.Offset)
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if te.Field == "" {
			return fmt.Sprintf("the request body must be a JSON object, not %s", article(te.Value))
		}
		return jsonin.DescribeTypeError(te)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "the request body ends before its JSON object is complete"
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if fields := fieldNames(v); len(fields) > 0 {
			return fmt.Sprintf("unknown field %s in the request body; the fields are %s", name, strings.Join(fields, ", "))
		}
		return fmt.Sprintf("unknown field %s in the request body; this request takes no fields: send an empty body or {}", name)
	}
	return "the request body is not valid JSON: " + err.Error()
}

// position turns a byte offset into a 1-based line and column.
func position(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, max(col, 1)
}

func article(kind string) string {
	switch kind {
	case "object", "array":
		return "an " + kind
	case "string", "number", "bool":
		return "a " + kind
	}
	return kind
}

// fieldNames lists the JSON names of the fields of the struct v points to.
func fieldNames(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}
