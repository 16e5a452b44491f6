// Package dynamo implements [pregel.Checkpointer] and [runs.Store] on one
// DynamoDB table, with aws-sdk-go-v2.
//
// Everything of a run lives in one partition, pk = RUN#<run id>: the run
// record, the checkpoint head, one item per committed step, the channel
// values as deltas (only the channels a step changed), the task results of
// the open step and the chunks of values too large for an item. The layout
// is described in README.md beside this file.
//
// Commit is one TransactWriteItems, conditioned on the head being at the
// previous step, so that of several processes committing the same step
// exactly one wins (fencing, not timing). Values over the 400 KB item limit,
// and whatever would not fit the 100 items and 4 MB of a transaction, go to
// chunk items written before the transaction under a key unique to the
// commit, so a losing committer never overwrites what the winner wrote.
//
// Runs are listed through two global secondary indexes, by graph and by
// status, both sorted by creation time. A finished run's record carries the
// TTL attribute expires_at.
//
// [CreateTable] creates a table with this schema; infra/template.yaml
// declares the same for deployments.
package dynamo

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// DefaultRetention is how long a finished run's record is kept before
// DynamoDB's TTL deletes it, unless [WithRetention] says otherwise.
const DefaultRetention = 30 * 24 * time.Hour

// Store keeps checkpoints and run records in a DynamoDB table. It is safe
// for concurrent use, and any number of Stores, in one process or many, may
// share a table. Create one with [New].
type Store struct {
	client    *dynamodb.Client
	table     string
	retention time.Duration
	now       func() time.Time
}

var (
	_ pregel.Checkpointer = (*Store)(nil)
	_ runs.Store          = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithRetention sets how long a finished run's record is kept: its item
// gets expires_at = finish time + d, which DynamoDB's TTL acts on. Zero
// disables expiry. The default is [DefaultRetention].
func WithRetention(d time.Duration) Option {
	return func(s *Store) { s.retention = d }
}

// WithClock sets the clock of UpdatedAt, expires_at and task ordering; the
// default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// New returns a Store on table, which must have the schema of
// [CreateTable].
func New(client *dynamodb.Client, table string, opts ...Option) *Store {
	s := &Store{client: client, table: table, retention: DefaultRetention, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Table returns the name of the Store's table.
func (s *Store) Table() string { return s.table }

// newID returns a random identifier: 32 hex digits, which also fits a
// ClientRequestToken (at most 36 characters).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
