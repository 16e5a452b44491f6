package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	pb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/errordetails"

	"github.com/superstep/superstep/pkg/internal/jsonin"
)

// The HTTP+JSON (REST) binding of A2A 1.0 is served under each agent's
// URL, beside its JSON-RPC endpoint ({prefix}/{graph}):
//
//	POST {agent}/message:send
//	POST {agent}/message:stream                        (SSE)
//	GET  {agent}/tasks                                 ListTasks
//	GET  {agent}/tasks/{id}                            GetTask
//	POST {agent}/tasks/{id}:cancel                     CancelTask
//	GET|POST {agent}/tasks/{id}:subscribe              SubscribeToTask (SSE)
//	POST|GET {agent}/tasks/{id}/pushNotificationConfigs
//	GET|DELETE {agent}/tasks/{id}/pushNotificationConfigs/{configId}
//	GET  {agent}/extendedAgentCard
//
// a2a-go's REST transport (a2asrv.NewRESTHandler) does the binding; serveREST
// checks each request first as serveRPC does for JSON-RPC: the body's size,
// its JSON (jsonin: UTF-8, lone surrogates, depth, repeated keys), its
// params against their types, the query parameters, the version header
// and whether the server streams. Every error is the binding's error
// object ({"error": {"code", "status", "message", "details"}}), never a
// bare 500.

// restRoute is the A2A method a REST request names.
type restRoute struct {
	name      string // the A2A 1.0 method
	streaming bool
	body      func(json.RawMessage) error // checks the body; nil: no body is read
	// proto is the proto message of the body, whose proto field names
	// (message_id) are accepted beside the JSON names (protoNames).
	proto *protoMessage
	query []string // query parameters it takes (JSON names; proto names are accepted too)
	// legacy: a method of the A2A 0.3 binding (under /v1).
	legacy bool
}

// The proto messages of the request bodies (HTTP+JSON) and params
// (JSON-RPC 1.0).
var (
	sendProto      = newProtoMessage((*pb.SendMessageRequest)(nil))
	cancelProto    = newProtoMessage((*pb.CancelTaskRequest)(nil))
	subscribeProto = newProtoMessage((*pb.SubscribeToTaskRequest)(nil))
	pushProto      = newProtoMessage((*pb.TaskPushNotificationConfig)(nil))
	// and of the JSON-RPC 1.0 params that are no REST body
	getProto        = newProtoMessage((*pb.GetTaskRequest)(nil))
	listProto       = newProtoMessage((*pb.ListTasksRequest)(nil))
	getPushProto    = newProtoMessage((*pb.GetTaskPushNotificationConfigRequest)(nil))
	listPushProto   = newProtoMessage((*pb.ListTaskPushNotificationConfigsRequest)(nil))
	deletePushProto = newProtoMessage((*pb.DeleteTaskPushNotificationConfigRequest)(nil))
)

// restRouteFor finds the method of a REST request by its path under the
// agent and its HTTP method. allow is set when the path is known but the
// method is not.
func restRouteFor(method, path string) (rt restRoute, allow string, ok bool) {
	switch path {
	case "/message:send":
		return restRoute{name: "SendMessage", body: decodeAs[core.SendMessageRequest], proto: &sendProto}, "POST", method == http.MethodPost
	case "/message:stream":
		return restRoute{name: "SendStreamingMessage", streaming: true, body: decodeAs[core.SendMessageRequest], proto: &sendProto}, "POST", method == http.MethodPost
	case "/tasks":
		return restRoute{name: "ListTasks", query: []string{"contextId", "status", "pageSize", "pageToken", "historyLength", "statusTimestampAfter", "lastUpdatedAfter", "includeArtifacts"}}, "GET", method == http.MethodGet
	case "/extendedAgentCard":
		return restRoute{name: "GetExtendedAgentCard"}, "GET", method == http.MethodGet
	}
	rest, ok := strings.CutPrefix(path, "/tasks/")
	if !ok || rest == "" {
		return restRoute{}, "", false
	}
	id, sub, hasSub := strings.Cut(rest, "/")
	if !hasSub {
		switch {
		case strings.HasSuffix(id, ":cancel"):
			return restRoute{name: "CancelTask", body: decodeAs[core.CancelTaskRequest], proto: &cancelProto}, "POST", method == http.MethodPost
		case strings.HasSuffix(id, ":subscribe"):
			return restRoute{name: "SubscribeToTask", streaming: true, body: decodeAs[core.SubscribeToTaskRequest], proto: &subscribeProto}, "GET, POST", method == http.MethodGet || method == http.MethodPost
		case strings.Contains(id, ":"):
			return restRoute{}, "", false
		}
		return restRoute{name: "GetTask", query: []string{"historyLength"}}, "GET", method == http.MethodGet
	}
	switch cfg, rest, more := strings.Cut(sub, "/"); {
	case cfg != "pushNotificationConfigs" || strings.Contains(id, ":"):
	case !more:
		switch method {
		case http.MethodPost:
			return restRoute{name: "CreateTaskPushNotificationConfig", body: decodeAs[core.PushConfig], proto: &pushProto}, "GET, POST", true
		case http.MethodGet:
			return restRoute{name: "ListTaskPushNotificationConfigs", query: []string{"pageSize", "pageToken"}}, "GET, POST", true
		}
		return restRoute{}, "GET, POST", false
	case rest != "" && !strings.Contains(rest, "/"):
		switch method {
		case http.MethodGet:
			return restRoute{name: "GetTaskPushNotificationConfig"}, "GET, DELETE", true
		case http.MethodDelete:
			return restRoute{name: "DeleteTaskPushNotificationConfig"}, "GET, DELETE", true
		}
		return restRoute{}, "GET, DELETE", false
	}
	return restRoute{}, "", false
}

// serveREST checks a request of the HTTP+JSON binding and hands it to the
// SDK's REST transport with the agent's path prefix removed.
func (s *Server) serveREST(w http.ResponseWriter, r *http.Request) {
	a, ok := s.lookup(w, r)
	if !ok {
		return
	}
	base := s.prefix + "/" + r.PathValue("graph")
	path := strings.TrimPrefix(r.URL.Path, base)
	if !utf8.ValidString(path) {
		writeRESTError(w, http.StatusBadRequest, core.NewError(core.ErrInvalidRequest, "the request path is not valid UTF-8"))
		return
	}
	if path == a2av0.RESTPathPrefix || strings.HasPrefix(path, a2av0.RESTPathPrefix+"/") {
		s.serveREST03(w, r, a, base, path)
		return
	}
	rt, allow, ok := restRouteFor(r.Method, path)
	switch {
	case !ok && allow != "":
		w.Header().Set("Allow", allow)
		writeRESTError(w, http.StatusMethodNotAllowed, core.NewError(core.ErrMethodNotFound, fmt.Sprintf("%s %s is not an A2A method; this path takes %s", r.Method, r.URL.Path, allow)))
		return
	case !ok:
		writeRESTError(w, http.StatusNotFound, core.NewError(core.ErrMethodNotFound, fmt.Sprintf(
			"there is no A2A method at %s; the HTTP+JSON binding serves POST %s/message:send, POST %s/message:stream, GET %s/tasks, GET %s/tasks/{id}, POST %s/tasks/{id}:cancel, GET %s/tasks/{id}:subscribe and the push config methods under %s/tasks/{id}/pushNotificationConfigs; JSON-RPC is POST %s",
			r.URL.Path, base, base, base, base, base, base, base, base)))
		return
	}
	if v := strings.TrimSpace(r.Header.Get("A2A-Version")); v != "" && !supportedREST(v) {
		writeRESTError(w, http.StatusBadRequest, core.NewError(core.ErrVersionNotSupported, fmt.Sprintf("A2A-Version %q is not supported by the HTTP+JSON binding; it speaks A2A 1.0 (A2A 0.3 clients: JSON-RPC at %s, HTTP+JSON under %s%s)", v, base, base, a2av0.RESTPathPrefix)))
		return
	}
	if rt.streaming && !s.streaming {
		writeRESTError(w, http.StatusBadRequest, core.NewError(core.ErrUnsupportedOperation, fmt.Sprintf("%s is not supported: this server does not stream (the agent card says streaming: false); use POST %s/message:send, then GET %s/tasks/{id}", rt.name, base, base)))
		return
	}
	q, body, ok := s.readRESTRequest(w, r, rt)
	if !ok {
		return
	}
	ctx := r.Context()
	r2 := r.Clone(ctx)
	r2.URL.Path, r2.URL.RawPath = path, ""
	if q != nil {
		r2.URL.RawQuery = q.Encode()
	}
	if rt.body == nil || len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	a.rest.ServeHTTP(w, r2)
}

// supportedREST reports whether an A2A-Version header names the version
// the HTTP+JSON binding speaks: 1.x.
func supportedREST(v string) bool {
	v = strings.TrimPrefix(v, "v")
	return v == "1" || strings.HasPrefix(v, "1.")
}

// checkRESTQuery checks the query parameters a method reads, as the
// JSON-RPC endpoint checks the same fields of its params (the SDK's
// transport refuses malformed ones without saying which). A parameter
// may be named by its proto field name (history_length) as by its JSON
// name (historyLength), not by both. It returns the query to hand on when
// it differs from q (names rewritten to the JSON names the SDK reads),

// readRESTRequest checks a REST request's query and reads and checks its
// body for route rt (both bindings, 1.0 and 0.3). On a bad request it
// writes the binding's error and returns ok false.
func (s *Server) readRESTRequest(w http.ResponseWriter, r *http.Request, rt restRoute) (q url.Values, body []byte, ok bool) {
	q, qerr := checkRESTQuery(rt, r.URL.Query())
	if qerr != nil {
		writeRESTError(w, http.StatusBadRequest, qerr)
		return nil, nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeRESTError(w, http.StatusRequestEntityTooLarge, core.NewError(core.ErrInvalidRequest, fmt.Sprintf("the request is larger than %d bytes; send a smaller message", s.maxBody)))
			return nil, nil, false
		}
		writeRESTError(w, http.StatusBadRequest, core.NewError(core.ErrParseError, "could not read the request body"))
		return nil, nil, false
	}
	body, rerr := checkRESTBody(rt, body)
	if rerr != nil {
		writeRESTError(w, http.StatusBadRequest, rerr)
		return nil, nil, false
	}
	return q, body, true
}

// else nil.
func checkRESTQuery(rt restRoute, q url.Values) (url.Values, *core.Error) {
	changed := false
	for k, vs := range q {
		for _, v := range vs {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, core.NewError(core.ErrInvalidParams, "the query is not valid UTF-8")
			}
		}
	}
	for _, k := range rt.query {
		alias := snakeCase(k)
		if alias == k || k == "lastUpdatedAfter" || !q.Has(alias) {
			continue
		}
		if q.Has(k) {
			return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("query parameter %q is given twice, as %q and %q; give it once", k, alias, k))
		}
		q[k] = q[alias]
		delete(q, alias)
		changed = true
	}
	for k, vs := range q {
		if len(vs) > 1 && contains(rt.query, k) {
			return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("query parameter %q is given %d times; give it once", k, len(vs)))
		}
	}
	for _, k := range rt.query {
		if !q.Has(k) {
			continue
		}
		v := q.Get(k)
		switch k {
		case "pageSize":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100 {
				return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("pageSize %q must be a whole number between 1 and 100 (leave it out for 50)", v))
			}
		case "historyLength":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("historyLength %q must be a whole number, 0 or more", v))
			}
		case "statusTimestampAfter", "lastUpdatedAfter":
			if _, err := time.Parse(time.RFC3339, v); err != nil {
				return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("%s %q must be an RFC 3339 time such as 2025-01-02T15:04:05Z", k, v))
			}
		case "includeArtifacts":
			if _, err := strconv.ParseBool(v); err != nil {
				return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("includeArtifacts %q must be true or false", v))
			}
		}
	}
	if q.Has("lastUpdatedAfter") && !rt.legacy {
		// a2a-go v2.4.0's REST client names the filter lastUpdatedAfter,
		// its server (and the proto) statusTimestampAfter.
		if q.Has("statusTimestampAfter") {
			return nil, core.NewError(core.ErrInvalidParams, "query parameters \"statusTimestampAfter\" and \"lastUpdatedAfter\" name the same filter; give one")
		}
		q.Set("statusTimestampAfter", q.Get("lastUpdatedAfter"))
		q.Del("lastUpdatedAfter")
		changed = true
	}
	if !changed {
		return nil, nil
	}
	return q, nil
}

// snakeCase is the proto field name of a lowerCamelCase JSON name
// (historyLength → history_length).
func snakeCase(s string) string {
	var b strings.Builder
	for _, r := range s {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// checkRESTBody checks a request body as serveRPC checks JSON-RPC
// params: well-formed, UTF-8, no lone surrogates, not too deep, no
// repeated keys (jsonin), an object, and decodable as the method's
// request. Fields named by their proto names (message_id) are renamed to
// their JSON names (protoNames) first, and the renamed body, which it
// returns, is checked again. A method without a body takes none (or an
// empty object).
func checkRESTBody(rt restRoute, body []byte) ([]byte, *core.Error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		if rt.body != nil && (rt.name == "SendMessage" || rt.name == "SendStreamingMessage" || rt.name == "CreateTaskPushNotificationConfig") {
			return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("%s needs a JSON object in the request body", rt.name))
		}
		return body, nil
	}
	if err := checkJSON(body); err != nil {
		return nil, err
	}
	if trimmed[0] != '{' {
		return nil, core.NewError(core.ErrInvalidParams, "the request body must be a JSON object")
	}
	if rt.body == nil {
		if string(trimmed) != "{}" {
			return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("%s takes no request body (its parameters are in the path and the query)", rt.name))
		}
		return body, nil
	}
	if rt.proto != nil {
		renamed, err := protoNames(*rt.proto, trimmed)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(renamed, trimmed) {
			// Renaming may make keys that differ only in case.
			if err := checkJSON(renamed); err != nil {
				return nil, err
			}
			trimmed = renamed
		}
	}
	if err := rt.body(trimmed); err != nil {
		return nil, core.NewError(core.ErrInvalidParams, "invalid params: "+strings.TrimPrefix(jsonin.Explain(err), "json: "))
	}
	return trimmed, nil
}

// checkJSON checks a body with jsonin and for well-formed JSON.
func checkJSON(body []byte) *core.Error {
	if err := jsonin.Check(body); err != nil {
		if !utf8.Valid(body) {
			return core.NewError(core.ErrParseError, err.Error()) // JSON text is UTF-8
		}
		return core.NewError(core.ErrInvalidRequest, err.Error())
	}
	if !json.Valid(body) {
		return core.NewError(core.ErrParseError, "the request body is not valid JSON")
	}
	return nil
}

// restError is the HTTP+JSON binding's error object, as a2a-go's REST
// transport writes and reads it: a google.rpc.Status whose details hold a
// google.rpc.ErrorInfo with the A2A reason.
type restError struct {
	Error restStatus `json:"error"`
}

type restStatus struct {
	Code    int                   `json:"code"`
	Status  string                `json:"status"`
	Message string                `json:"message"`
	Details []*errordetails.Typed `json:"details"`
}

// writeRESTError writes err in the HTTP+JSON binding's error format with
// HTTP status code.
func writeRESTError(w http.ResponseWriter, code int, err *core.Error) {
	st := "INVALID_ARGUMENT"
	switch {
	case errors.Is(err, core.ErrTaskNotFound):
		st = "NOT_FOUND"
	case errors.Is(err, core.ErrUnsupportedOperation), errors.Is(err, core.ErrVersionNotSupported), errors.Is(err, core.ErrExtendedCardNotConfigured):
		st = "FAILED_PRECONDITION"
	case errors.Is(err, core.ErrMethodNotFound):
		st = "UNIMPLEMENTED"
	case errors.Is(err, core.ErrInternalError):
		st = "INTERNAL"
	case errors.Is(err, core.ErrUnauthenticated):
		st = "UNAUTHENTICATED"
	case errors.Is(err, core.ErrUnauthorized):
		st = "PERMISSION_DENIED"
	}
	body := restError{Error: restStatus{Code: code, Status: st, Message: err.Error(), Details: []*errordetails.Typed{
		errordetails.NewErrorInfo(core.ErrorReason(err), core.ProtocolDomain, map[string]string{"timestamp": time.Now().UTC().Format(time.RFC3339)}),
	}}}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
