package api

import (
	"encoding/json"
	"log/slog"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/superstep/superstep/pkg/pregel"
)

// inputSchema derives the JSON Schema of g's input from its state struct:
// an object whose properties are the channels, none required (a run's
// input sets any of them). It returns nil, logging why, when the state
// cannot be described (a channel of a type JSON Schema has no form for
// is left out).
func inputSchema(g *pregel.Graph, log *slog.Logger) json.RawMessage {
	t := g.StateType()
	if t == nil {
		return nil
	}
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{IgnoreInvalidTypes: true})
	if err != nil {
		log.Warn("derive a graph's input schema", "graph", g.Name(), "error", err)
		return nil
	}
	s.Required = nil
	raw, err := json.Marshal(s)
	if err != nil {
		log.Warn("encode a graph's input schema", "graph", g.Name(), "error", err)
		return nil
	}
	return raw
}
