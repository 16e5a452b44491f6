package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Storage is what a run, or a thread with its runs, stores, in bytes of
// stored data (keys and indexes not counted): a user sees a conversation's
// footprint with it (GET /v1/runs/{id}/storage, /v1/threads/{id}/storage).
type Storage struct {
	// CheckpointBytes: the committed steps (their metadata and the
	// values they changed) and task results, segments aside.
	CheckpointBytes int64 `json:"checkpoint_bytes"`
	// SegmentBytes: the segments of segment-stored (append) channels,
	// such as a conversation's messages.
	SegmentBytes int64 `json:"segment_bytes"`
	// EventBytes: the run's event stream, as kept by the log.
	EventBytes int64 `json:"event_bytes"`
	// RecordBytes: the run records (and a thread's own record), as the
	// store keeps them when it measures them (DynamoDB's run items, keys
	// included), else as their JSON.
	RecordBytes int64 `json:"record_bytes"`
	// TotalBytes is the sum of the above.
	TotalBytes int64 `json:"total_bytes"`
	// Runs is how many runs were counted.
	Runs int `json:"runs"`
	// Measured names the parts measured; a store that cannot measure a
	// part (the memory checkpointer) leaves it out, and its bytes 0.
	Measured []string `json:"measured"`
}

// The parts of Storage.Measured.
const (
	StorageCheckpoints = "checkpoints"
	StorageEvents      = "events"
	StorageRecords     = "records"
)

// StorageMeter is a store that measures what it holds of a run: a
// checkpointer fills CheckpointBytes and SegmentBytes, an event log
// EventBytes, and says which parts in Measured. The cost is a read of the
// run's rows or items (a bounded query), which is why Storage is a
// resource of its own and not a field of every run view.
type StorageMeter interface {
	RunStorage(ctx context.Context, runID string) (Storage, error)
}

// add adds o's bytes to s.
func (s *Storage) add(o Storage) {
	s.CheckpointBytes += o.CheckpointBytes
	s.SegmentBytes += o.SegmentBytes
	s.EventBytes += o.EventBytes
	s.RecordBytes += o.RecordBytes
	s.Runs += o.Runs
	for _, m := range o.Measured {
		if !contains(s.Measured, m) {
			s.Measured = append(s.Measured, m)
		}
	}
	s.TotalBytes = s.CheckpointBytes + s.SegmentBytes + s.EventBytes + s.RecordBytes
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// EventLogHolder is a Dispatcher that logs its runs' events in an
// EventLog (the embedded Scheduler): a Service measures a run's events
// (RunStorage) in that log, and only once when it is also one of its
// stores.
type EventLogHolder interface {
	// EventLog returns the log the runs' events are appended to.
	EventLog() EventLog
}

// meters returns the distinct stores of s that measure storage: its
// checkpointer, its run store and the Dispatcher's event log.
func (s *Service) meters() []StorageMeter {
	var out []StorageMeter
	seen := map[any]bool{}
	for _, x := range []any{s.Checkpoints, s.Runs, s.Dispatcher} {
		if h, ok := x.(EventLogHolder); ok {
			x = h.EventLog()
		}
		if m, ok := x.(StorageMeter); ok && !seen[x] {
			seen[x] = true
			out = append(out, m)
		}
	}
	return out
}

// RunStorage returns what run id stores: its checkpoints, segments and
// events as its stores measure them, and its record (as its store keeps
// it when the store measures it, else as JSON). It fails
// with ErrNotFound for a run that does not exist.
func (s *Service) RunStorage(ctx context.Context, id string) (Storage, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return Storage{}, err
	}
	return s.runStorage(ctx, r)
}

// runStorage measures run r. Its record counts as the store keeps it when
// a store measures it (says StorageRecords in Measured: DynamoDB's
// compact run item), else as its JSON.
func (s *Service) runStorage(ctx context.Context, r Run) (Storage, error) {
	out := Storage{Measured: []string{}}
	var record *int64
	for _, m := range s.meters() {
		st, err := m.RunStorage(ctx, r.ID)
		if err != nil {
			return Storage{}, fmt.Errorf("measure run %q: %w", r.ID, err)
		}
		if contains(st.Measured, StorageRecords) && record == nil {
			n := st.RecordBytes
			record = &n
		}
		st.RecordBytes, st.Runs = 0, 0 // the record is counted once, below
		out.add(st)
	}
	if record == nil {
		rec, err := json.Marshal(r)
		if err != nil {
			return Storage{}, fmt.Errorf("measure run %q: %w", r.ID, err)
		}
		n := int64(len(rec))
		record = &n
	}
	out.add(Storage{RecordBytes: *record, Runs: 1, Measured: []string{StorageRecords}})
	return out, nil
}

// maxStorageRuns bounds the runs ThreadStorage measures.
const maxStorageRuns = 10000

// ThreadStorage returns what thread id stores: its record (as JSON) and
// what each of its runs stores (RunStorage). It reads every run of the
// thread (at most 10,000, else an error wrapping ErrInvalid).
func (s *Service) ThreadStorage(ctx context.Context, id string) (Storage, error) {
	t, err := s.GetThread(ctx, id)
	if err != nil {
		return Storage{}, err
	}
	rec, err := json.Marshal(t)
	if err != nil {
		return Storage{}, fmt.Errorf("measure thread %q: %w", id, err)
	}
	out := Storage{Measured: []string{StorageRecords}, RecordBytes: int64(len(rec)), TotalBytes: int64(len(rec))}
	f := Filter{Limit: MaxPageSize}
	for {
		page, err := s.ThreadRuns(ctx, id, f)
		if err != nil {
			return Storage{}, err
		}
		for _, r := range page.Runs {
			st, err := s.runStorage(ctx, r)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return Storage{}, err
			}
			out.add(st)
		}
		if out.Runs > maxStorageRuns {
			return Storage{}, fmt.Errorf("thread %q has more than %d runs: too many to measure: %w", id, maxStorageRuns, ErrInvalid)
		}
		if page.NextPageToken == "" {
			return out, nil
		}
		f.PageToken = page.NextPageToken
	}
}
