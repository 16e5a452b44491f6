package bedrocktest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
)

// EmbedRequest is an InvokeModel call an [EmbedServer] received: the
// model id and the Titan Text Embeddings V2 request body.
type EmbedRequest struct {
	ModelID    string
	InputText  string `json:"inputText"`
	Dimensions int    `json:"dimensions"`
	Normalize  bool   `json:"normalize"`
}

// EmbedServer is a fake of Bedrock's InvokeModel for Titan Text Embeddings
// V2: POST /model/{id}/invoke with {"inputText", "dimensions",
// "normalize"} answers {"embedding": [...], "inputTextTokenCount": n},
// the vector computed by the function given to [NewEmbed].
type EmbedServer struct {
	// URL is the server's base URL (the client's BaseEndpoint).
	URL string
	srv *httptest.Server
	fn  func(text string, dims int) []float32

	mu       sync.Mutex
	requests []EmbedRequest
}

// NewEmbed starts an EmbedServer whose vectors fn computes; fn gets the
// text and the dimensions asked for.
func NewEmbed(fn func(text string, dims int) []float32) *EmbedServer {
	s := &EmbedServer{fn: fn}
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *EmbedServer) Close() { s.srv.Close() }

// Client returns a bedrockruntime client of the server (as Server.Client).
func (s *EmbedServer) Client() *bedrockruntime.Client { return client(s.URL) }

// Requests returns the calls received so far.
func (s *EmbedServer) Requests() []EmbedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EmbedRequest(nil), s.requests...)
}

// ServeHTTP implements [http.Handler].
func (s *EmbedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/model/")
	id, ok := strings.CutSuffix(path, "/invoke")
	if r.Method != http.MethodPost || !ok {
		writeError(w, Error(404, "ResourceNotFoundException", "bedrocktest's EmbedServer serves POST /model/{id}/invoke, not "+r.URL.Path))
		return
	}
	var req EmbedRequest
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil || strings.TrimSpace(req.InputText) == "" {
		writeError(w, Error(400, "ValidationException", "Malformed input request: expected {\"inputText\": \"...\"}"))
		return
	}
	if req.Dimensions == 0 {
		req.Dimensions = 1024
	}
	if req.Dimensions != 256 && req.Dimensions != 512 && req.Dimensions != 1024 {
		writeError(w, Error(400, "ValidationException", fmt.Sprintf("Malformed input request: dimensions %d is not one of 256, 512, 1024", req.Dimensions)))
		return
	}
	req.ModelID = id
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"embedding":           s.fn(req.InputText, req.Dimensions),
		"inputTextTokenCount": len(strings.Fields(req.InputText)),
	})
}
