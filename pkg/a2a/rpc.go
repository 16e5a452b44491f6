package a2a

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	legacy "github.com/a2aproject/a2a-go/a2a"
	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/superstep/superstep/pkg/internal/jsonin"
)

// JSON-RPC and A2A error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	codeUnsupported    = -32004

	codeVersionNotSupported       = -32009
	codeExtendedCardNotConfigured = -32007
)

// supportedVersion reports whether an A2A-Version header names a version
// served: 1.x or 0.3.
func supportedVersion(v string) bool {
	v = strings.TrimPrefix(v, "v")
	return v == "1" || strings.HasPrefix(v, "1.") || v == "0.3" || strings.HasPrefix(v, "0.3.")
}

// method describes one JSON-RPC method: its protocol version, whether it
// streams, and how its params are checked before the SDK's transport
// decodes them (the transport reports some malformed params as parse
// errors; checking first gives them the invalid-params code).
type method struct {
	legacy    bool // A2A 0.3
	streaming bool
	optional  bool // params may be absent
	// noResult: the method returns nothing, and the SDK then writes a
	// response without "result" (a2a-go v2.4.0 marshals a nil result with
	// omitempty), which JSON-RPC 2.0 §5 forbids: "result: This member is
	// REQUIRED on success". idWriter adds "result": null.
	noResult bool
	// list: the result is an array, and the 0.3 binding writes an empty
	// one as null (a nil slice); idWriter writes [].
	list  bool
	check func(json.RawMessage) error
	// proto is the proto message of a 1.0 method's params, whose proto
	// field names (message_id) are accepted beside the JSON names
	// (protoNames), as proto3 JSON parsers do.
	proto *protoMessage
}

func decodeAs[T any](raw json.RawMessage) error {
	var v T
	return json.Unmarshal(raw, &v)
}

func checkLegacySend(raw json.RawMessage) error {
	var p legacy.MessageSendParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return err
	}
	_, err := a2av0.ToV1SendMessageRequest(&p)
	return err
}

// lookupMethod describes the JSON-RPC methods served: A2A 1.0 names, then
// 0.3 names.
func lookupMethod(name string) (method, bool) {
	switch name {
	case "SendMessage":
		return method{check: decodeAs[core.SendMessageRequest], proto: &sendProto}, true
	case "SendStreamingMessage":
		return method{streaming: true, check: decodeAs[core.SendMessageRequest], proto: &sendProto}, true
	case "GetTask":
		return method{check: decodeAs[core.GetTaskRequest], proto: &getProto}, true
	case "ListTasks":
		return method{optional: true, check: decodeAs[core.ListTasksRequest], proto: &listProto}, true
	case "CancelTask":
		return method{check: decodeAs[core.CancelTaskRequest], proto: &cancelProto}, true
	case "SubscribeToTask":
		return method{streaming: true, check: decodeAs[core.SubscribeToTaskRequest], proto: &subscribeProto}, true
	case "GetTaskPushNotificationConfig":
		return method{check: decodeAs[core.GetTaskPushConfigRequest], proto: &getPushProto}, true
	case "CreateTaskPushNotificationConfig":
		return method{check: decodeAs[core.PushConfig], proto: &pushProto}, true
	case "ListTaskPushNotificationConfigs":
		return method{check: decodeAs[core.ListTaskPushConfigRequest], proto: &listPushProto}, true
	case "DeleteTaskPushNotificationConfig":
		return method{noResult: true, check: decodeAs[core.DeleteTaskPushConfigRequest], proto: &deletePushProto}, true
	case "GetExtendedAgentCard":
		return method{optional: true, check: decodeAs[core.GetExtendedAgentCardRequest]}, true

	case "message/send":
		return method{legacy: true, check: checkLegacySend}, true
	case "message/stream":
		return method{legacy: true, streaming: true, check: checkLegacySend}, true
	case "tasks/get":
		return method{legacy: true, check: decodeAs[legacy.TaskQueryParams]}, true
	case "tasks/cancel":
		return method{legacy: true, check: decodeAs[legacy.TaskIDParams]}, true
	case "tasks/resubscribe":
		return method{legacy: true, streaming: true, check: decodeAs[legacy.TaskIDParams]}, true
	case "tasks/pushNotificationConfig/get":
		return method{legacy: true, check: decodeAs[legacy.GetTaskPushConfigParams]}, true
	case "tasks/pushNotificationConfig/set":
		return method{legacy: true, check: decodeAs[legacy.TaskPushConfig]}, true
	case "tasks/pushNotificationConfig/list":
		return method{legacy: true, list: true, check: decodeAs[legacy.ListTaskPushConfigParams]}, true
	case "tasks/pushNotificationConfig/delete":
		return method{legacy: true, noResult: true, check: decodeAs[legacy.DeleteTaskPushConfigParams]}, true
	case "agent/getAuthenticatedExtendedCard":
		return method{legacy: true, optional: true}, true
	}
	return method{}, false
}

// serveRPC checks a JSON-RPC request and hands it to the SDK's transport
// for its protocol version: A2A 1.0 method names (SendMessage, ...) go to
// the 1.0 binding, 0.3 names (message/send, ...) to the 0.3 compatibility
// binding. Both call the same handler. Every error is a JSON-RPC error
// with the spec's code, never a 500.
func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request) {
	a, ok := s.lookup(w, r)
	if !ok {
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		// The agent's URL, read as a page, describes the agent: its card.
		s.serveCard(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeProblem(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("%s takes JSON-RPC requests by POST; the agent card is at %s%s", r.URL.Path, r.URL.Path, "/.well-known/agent-card.json"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeRPCError(w, nil, codeInvalidRequest, fmt.Sprintf("the request is larger than %d bytes; send a smaller message", s.maxBody))
			return
		}
		writeRPCError(w, nil, codeParse, "could not read the request body")
		return
	}
	if err := jsonin.Check(body); err != nil {
		code := codeInvalidRequest
		if !utf8.Valid(body) {
			code = codeParse // JSON text is UTF-8
		}
		writeRPCError(w, nil, code, err.Error())
		return
	}
	id, notification, params, name, m, rpcErr := parseEnvelope(body)
	switch {
	case rpcErr != nil && notification && rpcErr.code == codeMethodNotFound:
		// A well-formed notification gets no answer, not even an error.
		w.WriteHeader(http.StatusNoContent)
		return
	case rpcErr != nil:
		writeRPCError(w, id, rpcErr.code, rpcErr.msg)
		return
	}
	if v := strings.TrimSpace(r.Header.Get("A2A-Version")); v != "" && !supportedVersion(v) {
		rpcErr = &rpcError{codeVersionNotSupported, fmt.Sprintf("A2A-Version %q is not supported; this agent speaks A2A 1.0 and 0.3", v)}
	} else if m.streaming && !s.streaming {
		alt := "SendMessage or GetTask"
		if m.legacy {
			alt = "message/send or tasks/get"
		}
		rpcErr = &rpcError{codeUnsupported, fmt.Sprintf("%s is not supported: this server does not stream (the agent card says streaming: false); use %s", name, alt)}
	} else if params, rpcErr = rpcProtoNames(m, params); rpcErr == nil {
		rpcErr = checkParams(name, m, params)
	}
	if rpcErr != nil {
		if notification {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeRPCError(w, id, rpcErr.code, rpcErr.msg)
		return
	}
	if name == "agent/getAuthenticatedExtendedCard" && !notification {
		// 0.3 schema: AuthenticatedExtendedCardNotConfiguredError (-32007)
		// when the agent has none (1.0 answers UnsupportedOperationError:
		// handler.GetExtendedAgentCard).
		writeRPCError(w, id, codeExtendedCardNotConfigured, "this agent has no authenticated extended card (its card does not declare supportsAuthenticatedExtendedCard); read the public card at .well-known/agent-card.json")
		return
	}
	if notification && (name == "SendMessage" || name == "message/send") {
		// Nobody waits for the answer: do not hold the connection.
		params = nonBlocking(params, m.legacy)
	}
	// The SDK decodes the id into an interface (a number becomes a
	// float64: 2^64 would come back altered), so it gets a placeholder
	// string, replaced by the id as sent in what it writes.
	placeholder := newPlaceholder()
	fwd, err := json.Marshal(envelope{JSONRPC: "2.0", ID: placeholder, Method: name, Params: orEmpty(params)})
	if err != nil {
		s.log.ErrorContext(r.Context(), "a2a: re-encode request", "error", err)
		writeRPCError(w, id, codeInternal, "internal error")
		return
	}
	ctx := r.Context()
	if m.legacy {
		ctx = withLegacy(ctx) // push configs set here notify in 0.3's format
	}
	r2 := r.Clone(ctx)
	r2.Body = io.NopCloser(bytes.NewReader(fwd))
	r2.ContentLength = int64(len(fwd))
	var out http.ResponseWriter = &idWriter{ResponseWriter: w, placeholder: []byte(strconv.Quote(placeholder)), id: orNull(id), noResult: m.noResult, list: m.list, legacy: m.legacy}
	if notification {
		// Executed, but nothing is sent back (JSON-RPC 2.0: the server
		// must not reply to a notification). Streaming methods cannot
		// stream to nobody and do nothing.
		out = &discardWriter{header: http.Header{}}
	}
	if m.legacy {
		a.v03.ServeHTTP(out, r2)
	} else {
		a.v1.ServeHTTP(out, r2)
	}
	if notification {
		w.WriteHeader(http.StatusNoContent)
	}
}

// nonBlocking returns the params of a send with the configuration that
// makes it answer at once: returnImmediately (1.0), blocking false (0.3).
func nonBlocking(params json.RawMessage, legacy bool) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return params
	}
	var cfg map[string]json.RawMessage
	_ = json.Unmarshal(p["configuration"], &cfg)
	if cfg == nil {
		cfg = make(map[string]json.RawMessage)
	}
	if legacy {
		cfg["blocking"] = json.RawMessage("false")
	} else {
		cfg["returnImmediately"] = json.RawMessage("true")
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return params
	}
	p["configuration"] = raw
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// envelope is a JSON-RPC request as handed to the SDK's transport.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      string          `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

func orEmpty(params json.RawMessage) json.RawMessage {
	if len(params) == 0 || string(params) == "null" {
		// The SDK's transport cannot decode absent params.
		return json.RawMessage("{}")
	}
	return params
}

func orNull(id json.RawMessage) []byte {
	if len(id) == 0 {
		return []byte("null")
	}
	return id
}

// newPlaceholder returns a string no request or response holds by
// chance.
func newPlaceholder() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "superstep-rpc-id-" + hex.EncodeToString(b[:])
}

// idWriter puts the request's id, as sent, where the SDK wrote the
// placeholder: in each response, and in each event of a stream (the SDK
// writes an event's data in one Write).
type idWriter struct {
	http.ResponseWriter
	placeholder []byte
	id          []byte
	noResult    bool // add "result": null to a response without result or error
	list        bool // write a null or absent result as []
	legacy      bool // A2A 0.3: an error's data is an object (legacyErrorData)
}

func (w *idWriter) Write(p []byte) (int, error) {
	if w.legacy && bytes.Contains(p, []byte(`"data":[`)) {
		if fixed, ok := legacyErrorData(p); ok {
			if _, err := w.write(fixed); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return w.write(p)
}

// legacyErrorData rewrites the error of a JSON-RPC response, or of the
// Server-Sent Event that carries one, for A2A 0.3 clients: the 1.0
// binding writes an error's data as an array of details. The 0.3
// clients disagree on its shape: a2a-go v0.3.x decodes data into an
// object (and an array makes it lose the whole error, code and message),
// while the 0.3 transport of a2a-go v2 decodes it into an array. No value
// suits both, and data is optional in JSON-RPC 2.0 (§5.1): the error goes
// without it, its message saying what the details said. ok is false when
// p holds no such error.
func legacyErrorData(p []byte) (out []byte, ok bool) {
	prefix, body, suffix := []byte(nil), p, []byte(nil)
	if i := bytes.Index(p, []byte("data: ")); i >= 0 && !bytes.HasPrefix(bytes.TrimSpace(p), []byte("{")) {
		// An SSE event: "data: {json}\n\n".
		start := i + len("data: ")
		end := bytes.IndexByte(p[start:], '\n')
		if end < 0 {
			end = len(p) - start
		}
		prefix, body, suffix = p[:start], p[start:start+end], p[start+end:]
	}
	var resp map[string]json.RawMessage
	if json.Unmarshal(body, &resp) != nil || resp["error"] == nil {
		return nil, false
	}
	var e map[string]json.RawMessage
	if json.Unmarshal(resp["error"], &e) != nil {
		return nil, false
	}
	if d := bytes.TrimSpace(e["data"]); len(d) == 0 || d[0] != '[' {
		return nil, false
	}
	delete(e, "data")
	rewritten, err := json.Marshal(e)
	if err != nil {
		return nil, false
	}
	resp["error"] = rewritten
	fixed, err := json.Marshal(resp)
	if err != nil {
		return nil, false
	}
	if prefix == nil && bytes.HasSuffix(p, []byte("\n")) {
		fixed = append(fixed, '\n')
	}
	return append(append(append([]byte(nil), prefix...), fixed...), suffix...), true
}

func (w *idWriter) write(p []byte) (int, error) {
	if w.noResult || w.list {
		var m map[string]json.RawMessage
		if json.Unmarshal(p, &m) == nil && m["error"] == nil && (m["result"] == nil || w.list && string(m["result"]) == "null") {
			m["result"] = json.RawMessage("null")
			if w.list {
				m["result"] = json.RawMessage("[]")
			}
			if b, err := json.Marshal(m); err == nil {
				if _, err := w.ResponseWriter.Write(bytes.ReplaceAll(b, w.placeholder, w.id)); err != nil {
					return 0, err
				}
				return len(p), nil
			}
		}
	}
	if bytes.Contains(p, w.placeholder) {
		if _, err := w.ResponseWriter.Write(bytes.ReplaceAll(p, w.placeholder, w.id)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Flush lets the SDK stream Server-Sent Events.
func (w *idWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *idWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// discardWriter takes the response to a notification and drops it. It is
// no http.Flusher, so streaming methods do not start.
type discardWriter struct{ header http.Header }

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

type rpcError struct {
	code int
	msg  string
}

// parseEnvelope checks the JSON-RPC envelope and finds its method. id is
// the request id as sent when it could be read (nil otherwise);
// notification is set when the request has no id member at all.
func parseEnvelope(body []byte) (id json.RawMessage, notification bool, params json.RawMessage, name string, m method, err *rpcError) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, false, nil, "", m, &rpcError{codeParse, "the request body is empty; send a JSON-RPC 2.0 request object"}
	}
	if !json.Valid(trimmed) {
		return nil, false, nil, "", m, &rpcError{codeParse, "the request body is not valid JSON"}
	}
	if trimmed[0] == '[' {
		return nil, false, nil, "", m, &rpcError{codeInvalidRequest, "batch requests are not supported; send one JSON-RPC request object"}
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(trimmed, &env) != nil || env == nil {
		return nil, false, nil, "", m, &rpcError{codeInvalidRequest, "the request must be a JSON-RPC 2.0 request object"}
	}
	raw, hasID := env["id"]
	if hasID {
		switch t := bytes.TrimSpace(raw); {
		case string(t) == "null":
		case len(t) > 0 && (t[0] == '"' || t[0] == '-' || (t[0] >= '0' && t[0] <= '9')):
			id = t
		default:
			return nil, false, nil, "", m, &rpcError{codeInvalidRequest, "id must be a string, a number or null"}
		}
	}
	var version string
	if json.Unmarshal(env["jsonrpc"], &version) != nil || version != "2.0" {
		return id, false, nil, "", m, &rpcError{codeInvalidRequest, `"jsonrpc" must be "2.0"`}
	}
	if json.Unmarshal(env["method"], &name) != nil || name == "" {
		return id, false, nil, "", m, &rpcError{codeInvalidRequest, `"method" must be a non-empty string`}
	}
	m, ok := lookupMethod(name)
	if !ok {
		return id, !hasID, nil, name, m, &rpcError{codeMethodNotFound, fmt.Sprintf("method %q is not an A2A method; use SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask or SubscribeToTask (A2A 1.0), or message/send, message/stream, tasks/get, tasks/cancel or tasks/resubscribe (A2A 0.3)", name)}
	}
	return id, !hasID, bytes.TrimSpace(env["params"]), name, m, nil
}

// rpcProtoNames renames the proto field names of a 1.0 method's params
// to their JSON names (protoNames), and checks the renamed params again
// with jsonin (renaming may make keys that differ only in case).
func rpcProtoNames(m method, params json.RawMessage) (json.RawMessage, *rpcError) {
	if m.proto == nil || len(params) == 0 || params[0] != '{' {
		return params, nil
	}
	renamed, err := protoNames(*m.proto, params)
	if err != nil {
		return nil, &rpcError{codeInvalidRequest, err.Message}
	}
	if bytes.Equal(renamed, params) {
		return params, nil
	}
	if err := jsonin.Check(renamed); err != nil {
		return nil, &rpcError{codeInvalidRequest, err.Error()}
	}
	return renamed, nil
}

// checkParams checks the params of a call to m.
func checkParams(name string, m method, params json.RawMessage) *rpcError {
	if len(params) == 0 || string(params) == "null" {
		if m.optional {
			return nil
		}
		return &rpcError{codeInvalidParams, fmt.Sprintf("%s needs params", name)}
	}
	if params[0] != '{' {
		return &rpcError{codeInvalidParams, "params must be a JSON object"}
	}
	if m.check != nil {
		if err := m.check(params); err != nil {
			return &rpcError{codeInvalidParams, "invalid params: " + strings.TrimPrefix(jsonin.Explain(err), "json: ")}
		}
	}
	if name == "ListTasks" {
		// An explicit pageSize must be 1 to 100 (spec 1.0 ListTasksRequest);
		// the SDK reads 0 as "not given" (50), so check it here.
		var p struct {
			PageSize *int `json:"pageSize"`
		}
		if json.Unmarshal(params, &p) == nil && p.PageSize != nil && *p.PageSize == 0 {
			return &rpcError{codeInvalidParams, "pageSize 0 must be between 1 and 100 (leave it out for 50)"}
		}
	}
	return nil
}

// writeRPCError writes a JSON-RPC error response (HTTP 200, as JSON-RPC
// clients expect).
func writeRPCError(w http.ResponseWriter, id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id}
	resp.Error.Code, resp.Error.Message = code, msg
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// writeProblem writes an RFC 9457 problem, as the HTTP API does, for
// requests that are not JSON-RPC calls (unknown agent, wrong method).
func writeProblem(w http.ResponseWriter, r *http.Request, status int, detail string) {
	typ, title := "urn:superstep:problem:not-found", "Not found"
	if status == http.StatusMethodNotAllowed {
		typ, title = "urn:superstep:problem:method-not-allowed", "Method not allowed"
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": typ, "title": title, "status": status, "detail": detail, "instance": r.URL.Path})
}
