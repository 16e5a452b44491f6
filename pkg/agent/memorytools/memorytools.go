// Package memorytools gives an agent (pkg/agent) a long-term memory: the
// tools remember, recall and forget on a pkg/longterm Store, in a
// namespace made from a template such as "users/{user_id}/memories" whose
// placeholders the run's thread fills. They are ordinary tools: their
// calls and results are recorded in the conversation like any other.
//
// Retries and re-runs: a tool's writes to the store are side effects
// outside the run's checkpoint. They are idempotent by key: remember puts
// the memory under a key the model names or one derived from the text
// itself (a hash), so a task retried after a crash, or re-run from an
// earlier step, puts the same item again and leaves the store as one
// call would; forget deletes by key, which a second time does nothing.
// What a re-run does not undo is a write the first run made and the
// re-run no longer makes (a fork that takes another path): memories are
// not versioned with the thread.
package memorytools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Config configures the tools.
type Config struct {
	// Namespace is where the memories go: a template whose placeholders
	// ({user_id}) take the values of the run's scope (see
	// longterm.ScopeFunc and ThreadScope). Required.
	Namespace longterm.Template
	// Store, when set, is the store; otherwise the tools use the one the
	// runtime puts in the node's context (longterm.From).
	Store *longterm.Store
	// TTL, when set, makes each memory expire that long after it is
	// remembered (or remembered again).
	TTL time.Duration
	// RecallLimit is the most memories recall returns (default 5).
	RecallLimit int
}

// New returns the tools remember, recall and forget.
func New(cfg Config) ([]agent.Tool, error) {
	if _, err := cfg.Namespace.Placeholders(); err != nil {
		return nil, fmt.Errorf("memorytools: %w", err)
	}
	if strings.Trim(string(cfg.Namespace), "/") == "" {
		return nil, errors.New("memorytools: Config.Namespace is empty: give a template such as users/{user_id}/memories")
	}
	if cfg.RecallLimit <= 0 {
		cfg.RecallLimit = 5
	}
	t := &tools{cfg: cfg}
	remember, err := agent.NewTool("remember", "Remember a fact or preference about the user for later conversations. Give a short key (such as favorite_color) to replace an earlier memory of the same thing.", t.remember)
	if err != nil {
		return nil, err
	}
	recall, err := agent.NewTool("recall", "Recall memories about the user relevant to a query, from earlier conversations.", t.recall)
	if err != nil {
		return nil, err
	}
	forget, err := agent.NewTool("forget", "Forget a memory, by the key recall returned.", t.forget)
	if err != nil {
		return nil, err
	}
	return []agent.Tool{remember, recall, forget}, nil
}

type tools struct{ cfg Config }

// RememberInput is remember's input.
type RememberInput struct {
	Memory string `json:"memory" jsonschema:"the fact or preference to remember, as a sentence"`
	Key    string `json:"key,omitempty" jsonschema:"a short name for it (such as favorite_color); an earlier memory with this key is replaced"`
}

// RecallInput is recall's input.
type RecallInput struct {
	Query string `json:"query" jsonschema:"what to look for"`
}

// ForgetInput is forget's input.
type ForgetInput struct {
	Key string `json:"key" jsonschema:"the key of the memory, as recall returned it"`
}

// Memory is a memory as recall returns it.
type Memory struct {
	Key    string   `json:"key"`
	Memory string   `json:"memory"`
	Score  *float64 `json:"score,omitempty"`
}

// target returns the store and the namespace of a call.
func (t *tools) target(ctx context.Context) (*longterm.Store, longterm.Namespace, error) {
	s := t.cfg.Store
	if s == nil {
		var ok bool
		if s, ok = longterm.From(ctx); !ok {
			return nil, nil, errors.New("no long-term store is configured for this agent")
		}
	}
	vars := map[string]string{}
	if fn, ok := longterm.ScopeFrom(ctx); ok {
		v, err := fn(ctx)
		if err != nil {
			return nil, nil, err
		}
		vars = v
	}
	ns, err := t.cfg.Namespace.Expand(vars)
	if err != nil {
		return nil, nil, err
	}
	return s, ns, nil
}

// keyOf is the key of a memory: the one given, or one derived from the
// text, so that remembering the same text again (a retried call) puts the
// same item.
func keyOf(in RememberInput) string {
	if k := strings.TrimSpace(in.Key); k != "" {
		return k
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(in.Memory)))
	return "m-" + hex.EncodeToString(sum[:8])
}

func (t *tools) remember(ctx context.Context, in RememberInput) (string, error) {
	if strings.TrimSpace(in.Memory) == "" {
		return "", fmt.Errorf("%w: memory is empty", agent.ErrInvalidArguments)
	}
	s, ns, err := t.target(ctx)
	if err != nil {
		return "", err
	}
	value, _ := json.Marshal(map[string]string{"memory": in.Memory})
	var opts []longterm.PutOption
	if t.cfg.TTL > 0 {
		opts = append(opts, longterm.TTL(t.cfg.TTL))
	}
	key := keyOf(in)
	if _, err := s.Put(ctx, ns, key, value, opts...); err != nil {
		if longterm.IsInvalid(err) {
			return "", fmt.Errorf("%w: %v", agent.ErrInvalidArguments, err)
		}
		return "", err
	}
	return fmt.Sprintf("remembered as %q", key), nil
}

func (t *tools) recall(ctx context.Context, in RecallInput) ([]Memory, error) {
	s, ns, err := t.target(ctx)
	if err != nil {
		return nil, err
	}
	var items []longterm.Item
	if s.Searchable() {
		items, err = s.Search(ctx, ns, longterm.SearchOptions{Query: in.Query, Limit: t.cfg.RecallLimit})
		if errors.Is(err, longterm.ErrTooLarge) {
			err = nil // too many to rank: the newest instead
		}
	}
	if !s.Searchable() || (err == nil && items == nil) {
		// Without an embedding model: the memories whose text shares a
		// word with the query, then the others, up to the limit.
		var page longterm.Page
		page, err = s.List(ctx, ns, longterm.ListOptions{Limit: longterm.MaxPageSize})
		items = rankByWords(page.Items, in.Query, t.cfg.RecallLimit)
	}
	if err != nil {
		return nil, err
	}
	out := make([]Memory, 0, len(items))
	for _, it := range items {
		var v struct {
			Memory string `json:"memory"`
		}
		_ = json.Unmarshal(it.Value, &v)
		if v.Memory == "" {
			v.Memory = string(it.Value)
		}
		out = append(out, Memory{Key: it.Key, Memory: v.Memory, Score: it.Score})
	}
	return out, nil
}

// rankByWords orders items by how many of the query's words their values
// hold (stable: ties keep the store's order) and keeps the first limit.
func rankByWords(items []longterm.Item, query string, limit int) []longterm.Item {
	words := strings.Fields(strings.ToLower(query))
	type scored struct {
		it longterm.Item
		n  int
	}
	var ss []scored
	for _, it := range items {
		text := strings.ToLower(string(it.Value))
		n := 0
		for _, w := range words {
			if len(w) > 2 && strings.Contains(text, w) {
				n++
			}
		}
		ss = append(ss, scored{it, n})
	}
	for i := 1; i < len(ss); i++ { // insertion sort, stable
		for j := i; j > 0 && ss[j].n > ss[j-1].n; j-- {
			ss[j], ss[j-1] = ss[j-1], ss[j]
		}
	}
	out := make([]longterm.Item, 0, min(limit, len(ss)))
	for _, s := range ss[:min(limit, len(ss))] {
		out = append(out, s.it)
	}
	return out
}

func (t *tools) forget(ctx context.Context, in ForgetInput) (string, error) {
	s, ns, err := t.target(ctx)
	if err != nil {
		return "", err
	}
	if err := s.Delete(ctx, ns, in.Key); err != nil {
		if longterm.IsInvalid(err) {
			return "", fmt.Errorf("%w: %v", agent.ErrInvalidArguments, err)
		}
		return "", err
	}
	return fmt.Sprintf("forgot %q", in.Key), nil
}

// ThreadScope returns the ScopeFunc of a runtime: for a node's run (its
// pregel task's run id), thread_id, run_id, and every string field of its
// thread's metadata (user_id, say). A run without a thread has run_id
// only.
func ThreadScope(store runs.Store, threads runs.ThreadStore) longterm.ScopeFunc {
	return func(ctx context.Context) (map[string]string, error) {
		info, ok := pregel.TaskFrom(ctx)
		if !ok {
			return map[string]string{}, nil
		}
		vars := map[string]string{"run_id": info.RunID}
		r, err := store.GetRun(ctx, info.RunID)
		if err != nil {
			return nil, fmt.Errorf("read the run: %w", err)
		}
		if r.ThreadID == "" || threads == nil {
			return vars, nil
		}
		th, err := threads.GetThread(ctx, r.ThreadID)
		if err != nil {
			return nil, fmt.Errorf("read the thread: %w", err)
		}
		var md map[string]any
		_ = json.Unmarshal(th.Metadata, &md)
		for k, v := range md {
			if s, ok := v.(string); ok {
				vars[k] = s
			}
		}
		vars["thread_id"] = r.ThreadID
		return vars, nil
	}
}
