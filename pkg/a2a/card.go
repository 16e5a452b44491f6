package a2a

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// bearerScheme names the security scheme of cards under WithBearerAuth.
const bearerScheme = "bearer"

// serveCard serves GET {prefix}/{graph}/.well-known/agent-card.json. The
// card is the union of the 1.0 and 0.3 formats (the SDK's compatibility
// producer), so that clients of either version can read it; it lists the
// same JSON-RPC endpoint once per protocol version. The two formats
// disagree only on securitySchemes (present under WithBearerAuth): see
// cardJSON.
func (s *Server) serveCard(w http.ResponseWriter, r *http.Request) {
	a, ok := s.lookup(w, r)
	if !ok {
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Add("Vary", "A2A-Version")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodOptions:
		h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Content-Type, A2A-Version")
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		h.Set("Allow", "GET, HEAD, OPTIONS")
		writeProblem(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("%s is read with GET", r.URL.Path))
		return
	}
	card := s.card(a, s.endpoint(r, a.graph.Name()))
	raw, err := cardJSON(r, card)
	if err != nil {
		s.log.ErrorContext(r.Context(), "a2a: encode agent card", "graph", a.graph.Name(), "error", err)
		writeRPCError(w, nil, codeInternal, "internal error")
		return
	}
	h.Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// cardJSON encodes a card in the union of the 1.0 and 0.3 formats. The
// two differ on securitySchemes: a request saying A2A-Version 1.x gets
// them in the 1.0 format; any other, and one without the header (spec 1.0
// §3.6.2: "Agents MUST interpret empty value as 0.3 version"), gets them
// in the 0.3 format ({"type": "http", "scheme": "Bearer"}), each scheme
// also carrying its 1.0 form (httpAuthSecurityScheme), which 0.3 parsers
// ignore, so that 1.0 clients that send no header can read it too.
func cardJSON(r *http.Request, card *core.AgentCard) ([]byte, error) {
	p, ok := a2av0.NewStaticAgentCardProducer(card).(a2asrv.AgentCardJSONProducer)
	if !ok {
		return json.Marshal(card)
	}
	raw, err := p.CardJSON(r.Context())
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if err := listPreferred(m); err != nil {
		return nil, err
	}
	if len(card.SecuritySchemes) == 0 {
		return json.MarshalIndent(m, "", "  ")
	}
	v1, err := json.Marshal(card.SecuritySchemes)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(r.Header.Get("A2A-Version"), "1.") {
		m["securitySchemes"] = v1
		return json.MarshalIndent(m, "", "  ")
	}
	// The 0.3 schemes, each with its 1.0 form added.
	var v03, v10 map[string]map[string]json.RawMessage
	if err := json.Unmarshal(m["securitySchemes"], &v03); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(v1, &v10); err != nil {
		return nil, err
	}
	for name, scheme := range v03 {
		for k, v := range v10[name] {
			if _, clash := scheme[k]; !clash {
				scheme[k] = v
			}
		}
	}
	if m["securitySchemes"], err = json.Marshal(v03); err != nil {
		return nil, err
	}
	return json.MarshalIndent(m, "", "  ")
}

// listPreferred adds the 0.3 card's main interface (url,
// preferredTransport) to its additionalInterfaces, where a2a-go lists
// only the others: the 0.3 schema's AgentCard.additionalInterfaces
// "SHOULD include an entry matching the main 'url' and
// 'preferredTransport'", so that a client reading that list alone sees
// every binding.
func listPreferred(m map[string]json.RawMessage) error {
	var main struct {
		URL       string `json:"url"`
		Transport string `json:"transport"`
	}
	if json.Unmarshal(m["url"], &main.URL) != nil || json.Unmarshal(m["preferredTransport"], &main.Transport) != nil || main.URL == "" {
		return nil
	}
	var more []json.RawMessage
	if raw, ok := m["additionalInterfaces"]; ok {
		if err := json.Unmarshal(raw, &more); err != nil {
			return err
		}
	}
	first, err := json.Marshal(main)
	if err != nil {
		return err
	}
	all, err := json.Marshal(append([]json.RawMessage{first}, more...))
	if err != nil {
		return err
	}
	m["additionalInterfaces"] = all
	return nil
}

// PublicCards returns a handler that serves the agent cards itself and
// hands every other request to next: mount the Server on an API handler
// that requires a bearer token, and put PublicCards in front of it, so
// that clients can read a card (which declares the token it needs)
// before they have the token:
//
//	h, err := api.New(api.Config{Service: svc, Token: token})
//	if err != nil {
//		return err
//	}
//	srv, err := a2a.New(svc, a2a.WithBearerAuth(true))
//	if err != nil {
//		return err
//	}
//	h.Handle(a2a.Pattern, srv)
//	http.ListenAndServe(addr, srv.PublicCards(h))
//
// The refusals of next on the HTTP+JSON binding's paths (401 without a
// valid token, 403) are written in the binding's error object
// ([Server.BindingErrors]).
func (s *Server) PublicCards(next http.Handler) http.Handler {
	next = s.BindingErrors(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			rest, ok := strings.CutPrefix(r.URL.Path, s.prefix+"/")
			graph, _ := strings.CutSuffix(rest, a2asrv.WellKnownAgentCardPath)
			if ok && graph != "" && !strings.Contains(graph, "/") {
				// The card, at its well-known path or at the agent's URL.
				s.ServeHTTP(w, r)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// endpoint is the public URL of a graph's JSON-RPC endpoint.
func (s *Server) endpoint(r *http.Request, graph string) string {
	base := s.baseURL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		host := r.Host
		if p := firstValue(r.Header.Get("X-Forwarded-Proto")); s.trustProto && (p == "http" || p == "https") {
			scheme = p
		}
		if h := firstValue(r.Header.Get("X-Forwarded-Host")); s.trustForwarded && h != "" {
			host = h
		}
		base = scheme + "://" + host
	}
	return base + s.prefix + "/" + url.PathEscape(graph)
}

func firstValue(h string) string {
	v, _, _ := strings.Cut(h, ",")
	return strings.TrimSpace(v)
}

// AgentCard returns the agent card of graph, its JSON-RPC endpoint being
// at endpoint (e.g. "https://host/a2a/triage"), and false if the graph is
// not served.
func (s *Server) AgentCard(graph, endpoint string) (*core.AgentCard, bool) {
	a, ok := s.agents[graph]
	if !ok {
		return nil, false
	}
	return s.card(a, endpoint), true
}

// interfaces lists where an agent is served, JSON-RPC first (the
// binding clients prefer when they speak several): JSON-RPC 1.0 and
// HTTP+JSON 1.0 at the agent's URL, gRPC 1.0 at WithGRPCAddress (the
// graph as tenant) when it is set, and JSON-RPC 0.3 and HTTP+JSON 0.3
// (whose paths a client puts under "/v1") at the agent's URL. The 0.3
// form of the card (url, preferredTransport, additionalInterfaces) takes
// the 0.3 interfaces only: a 0.3 client is not offered bindings it would
// speak in 1.0.
func (s *Server) interfaces(graph, endpoint string) []*core.AgentInterface {
	out := []*core.AgentInterface{
		{URL: endpoint, ProtocolBinding: core.TransportProtocolJSONRPC, ProtocolVersion: core.Version},
		{URL: endpoint, ProtocolBinding: core.TransportProtocolHTTPJSON, ProtocolVersion: core.Version},
	}
	if s.grpcAddr != "" {
		out = append(out, &core.AgentInterface{URL: s.grpcAddress(endpoint), ProtocolBinding: core.TransportProtocolGRPC, ProtocolVersion: core.Version, Tenant: graph})
	}
	return append(out,
		&core.AgentInterface{URL: endpoint, ProtocolBinding: core.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
		&core.AgentInterface{URL: endpoint, ProtocolBinding: core.TransportProtocolHTTPJSON, ProtocolVersion: a2av0.Version})
}

// card is the agent card of a graph served at endpoint. Its skills
// describe the graph (its description, how to give it input, its steps)
// and each of its nodes; its capabilities claim only what the Server does:
// streaming as WithStreaming says, push notifications as
// WithPushNotifications says, no extended card.
func (s *Server) card(a *agent, endpoint string) *core.AgentCard {
	g := a.graph
	desc := g.Description()
	if desc == "" {
		desc = fmt.Sprintf("Runs the superstep graph %q.", g.Name())
	}
	inputModes := []string{"application/json"}
	howTo := fmt.Sprintf("Input: a data part holding a JSON object of channel values (channels: %s).", strings.Join(g.Channels(), ", "))
	switch {
	case a.declared:
		inputModes = append(inputModes, "text/plain")
		howTo += fmt.Sprintf(" Text parts become the graph's text input in channel %q (for an agent, a user message).", a.text)
	case a.text != "":
		inputModes = append(inputModes, "text/plain")
		howTo += fmt.Sprintf(" Text parts are written to channel %q.", a.text)
	}
	if s.threads() {
		howTo += " Messages with the same contextId (and no taskId) continue one conversation: each task starts from the state the one before it left."
	}
	howTo += " Output: the final state as a data artifact."
	nodes := g.Nodes()
	steps := make([]string, 0, len(nodes))
	tags := []string{"superstep", "graph"}
	for _, n := range nodes {
		steps = append(steps, n.ID)
		tags = append(tags, n.ID)
	}
	skills := []core.AgentSkill{{
		ID:          g.Name(),
		Name:        g.Name(),
		Description: fmt.Sprintf("%s %s Steps: %s.", desc, howTo, strings.Join(steps, ", ")),
		Tags:        tags,
		InputModes:  inputModes,
		OutputModes: []string{"application/json"},
	}}
	for _, n := range nodes {
		name := n.Name
		if name == "" {
			name = n.ID
		}
		d := n.Description
		if d == "" {
			d = fmt.Sprintf("Step %q of graph %q.", n.ID, g.Name())
		}
		skills = append(skills, core.AgentSkill{
			ID:          g.Name() + "." + n.ID,
			Name:        name,
			Description: d,
			Tags:        []string{"superstep", "step"},
		})
	}
	card := &core.AgentCard{
		Name:                g.Name(),
		Description:         desc,
		Version:             s.version,
		Provider:            s.provider,
		SupportedInterfaces: s.interfaces(g.Name(), endpoint),
		Capabilities:        core.AgentCapabilities{Streaming: s.streaming, PushNotifications: s.push != nil},
		DefaultInputModes:   inputModes,
		DefaultOutputModes:  []string{"application/json"},
		Skills:              skills,
	}
	if s.bearer {
		card.SecuritySchemes = core.NamedSecuritySchemes{
			bearerScheme: core.HTTPAuthSecurityScheme{Scheme: "Bearer", Description: "the server's bearer token"},
		}
		card.SecurityRequirements = core.SecurityRequirementsOptions{{bearerScheme: core.SecuritySchemeScopes{}}}
	}
	return card
}
