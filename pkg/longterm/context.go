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
