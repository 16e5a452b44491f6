package api

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/superstep/superstep/pkg/pregel"
)

// textInput turns the input of a create request into the graph's input
// when it is plain text (a JSON string) and the graph takes text
// (pregel.TextInput: an agent graph makes it a user message). Any other
// input is returned as is.
func textInput(g *pregel.Graph, input json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(input)
	if len(trimmed) == 0 || trimmed[0] != '"' {
		return input, nil
	}
	var text string
	if err := json.Unmarshal(trimmed, &text); err != nil {
		return nil, invalidf("input is not a valid JSON string")
	}
	out, err := g.InputFromText(text)
	switch {
	case errors.Is(err, pregel.ErrNoTextInput):
		return nil, invalidf("graph %q takes no text input: send input as a JSON object of channel values, e.g. {\"input\": {%q: …}}", g.Name(), first(g.Channels()))
	case err != nil:
		return nil, err // the graph's text function made a value that does not encode: a 500, logged
	}
	return out, nil
}

func first(s []string) string {
	if len(s) == 0 {
		return "channel"
	}
	return s[0]
}
