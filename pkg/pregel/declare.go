package pregel

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// declarations are what a graph declares about its channels for the
// servers that run it: which channel holds its token usage, and how plain
// text becomes its input. Set by [UsageChannel] and [TextInput].
type declarations struct {
	usage     string
	textTo    string
	textValue func(text string) any
}

// check reports declarations naming channels the state does not have.
func (d *declarations) check(g *Graph) []error {
	var errs []error
	for _, c := range []struct{ what, ch string }{{"UsageChannel", d.usage}, {"TextInput", d.textTo}} {
		if c.ch != "" && !slices.Contains(g.channels, c.ch) {
			errs = append(errs, fmt.Errorf("%s names channel %q, which the state does not have; channels are %s", c.what, c.ch, strings.Join(g.channels, ", ")))
		}
	}
	if d.textTo != "" && d.textValue == nil {
		errs = append(errs, fmt.Errorf("TextInput into channel %q needs a function making the channel's value from the text", d.textTo))
	}
	return errs
}

// TokenUsage counts the tokens of model calls.
type TokenUsage struct {
	InputTokens      int `json:"input_tokens,omitempty"`
	OutputTokens     int `json:"output_tokens,omitempty"`
	TotalTokens      int `json:"total_tokens,omitempty"`
	CacheReadTokens  int `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

// Add returns u plus v.
func (u TokenUsage) Add(v TokenUsage) TokenUsage {
	return TokenUsage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		TotalTokens:      u.TotalTokens + v.TotalTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
	}
}

// UsageTotals is the token usage of a run: in total and per node. It is
// the value of the channel a graph declares with [UsageChannel].
type UsageTotals struct {
	Total  TokenUsage            `json:"total"`
	ByNode map[string]TokenUsage `json:"by_node,omitempty"`
}

// UsageChannel declares that channel holds the run's token usage, a
// [UsageTotals] (pkg/agent's graphs declare theirs). Servers show it with
// the run: the run record, the API and the CLI read it with
// [Graph.Usage].
func UsageChannel(channel string) CompileOption {
	return func(g *Graph) { g.decl.usage = channel }
}

// UsageChannel returns the channel declared with the [UsageChannel]
// option, or "" when the graph declares none.
func (g *Graph) UsageChannel() string { return g.decl.usage }

// Usage returns the token usage held in values (a checkpoint's or a
// result's), or nil when the graph declares no usage channel or the
// channel has no value yet.
func (g *Graph) Usage(values map[string]json.RawMessage) (*UsageTotals, error) {
	raw := values[g.decl.usage]
	if g.decl.usage == "" || isNull(raw) {
		return nil, nil
	}
	var u UsageTotals
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, fmt.Errorf("pregel: usage channel %q of graph %q does not hold token usage: %w", g.decl.usage, g.name, err)
	}
	return &u, nil
}

// ErrNoTextInput is returned by [Graph.InputFromText] for a graph that
// declares no [TextInput].
var ErrNoTextInput = errors.New("pregel: the graph takes no text input")

// TextInput declares that the graph accepts plain text as its input: a
// server given text (over /v1 or A2A) starts the run with
// {channel: value(text)}. pkg/agent's graphs declare their messages
// channel, value making one user message.
func TextInput(channel string, value func(text string) any) CompileOption {
	return func(g *Graph) { g.decl.textTo, g.decl.textValue = channel, value }
}

// TextChannel returns the channel plain text goes to (see [TextInput]),
// or "" when the graph takes no text.
func (g *Graph) TextChannel() string { return g.decl.textTo }

// InputFromText returns the input of a run started with text: a JSON
// object for [Graph.Start]. It returns an error wrapping ErrNoTextInput
// when the graph declares no [TextInput].
func (g *Graph) InputFromText(text string) (json.RawMessage, error) {
	if g.decl.textTo == "" {
		return nil, fmt.Errorf("%w: graph %q takes a JSON object of channel values (%s), not text", ErrNoTextInput, g.name, strings.Join(g.channels, ", "))
	}
	raw, err := json.Marshal(map[string]any{g.decl.textTo: g.decl.textValue(text)})
	if err != nil {
		return nil, fmt.Errorf("pregel: text input of graph %q: encode channel %q: %w", g.name, g.decl.textTo, err)
	}
	return raw, nil
}
