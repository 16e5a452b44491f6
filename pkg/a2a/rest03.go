package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	legacypb "github.com/a2aproject/a2a-go/a2apb"
	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2apb/v0/pbjson"
)

// The HTTP+JSON (REST) binding of A2A 0.3 is served under each agent's
// URL too, below a2av0.RESTPathPrefix ("/v1", as the 0.3 spec's method
// mapping has it):
//
//	POST {agent}/v1/message:send
//	POST {agent}/v1/message:stream                     (SSE)
//	GET  {agent}/v1/tasks/{id}
//	POST {agent}/v1/tasks/{id}:cancel
//	GET|POST {agent}/v1/tasks/{id}:subscribe           (SSE)
//	POST|GET {agent}/v1/tasks/{id}/pushNotificationConfigs
//	GET|DELETE {agent}/v1/tasks/{id}/pushNotificationConfigs/{configId}
//	GET  {agent}/v1/tasks                              (ListTasks, as a2a-go serves it)
//	GET  {agent}/v1/card                               (authenticated extended card: none)
//
// a2a-go's 0.3 compatibility transport (a2av0.NewRESTHandler) does the
// binding, calling the same handler as the other bindings; serveREST03
// applies serveREST's checks first. Bodies are the proto3 JSON of the 0.3
// proto (google.a2a.v1): a field is taken under its JSON name (messageId)
// or its proto name (message_id), as for 1.0.

// The proto messages of the 0.3 request bodies.
var (
	send03Proto = newProtoMessage((*legacypb.SendMessageRequest)(nil))
	push03Proto = newProtoMessage((*legacypb.CreateTaskPushNotificationConfigRequest)(nil))
)

// rest03RouteFor finds the method of a 0.3 REST request by its path
// under the agent (with its "/v1" prefix) and its HTTP method, as
// restRouteFor does for 1.0.
func rest03RouteFor(method, path string) (rt restRoute, allow string, ok bool) {
	p, found := strings.CutPrefix(path, a2av0.RESTPathPrefix)
	if !found || !strings.HasPrefix(p, "/") {
		return restRoute{}, "", false
	}
	if p == "/card" {
		return restRoute{name: "GetExtendedAgentCard", legacy: true}, "GET", method == http.MethodGet
	}
	rt, allow, ok = restRouteFor(method, p)
	rt.legacy = true
	switch rt.name {
	case "SendMessage", "SendStreamingMessage":
		rt.body, rt.proto = decodeAs[pbjson.SendMessageRequest], &send03Proto
	case "CreateTaskPushNotificationConfig":
		rt.body, rt.proto = checkPush03, &push03Proto
	case "CancelTask", "SubscribeToTask":
		// 0.3's CancelTaskRequest and TaskSubscriptionRequest hold the
		// task's resource name, which the path gives.
		rt.body, rt.proto = decodeAs[struct {
			Name string `json:"name"`
		}], nil
	case "ListTasks":
		// a2a-go's 0.3 transport names the time filter lastUpdatedAfter.
		rt.query = []string{"contextId", "status", "pageSize", "pageToken", "historyLength", "lastUpdatedAfter", "includeArtifacts"}
	case "GetExtendedAgentCard":
		return restRoute{}, "", false // 0.3 has it at /v1/card
	}
	return rt, allow, ok
}

// checkPush03 checks the body of a 0.3 push config create: a
// CreateTaskPushNotificationConfigRequest holding the config.
func checkPush03(raw json.RawMessage) error {
	var req pbjson.CreateTaskPushNotificationConfigRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return err
	}
	if req.Config == nil || req.Config.PushNotificationConfig == nil {
		return errors.New(`the body needs "config": {"pushNotificationConfig": {"url": …}} (a CreateTaskPushNotificationConfigRequest)`)
	}
	return nil
}

// serveREST03 checks a request of the 0.3 HTTP+JSON binding (path is
// under the agent, "/v1/…") and hands it to a2a-go's 0.3 REST transport.
func (s *Server) serveREST03(w http.ResponseWriter, r *http.Request, a *agent, base, path string) {
	rt, allow, ok := rest03RouteFor(r.Method, path)
	switch {
	case !ok && allow != "":
		w.Header().Set("Allow", allow)
		writeRESTError(w, http.StatusMethodNotAllowed, core.NewError(core.ErrMethodNotFound, fmt.Sprintf("%s %s is not an A2A method; this path takes %s", r.Method, r.URL.Path, allow)))
		return
	case !ok:
		v1 := base + a2av0.RESTPathPrefix
		writeRESTError(w, http.StatusNotFound, core.NewError(core.ErrMethodNotFound, fmt.Sprintf(
			"there is no A2A method at %s; the A2A 0.3 HTTP+JSON binding serves POST %s/message:send, POST %s/message:stream, GET %s/tasks/{id}, POST %s/tasks/{id}:cancel, GET %s/tasks/{id}:subscribe and the push config methods under %s/tasks/{id}/pushNotificationConfigs",
			r.URL.Path, v1, v1, v1, v1, v1, v1)))
		return
	}
	if v := strings.TrimSpace(r.Header.Get("A2A-Version")); v != "" && !supported03(v) {
		writeRESTError(w, http.StatusBadRequest, core.NewError(core.ErrVersionNotSupported, fmt.Sprintf("A2A-Version %q is not supported under %s%s: these paths speak A2A 0.3 (A2A 1.0's HTTP+JSON binding is at %s/message:send, %s/tasks/{id}, ...)", v, base, a2av0.RESTPathPrefix, base, base)))
		return
	}
	if rt.name == "GetExtendedAgentCard" {
		// As agent/getAuthenticatedExtendedCard over JSON-RPC 0.3.
		writeRESTError(w, http.StatusBadRequest, core.NewError(core.ErrExtendedCardNotConfigured, "this agent has no authenticated extended card (its card does not declare supportsAuthenticatedExtendedCard); read the public card at .well-known/agent-card.json"))
		return
	}
	if rt.streaming && !s.streaming {
		v1 := base + a2av0.RESTPathPrefix
		writeRESTError(w, http.StatusBadRequest, core.NewError(core.ErrUnsupportedOperation, fmt.Sprintf("%s is not supported: this server does not stream (the agent card says streaming: false); use POST %s/message:send, then GET %s/tasks/{id}", rt.name, v1, v1)))
		return
	}
	q, body, ok := s.readRESTRequest(w, r, rt)
	if !ok {
		return
	}
	// Push configs set here notify in 0.3's format, as those set with
	// JSON-RPC 0.3.
	r2 := r.Clone(withLegacy(r.Context()))
	r2.URL.Path, r2.URL.RawPath = path, ""
	if q != nil {
		r2.URL.RawQuery = q.Encode()
	}
	if rt.body == nil || len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	a.rest03.ServeHTTP(&jsonErrorWriter{ResponseWriter: w}, r2)
}

// supported03 reports whether an A2A-Version header names 0.3.
func supported03(v string) bool {
	v = strings.TrimPrefix(v, "v")
	return v == "0.3" || strings.HasPrefix(v, "0.3.")
}

// jsonErrorWriter labels the error objects of a2a-go's 0.3 REST transport
// as application/json. It writes them as application/problem+json, but
// they are google.rpc.Status objects ({"error": {...}}), not problem
// documents (RFC 9457), and a2a-go's own 0.3 REST client reads an error
// body only when it is labelled application/json: it would report any
// error as a bare "server error".
type jsonErrorWriter struct {
	http.ResponseWriter
}

func (w *jsonErrorWriter) WriteHeader(code int) {
	if h := w.Header(); isProblem(h.Get("Content-Type")) {
		h.Set("Content-Type", "application/json")
	}
	w.ResponseWriter.WriteHeader(code)
}

// Flush lets the SDK stream Server-Sent Events.
func (w *jsonErrorWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *jsonErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
