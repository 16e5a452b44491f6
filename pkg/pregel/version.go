package pregel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ErrIncompatible is wrapped by the error of a run that cannot continue on
// this graph: the graph changed since the run's state was written in a way
// that could change the run's meaning (see [Graph.Adopt]). Nothing ran;
// the run's checkpoints and recorded answers are intact, and code whose
// graph is compatible can continue it.
var ErrIncompatible = errors.New("pregel: graph changed incompatibly")

// Stamp identifies the graph that wrote a run's state: the version its
// code names (Builder.Version), the fingerprint of its shape, and the
// reducer of every channel that has one. Run records keep it, so that a
// run continuing on other code can be checked (Graph.Adopt).
type Stamp struct {
	// Version is the name the graph's code gave it; empty when none.
	Version string `json:"version,omitempty"`
	// Fingerprint is the hash of the graph's shape (Graph.Fingerprint).
	Fingerprint string `json:"fingerprint"`
	// Reducers names the reducer of each channel that has one.
	Reducers map[string]string `json:"reducers,omitempty"`
}

// Label is how errors and listings name the stamp: the version and the
// fingerprint, or the fingerprint alone.
func (s Stamp) Label() string {
	if s.Version == "" {
		return s.Fingerprint
	}
	return s.Version + " (" + s.Fingerprint + ")"
}

// MigrateFunc turns the channel values written by an older version of a
// graph into values of this one. It receives a copy of every stored
// channel value (after declared channel renames) and returns the values
// the run continues with: a channel it leaves out is cleared.
type MigrateFunc func(ctx context.Context, old map[string]json.RawMessage) (map[string]json.RawMessage, error)

// Version names this version of the graph. Runs record it with the
// fingerprint of the graph's shape; listings filter by it and state
// migrations (Builder.Migrate) name it.
func (b *Builder[S]) Version(name string) *Builder[S] {
	if name == "" || strings.ContainsAny(name, " \t\n/") {
		b.errs = append(b.errs, fmt.Errorf("version %q must be non-empty, without spaces or slashes", name))
		return b
	}
	b.version = name
	return b
}

// RenameNode declares that the node once named old is now named new: a
// run planned or interrupted at old continues at new, its pending answers
// intact. Keep the declaration as long as such runs may exist.
func (b *Builder[S]) RenameNode(old, new string) *Builder[S] {
	b.nodeRenames = append(b.nodeRenames, [2]string{old, new})
	return b
}

// RenameChannel declares that the channel once named old is now named new:
// a run whose state has old continues with its value in new.
func (b *Builder[S]) RenameChannel(old, new string) *Builder[S] {
	b.channelRenames = append(b.channelRenames, [2]string{old, new})
	return b
}

// Migrate declares how a run whose state was written by version from of
// this graph (see Builder.Version) continues on this one: fn turns the
// old state into the new. It is applied when such a run continues, before
// anything runs; the run's next committed step stores its result. Compile
// refuses two migrations from one version.
func (b *Builder[S]) Migrate(from string, fn MigrateFunc) *Builder[S] {
	if from == "" || fn == nil {
		b.errs = append(b.errs, fmt.Errorf("a migration needs the version it migrates from and a function"))
		return b
	}
	b.migrations = append(b.migrations, migration{from: from, fn: fn})
	return b
}

type migration struct {
	from string
	fn   MigrateFunc
}

// compileVersion checks the version declarations and sets the graph's
// stamp, renames and migrations.
func (b *Builder[S]) compileVersion(g *Graph) []error {
	var errs []error
	g.version = b.version
	for _, m := range b.migrations {
		switch {
		case m.from == b.version:
			errs = append(errs, fmt.Errorf("migration from version %q: that is this graph's own version; migrate from an older one", m.from))
		case g.migrations[m.from] != nil:
			errs = append(errs, fmt.Errorf("two migrations from version %q; a version has one migration", m.from))
		default:
			if g.migrations == nil {
				g.migrations = map[string]MigrateFunc{}
			}
			g.migrations[m.from] = m.fn
		}
	}
	for _, r := range b.nodeRenames {
		switch {
		case b.nodes[r[1]] == nil:
			errs = append(errs, fmt.Errorf("rename of node %q to %q: there is no node %q", r[0], r[1], r[1]))
		case b.nodes[r[0]] != nil || r[0] == Start || r[0] == End:
			errs = append(errs, fmt.Errorf("rename of node %q to %q: %q is still a node; an old name must not be in use", r[0], r[1], r[0]))
		case g.nodeRenames[r[0]] != "":
			errs = append(errs, fmt.Errorf("node %q is renamed twice", r[0]))
		default:
			if g.nodeRenames == nil {
				g.nodeRenames = map[string]string{}
			}
			g.nodeRenames[r[0]] = r[1]
		}
	}
	for _, r := range b.channelRenames {
		_, newOK := b.schema.byName[r[1]]
		_, oldOK := b.schema.byName[r[0]]
		switch {
		case !newOK:
			errs = append(errs, fmt.Errorf("rename of channel %q to %q: the state has no channel %q", r[0], r[1], r[1]))
		case oldOK:
			errs = append(errs, fmt.Errorf("rename of channel %q to %q: %q is still a channel; an old name must not be in use", r[0], r[1], r[0]))
		case slices.ContainsFunc(g.channelRenames, func(x [2]string) bool { return x[0] == r[0] }):
			errs = append(errs, fmt.Errorf("channel %q is renamed twice", r[0]))
		default:
			g.channelRenames = append(g.channelRenames, r)
		}
	}
	g.reducerNames = map[string]string{}
	g.channelTypes = map[string]string{}
	for _, c := range b.schema.channels {
		if c.reducer != "" && c.reducer != ReduceLast {
			g.reducerNames[c.name] = c.reducer
		}
		g.channelTypes[c.name] = c.typ.String()
	}
	g.successors = map[string][]string{Start: b.successors(g, Start)}
	for _, n := range b.order {
		g.successors[n] = b.successors(g, n)
	}
	sc := b.schema
	g.checkChannel = func(name string, raw json.RawMessage) error {
		i, ok := sc.byName[name]
		if !ok || len(raw) == 0 {
			return nil
		}
		return json.Unmarshal(raw, sc.zero(i))
	}
	g.fingerprint = g.shapeHash()
	st := g.Stamp()
	g.stamp = &st
	return errs
}

// shapeHash hashes what a run in flight depends on: channels with their
// types and reducers, nodes with their policies, and every edge (static,
// join, fan-out, error handler, the declared targets of routers). Node
// bodies, descriptions and the version's name are not part of it. The
// input is sorted text, so the hash is the same in every process and
// build of the same graph.
func (g *Graph) shapeHash() string {
	var lines []string
	lines = append(lines, "graph "+g.name)
	for _, ch := range g.channels {
		lines = append(lines, "channel "+ch+" "+g.channelTypes[ch]+" "+g.reducerNames[ch])
	}
	for name, p := range g.Policies() {
		lines = append(lines, "node "+name+" "+strconv.Itoa(p.MaxAttempts)+" "+strconv.FormatInt(p.TimeoutMS, 10)+" "+p.OnError)
	}
	for _, e := range g.Edges() {
		j := ""
		if e.Join != nil {
			j = strconv.Itoa(*e.Join)
		}
		lines = append(lines, "edge "+e.From+" "+e.To+" "+string(e.Kind)+" "+j)
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:8])
}

// Fingerprint is the hash of the graph's shape: 16 hex digits that change
// when a channel, its type or reducer, a node, its policy or an edge
// changes, and stay the same across processes and builds otherwise.
func (g *Graph) Fingerprint() string { return g.fingerprint }

// Version is the name the graph's code gave this version
// (Builder.Version); empty when none.
func (g *Graph) Version() string { return g.version }

// Unchanged reports whether state written by the graph stamped s
// continues on this graph as it is: the same shape, and no migration
// declared from s's version. Otherwise a run or thread with such state is
// adopted first (Graph.Adopt).
func (g *Graph) Unchanged(s Stamp) bool {
	if s.Fingerprint != g.fingerprint {
		return false
	}
	return s.Version == g.version || g.migrations[s.Version] == nil
}

// Stamp is what a run records of the graph that writes its state.
func (g *Graph) Stamp() Stamp {
	s := Stamp{Version: g.version, Fingerprint: g.fingerprint}
	if len(g.reducerNames) > 0 {
		s.Reducers = maps.Clone(g.reducerNames)
	}
	return s
}

// resolve maps a node's old name (Builder.RenameNode) to its name now.
func (g *Graph) resolve(name string) string {
	if n, ok := g.nodeRenames[name]; ok {
		return n
	}
	return name
}

// IncompatibleError says why a run cannot continue on this graph. It
// wraps ErrIncompatible (and the migration's error, for a failed one).
type IncompatibleError struct {
	// Node or Channel names what changed; one of them is set.
	Node    string
	Channel string
	// From is the stamp of the graph that wrote the run's state; To is
	// this graph's.
	From, To Stamp
	// Reason says what changed, in words.
	Reason string
	err    error
}

// Error names the change and both versions.
func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("graph changed incompatibly for this run (run's version %s, code's version %s): %s; run it on compatible code, or declare a rename or a migration", e.From.Label(), e.To.Label(), e.Reason)
}

// Unwrap returns ErrIncompatible and the migration's error, if any.
func (e *IncompatibleError) Unwrap() []error {
	if e.err != nil {
		return []error{ErrIncompatible, e.err}
	}
	return []error{ErrIncompatible}
}

// Adopt prepares the latest checkpoint of a run whose state was written by
// the graph stamped prior, with the results recorded for its open step,
// to continue on this graph. When the fingerprints match it returns cp.
// Otherwise it applies declared channel renames and the migration from
// prior's version (if any), and checks that nothing the run depends on
// changed: each planned or pending task's node exists (after renames) and
// is still a successor of the nodes that planned it, each stored value
// decodes into its channel's type, and no channel that holds a value
// changed its reducer (unless a migration was applied). It returns an
// *IncompatibleError when one did, and the names of what it applied
// ("rename channel a -> b", "migrate from v1"). Nothing is stored: the
// run's next committed step writes the channels Adopt changed.
func (g *Graph) Adopt(ctx context.Context, prior Stamp, cp *Checkpoint, pending []TaskResult) (*Checkpoint, []string, error) {
	if prior.Fingerprint == "" || g.Unchanged(prior) {
		return cp, nil, nil
	}
	to := g.Stamp()
	incompatible := func(node, channel, reason string, err error) error {
		return &IncompatibleError{Node: node, Channel: channel, From: prior, To: to, Reason: reason, err: err}
	}
	out := *cp
	out.Values, out.Versions = maps.Clone(cp.Values), maps.Clone(cp.Versions)
	if out.Values == nil {
		out.Values, out.Versions = map[string]json.RawMessage{}, map[string]int{}
	}
	out.layouts = maps.Clone(cp.layouts)
	touch := func(ch string) {
		out.Versions[ch] = cp.Step + 1 // written by the next commit
		delete(out.layouts, ch)
	}
	reducers := maps.Clone(prior.Reducers)
	if reducers == nil {
		reducers = map[string]string{}
	}
	var applied []string
	for _, r := range g.channelRenames {
		v, ok := out.Values[r[0]]
		if red, had := reducers[r[0]]; had {
			reducers[r[1]] = red
			delete(reducers, r[0])
		}
		if !ok {
			continue
		}
		if _, taken := out.Values[r[1]]; !taken {
			out.Values[r[1]] = v
			touch(r[1])
			applied = append(applied, fmt.Sprintf("rename channel %s -> %s", r[0], r[1]))
		}
		delete(out.Values, r[0])
		delete(out.Versions, r[0])
	}
	migrated := false
	if fn := g.migrations[prior.Version]; fn != nil && prior.Version != "" {
		if len(cp.Unloaded) > 0 {
			return nil, nil, incompatible("", "", "a migration needs the whole state; load every channel", nil)
		}
		vals, err := fn(ctx, maps.Clone(out.Values))
		if err != nil {
			return nil, nil, incompatible("", "", fmt.Sprintf("migration from version %q failed: %v", prior.Version, err), err)
		}
		for ch := range out.Values {
			if _, kept := vals[ch]; !kept {
				delete(out.Values, ch)
				touch(ch)
			}
		}
		for ch, v := range vals {
			if !slices.Contains(g.channels, ch) {
				return nil, nil, incompatible("", ch, fmt.Sprintf("migration from version %q returned channel %q, which the state does not have", prior.Version, ch), nil)
			}
			if old, ok := out.Values[ch]; !ok || !bytes.Equal(old, v) {
				out.Values[ch] = v
				touch(ch)
			}
		}
		migrated = true
		applied = append(applied, "migrate from version "+prior.Version)
	}
	for _, ch := range slices.Sorted(maps.Keys(out.Values)) {
		if !slices.Contains(g.channels, ch) {
			continue // a removed channel: nothing reads it
		}
		if !migrated && reducers[ch] != g.reducerNames[ch] {
			return nil, nil, incompatible("", ch, fmt.Sprintf("channel %q holds a value and its reducer changed from %s to %s", ch, reducerLabel(reducers[ch]), reducerLabel(g.reducerNames[ch])), nil)
		}
		if err := g.checkChannel(ch, out.Values[ch]); err != nil {
			return nil, nil, incompatible("", ch, fmt.Sprintf("the stored value of channel %q does not decode into its type now (%s): %v", ch, g.channelTypes[ch], err), nil)
		}
	}
	for _, tr := range cp.Next {
		node := g.resolve(tr.Node)
		if g.nodes[node] == nil {
			return nil, nil, incompatible(tr.Node, "", fmt.Sprintf("node %q, which the run runs next, is gone", tr.Node), nil)
		}
		for _, from := range tr.From {
			from = g.resolve(from)
			if succ, ok := g.successors[from]; ok && tr.Failure == nil && !slices.Contains(succ, node) {
				return nil, nil, incompatible(tr.Node, "", fmt.Sprintf("node %q, which the run runs next, is no longer a target of node %q", tr.Node, from), nil)
			}
		}
	}
	for _, p := range pending {
		if g.nodes[g.resolve(p.Node)] == nil {
			return nil, nil, incompatible(p.Node, "", fmt.Sprintf("node %q, whose task is %s, is gone", p.Node, p.Status), nil)
		}
	}
	for old, now := range g.nodeRenames {
		if slices.ContainsFunc(cp.Next, func(t Trigger) bool { return t.Node == old }) {
			applied = append(applied, fmt.Sprintf("rename node %s -> %s", old, now))
		}
	}
	slices.Sort(applied)
	return &out, applied, nil
}

func reducerLabel(r string) string {
	if r == "" {
		return "last value"
	}
	return strconv.Quote(r)
}
