// Package dynamo implements [pregel.Checkpointer] and [runs.Store] on one
// DynamoDB table, with aws-sdk-go-v2.
//
// Everything of a run lives in one partition, pk = RUN#<run id>: the run
// record, one item per committed step, the task results of the open step
// and the chunks of values too large for an item. The layout is described
// in README.md beside this file.
//
// A step item holds the step's metadata, its manifest (where the value of
// every channel is) and the values of the channels the step changed. Commit
// is one conditional PutItem of that item: it fails if the step's item
// exists, and the previous step's item must exist, so that of several
// processes committing the same step exactly one wins (fencing, not
// timing). Values that do not fit the 400 KB item go to chunk items written
// before the put under a key unique to the commit, so a losing committer
// never overwrites what the winner wrote.
//
// Committed steps never change, so a Store keeps those it wrote or read in
// a cache bounded in bytes ([WithCacheSize]) and skips reading them again:
// a Lambda container that runs the consecutive ticks of a run reads, per
// superstep, only the newest step item and the open step's task results.
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
	// threadRetention is how long an idle thread is kept (0: always).
	threadRetention time.Duration
	now             func() time.Time
	cacheSize       int64
	// steps caches committed steps, and newest the newest step of each
	// run that steps has whole; tasks notes the task results of open
	// steps, for their commit to delete.
	steps  *lru[stepKey, *stepEntry]
	newest *lru[string, int]
	tasks  *lru[stepKey, taskNote]
	// shards notes the layout of open steps' task items (shards.go), and
	// tasksPerShard is how many remote tasks a shard of a step takes.
	shards        *lru[stepKey, shardInfo]
	tasksPerShard int
	// eventRetention is how many events a run keeps (0: the default);
	// eventHeads the next event id of the runs this Store appended to.
	eventRetention int
	eventHeads     *lru[string, int64]
	// eventMaxAge, when positive, gives event items expires_at.
	eventMaxAge time.Duration
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

// WithThreadRetention sets how long an idle thread is kept after its last
// change (its creation, a run on it ending, a fork of it, an update of its
// state): its item gets expires_at = that time + d, which DynamoDB's TTL
// acts on, and the sweep then deletes its runs (PurgeThread). A thread
// with an active or queued run, or with forks, has no expiry; any change
// moves it. Zero, the default, keeps threads until they are deleted.
func WithThreadRetention(d time.Duration) Option {
	return func(s *Store) { s.threadRetention = max(d, 0) }
}

// WithClock sets the clock of UpdatedAt, expires_at and task ordering; the
// default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// WithCacheSize sets how many bytes of committed steps (their manifests
// and values) the Store keeps in memory to save reading them again; 0
// disables the cache. The default is [DefaultCacheSize].
func WithCacheSize(bytes int64) Option {
	return func(s *Store) { s.cacheSize = max(bytes, 0) }
}

// maxNotes bounds the runs whose newest cached step a Store remembers, and
// the open steps whose task results it remembers for their commit to
// delete.
const maxNotes = 4096

// New returns a Store on table, which must have the schema of
// [CreateTable].
func New(client *dynamodb.Client, table string, opts ...Option) *Store {
	s := &Store{client: client, table: table, retention: DefaultRetention, now: time.Now, cacheSize: DefaultCacheSize, tasksPerShard: DefaultTasksPerShard}
	for _, o := range opts {
		o(s)
	}
	s.steps = newLRU[stepKey, *stepEntry](s.cacheSize)
	s.newest = newLRU[string, int](maxNotes)
	s.tasks = newLRU[stepKey, taskNote](maxNotes)
	s.shards = newLRU[stepKey, shardInfo](maxNotes)
	s.eventHeads = newLRU[string, int64](maxNotes)
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
