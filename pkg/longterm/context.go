package longterm

import "context"

type storeKey struct{}

// WithStore returns a context carrying s. The runtimes (superstep dev's
// scheduler, the tick and node Lambda functions) put their Store in the
// context a run executes with, so every node reaches it with [From].
func WithStore(ctx context.Context, s *Store) context.Context {
	return context.WithValue(ctx, storeKey{}, s)
}

// From returns the Store of a node's context, if the runtime configured
// one.
func From(ctx context.Context) (*Store, bool) {
	s, ok := ctx.Value(storeKey{}).(*Store)
	return s, ok && s != nil
}

// ScopeFunc returns the values a namespace template's placeholders take in
// the run of ctx: the runtimes give thread_id, run_id and the string
// fields of the thread's metadata (see pkg/agent/memorytools.ThreadScope).
type ScopeFunc func(ctx context.Context) (map[string]string, error)

type scopeKey struct{}

// WithScope returns a context carrying fn, for [Expand].
func WithScope(ctx context.Context, fn ScopeFunc) context.Context {
	return context.WithValue(ctx, scopeKey{}, fn)
}

// ScopeFrom returns the ScopeFunc of ctx, if the runtime set one.
func ScopeFrom(ctx context.Context) (ScopeFunc, bool) {
	fn, ok := ctx.Value(scopeKey{}).(ScopeFunc)
	return fn, ok && fn != nil
}
