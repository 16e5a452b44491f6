package a2a

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"

	core "github.com/a2aproject/a2a-go/v2/a2a"
)

// BindingErrors returns next with the refusals it answers on the
// HTTP+JSON binding's paths rewritten in the binding's error object.
//
// The Server sits behind the API handler it is mounted on (and, on
// Lambda, a JWT check): a request without a valid token gets that
// handler's 401, a request with a foreign Host or from another origin
// its 403, both as problem documents (application/problem+json). An
// A2A REST client reads only the binding's error object
// (google.rpc.Status); a2a-go's reports a problem document as a bare
// "server error". BindingErrors rewrites a 401 or 403 problem document
// answered for a path under an agent's URL (the HTTP+JSON binding's;
// not the JSON-RPC endpoint, whose clients read the HTTP status, nor the
// card) as {"error": {"code": 401, "status": "UNAUTHENTICATED",
// "message": the problem's detail, "details": [ErrorInfo reason
// UNAUTHENTICATED]}} (403: PERMISSION_DENIED, reason UNAUTHORIZED),
// keeping the status and the other headers (WWW-Authenticate). a2a-go's
// client then returns a2a.ErrUnauthenticated or a2a.ErrUnauthorized.
// Every other answer passes through untouched.
//
// [Server.PublicCards] applies it to the handler it wraps; wrap with it
// anything that refuses in front of PublicCards too (the API handler's
// GuardHost, which guards the cards).
func (s *Server) BindingErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.isREST(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		rw := &refusalWriter{ResponseWriter: w}
		next.ServeHTTP(rw, r)
		rw.finish()
	})
}

// maxRefusalBody bounds what a refusal's problem document is read into.
const maxRefusalBody = 64 << 10

// refusalWriter holds back a 401 or 403 problem document and writes it
// again as the binding's error object (finish); every other response is
// written through as it comes.
type refusalWriter struct {
	http.ResponseWriter
	wrote  bool // WriteHeader was called (or implied)
	status int  // the refusal held back, 0 when none
	body   bytes.Buffer
}

func (w *refusalWriter) WriteHeader(code int) {
	if w.wrote {
		w.ResponseWriter.WriteHeader(code) // net/http logs the superfluous call
		return
	}
	w.wrote = true
	if (code == http.StatusUnauthorized || code == http.StatusForbidden) && isProblem(w.Header().Get("Content-Type")) {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusalWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.status == 0 {
		return w.ResponseWriter.Write(p)
	}
	if room := maxRefusalBody - w.body.Len(); room > 0 {
		w.body.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Flush passes on a flush of a response written through (a stream); a
// refusal held back is written by finish.
func (w *refusalWriter) Flush() {
	if w.status != 0 {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.wrote = true
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes the refusal held back, if any, as the binding's error
// object with the problem's detail as its message.
func (w *refusalWriter) finish() {
	if w.status == 0 {
		return
	}
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
	}
	_ = json.NewDecoder(io.LimitReader(&w.body, maxRefusalBody)).Decode(&p)
	msg := strings.TrimSpace(p.Detail)
	if msg == "" {
		msg = strings.TrimSpace(p.Title)
	}
	err := core.ErrUnauthenticated
	if w.status == http.StatusForbidden {
		err = core.ErrUnauthorized
	}
	if msg == "" {
		msg = map[bool]string{true: "this agent needs a valid bearer token", false: "this request is not allowed"}[w.status == http.StatusUnauthorized]
	}
	w.Header().Del("Content-Length")
	writeRESTError(w.ResponseWriter, w.status, core.NewError(err, msg))
}

// isProblem reports whether a Content-Type is a problem document's.
func isProblem(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/problem+json"
}
