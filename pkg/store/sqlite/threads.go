package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

var (
	_ runs.ThreadStore = (*Store)(nil)
	_ runs.Seeder      = (*Store)(nil)
)

// migrateThreads is schema version 4: thread records, and where the runs
// that continue a thread find the values they inherited.
const migrateThreads = `
-- One row per thread: the runs.Thread as JSON, its version (the condition
-- of every update) and CreatedAt in Unix nanoseconds, which listings order
-- by.
CREATE TABLE threads (
	id         TEXT    NOT NULL PRIMARY KEY,
	created_at INTEGER NOT NULL,
	version    INTEGER NOT NULL,
	record     BLOB    NOT NULL
);
CREATE INDEX threads_by_created ON threads (created_at, id);

-- For a run whose step 0 continues another run's step (CommitFrom): the
-- key of the step row that holds the value of each channel the run
-- inherited, as a JSON object. run is the run's id in runs.
CREATE TABLE run_origins (
	run     INTEGER NOT NULL PRIMARY KEY,
	origins BLOB    NOT NULL
);
`

// threadStatements are the prepared statements of threads and inherited
// values: writes on the write connection, reads on the pool.
type threadStatements struct {
	create, update, del, setOrigins *sql.Stmt
	get, runKey, origins, rows      *sql.Stmt
	listFirst, listAfter            *sql.Stmt
}

func (s *Store) prepareThreads(ctx context.Context) error {
	t := &s.threads
	if err := prepareAll(ctx, s.w.conn, []prepared{
		{&t.create, `INSERT INTO threads (id, created_at, version, record) VALUES (?, ?, 1, ?) ON CONFLICT (id) DO NOTHING`},
		{&t.update, `UPDATE threads SET version = ?2 + 1, record = ?3 WHERE id = ?1 AND version = ?2`},
		{&t.del, `DELETE FROM threads WHERE id = ? AND version = ?`},
		{&t.setOrigins, `INSERT INTO run_origins (run, origins) SELECT id, ?2 FROM runs WHERE run_id = ?1 ON CONFLICT (run) DO NOTHING`},
	}); err != nil {
		return err
	}
	return prepareAll(ctx, s.db, []prepared{
		{&t.get, `SELECT created_at, version, record FROM threads WHERE id = ?`},
		{&t.runKey, `SELECT id FROM runs WHERE run_id = ?`},
		{&t.origins, `SELECT o.origins FROM runs AS r JOIN run_origins AS o ON o.run = r.id WHERE r.run_id = ?`},
		// The step rows whose keys the JSON array ?1 lists.
		{&t.rows, `SELECT s.id, s.changes FROM json_each(?1) AS j JOIN steps AS s ON s.id = j.value`},
		{&t.listFirst, `SELECT created_at, id, version, record FROM threads ORDER BY created_at DESC, id DESC LIMIT ?`},
		{&t.listAfter, `SELECT created_at, id, version, record FROM threads WHERE (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?`},
	})
}

func (t *threadStatements) all() []*sql.Stmt {
	return []*sql.Stmt{t.create, t.update, t.del, t.setOrigins, t.get, t.runKey, t.origins, t.rows, t.listFirst, t.listAfter}
}

// CreateThread implements [runs.ThreadStore].
func (s *Store) CreateThread(ctx context.Context, t runs.Thread) (runs.Thread, bool, error) {
	if t.ID == "" {
		return runs.Thread{}, false, fmt.Errorf("sqlite: create thread: empty thread id: %w", runs.ErrInvalid)
	}
	t.CreatedAt = t.CreatedAt.Round(0).UTC()
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = t.CreatedAt
	}
	t.Version = 1
	record, err := json.Marshal(t)
	if err != nil {
		return runs.Thread{}, false, fmt.Errorf("sqlite: create thread %q: encode: %w", t.ID, err)
	}
	var n int64
	err = s.w.do(ctx, func() error {
		res, err := s.w.execLocking(ctx, s.threads.create, t.ID, t.CreatedAt.UnixNano(), record)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return runs.Thread{}, false, fmt.Errorf("sqlite: create thread %q: %w", t.ID, err)
	}
	if n > 0 {
		return t, true, nil
	}
	stored, err := s.GetThread(ctx, t.ID)
	return stored, false, err
}

// GetThread implements [runs.ThreadStore].
func (s *Store) GetThread(ctx context.Context, id string) (runs.Thread, error) {
	var (
		created, version int64
		record           []byte
	)
	err := s.threads.get.QueryRowContext(ctx, id).Scan(&created, &version, &record)
	if errors.Is(err, sql.ErrNoRows) {
		return runs.Thread{}, fmt.Errorf("sqlite: thread %q: %w", id, runs.ErrNotFound)
	}
	if err != nil {
		return runs.Thread{}, fmt.Errorf("sqlite: get thread %q: %w", id, err)
	}
	return decodeThread(created, version, record)
}

func decodeThread(created, version int64, record []byte) (runs.Thread, error) {
	var t runs.Thread
	if err := json.Unmarshal(record, &t); err != nil {
		return runs.Thread{}, fmt.Errorf("sqlite: decode thread record: %w", err)
	}
	t.CreatedAt, t.Version = time.Unix(0, created).UTC(), version
	return t, nil
}

// UpdateThread implements [runs.ThreadStore]: one UPDATE conditioned on
// the version, which is what keeps a thread to one active run.
func (s *Store) UpdateThread(ctx context.Context, t runs.Thread) (runs.Thread, error) {
	expected := t.Version
	t.Version++
	t.UpdatedAt = time.Now().UTC()
	record, err := json.Marshal(t)
	if err != nil {
		return runs.Thread{}, fmt.Errorf("sqlite: update thread %q: encode: %w", t.ID, err)
	}
	var n int64
	err = s.w.do(ctx, func() error {
		res, err := s.w.execLocking(ctx, s.threads.update, t.ID, expected, record)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return runs.Thread{}, fmt.Errorf("sqlite: update thread %q: %w", t.ID, err)
	}
	if n == 0 {
		old, err := s.GetThread(ctx, t.ID)
		if err != nil {
			return runs.Thread{}, err
		}
		return runs.Thread{}, fmt.Errorf("sqlite: update thread %q at version %d: stored version is %d: %w", t.ID, expected, old.Version, runs.ErrConflict)
	}
	stored, err := s.GetThread(ctx, t.ID)
	if err != nil {
		return runs.Thread{}, err
	}
	if stored.Version != t.Version {
		// Updated again since: what this call stored is t.
		t.CreatedAt = stored.CreatedAt
		return t, nil
	}
	return stored, nil
}

// DeleteThread implements [runs.ThreadStore].
func (s *Store) DeleteThread(ctx context.Context, id string, version int64) error {
	var n int64
	err := s.w.do(ctx, func() error {
		res, err := s.w.execLocking(ctx, s.threads.del, id, version)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete thread %q: %w", id, err)
	}
	if n == 0 {
		old, err := s.GetThread(ctx, id)
		if err != nil {
			return err
		}
		return fmt.Errorf("sqlite: delete thread %q at version %d: stored version is %d: %w", id, version, old.Version, runs.ErrConflict)
	}
	return nil
}

// ListThreads implements [runs.ThreadStore], with the page tokens of
// ListRuns.
func (s *Store) ListThreads(ctx context.Context, f runs.ThreadFilter) (runs.ThreadPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultPageSize
	}
	limit = min(limit, maxPageSize)
	var (
		rows *sql.Rows
		err  error
	)
	if f.PageToken != "" {
		after, derr := decodePageToken(f.PageToken)
		if derr != nil {
			return runs.ThreadPage{}, fmt.Errorf("sqlite: list threads: %w", derr)
		}
		rows, err = s.threads.listAfter.QueryContext(ctx, after.created, after.id, limit+1)
	} else {
		rows, err = s.threads.listFirst.QueryContext(ctx, limit+1)
	}
	if err != nil {
		return runs.ThreadPage{}, fmt.Errorf("sqlite: list threads: %w", err)
	}
	defer rows.Close()
	page := runs.ThreadPage{Threads: []runs.Thread{}}
	var last pageKey
	for rows.Next() {
		if len(page.Threads) == limit {
			page.NextPageToken = encodePageToken(last)
			break
		}
		var (
			version int64
			record  []byte
		)
		if err := rows.Scan(&last.created, &last.id, &version, &record); err != nil {
			return runs.ThreadPage{}, fmt.Errorf("sqlite: list threads: %w", err)
		}
		t, err := decodeThread(last.created, version, record)
		if err != nil {
			return runs.ThreadPage{}, err
		}
		page.Threads = append(page.Threads, t)
	}
	if err := rows.Err(); err != nil {
		return runs.ThreadPage{}, fmt.Errorf("sqlite: list threads: %w", err)
	}
	return page, nil
}

// CommitFrom implements [runs.Seeder]. It commits step 0 of cp.RunID with
// the values of the channels cp.Changed lists, and records for each
// channel cp inherits (version pregel.Inherited) the key of the step row
// that holds its value: base's own row, or the row base's run inherited it
// from. A run continuing a thread of any length so writes the channels its
// input wrote, one row of origins, and nothing else, and loading any of its
// steps reads at most one more set of rows.
func (s *Store) CommitFrom(ctx context.Context, cp *pregel.Checkpoint, base runs.StepRef) error {
	if err := s.commitFrom(ctx, pregel.PackSegments(cp), base); err != nil {
		return fmt.Errorf("sqlite: commit step %d of run %q from step %d of run %q: %w", cp.Step, cp.RunID, base.Step, base.RunID, err)
	}
	return nil
}

func (s *Store) commitFrom(ctx context.Context, cp *pregel.Checkpoint, base runs.StepRef) error {
	if cp.Step != 0 {
		return fmt.Errorf("a run continues another from its step 0, not %d", cp.Step)
	}
	var inherited []string
	for ch, v := range cp.Versions {
		if v == pregel.Inherited {
			inherited = append(inherited, ch)
		}
	}
	origins := make(map[string]int64, len(inherited))
	if len(inherited) > 0 {
		var (
			data []byte
			step int
			meta stepMeta
			key  int64
		)
		err := s.reads.stepMeta.QueryRowContext(ctx, base.RunID, base.Step).Scan(&step, &data)
		if errors.Is(err, sql.ErrNoRows) {
			return pregel.ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &meta); err != nil {
			return fmt.Errorf("decode step: %w", err)
		}
		if err := s.threads.runKey.QueryRowContext(ctx, base.RunID).Scan(&key); err != nil {
			return err
		}
		var baseOrigins map[string]int64
		baseVersions := meta.versions()
		for _, ch := range inherited {
			v, ok := baseVersions[ch]
			switch {
			case !ok:
				return fmt.Errorf("channel %q is inherited but base has no such channel", ch)
			case v == pregel.Inherited:
				if baseOrigins == nil {
					if baseOrigins, err = s.originsOf(ctx, base.RunID); err != nil {
						return err
					}
				}
				o, ok := baseOrigins[ch]
				if !ok {
					return fmt.Errorf("channel %q: base inherited it from nowhere", ch)
				}
				origins[ch] = o
			default:
				origins[ch] = key<<32 + int64(v)
			}
		}
	}
	changes, err := validate(cp, true)
	if err != nil {
		return err
	}
	stampID, err := s.stampID(ctx, cp.Graph, cp.Stamp)
	if err != nil {
		return err
	}
	meta, err := json.Marshal(newStepMeta(cp, stampID, nil))
	if err != nil {
		return err
	}
	changesJSON, err := json.Marshal(changes)
	if err != nil {
		return err
	}
	originsJSON, err := json.Marshal(origins)
	if err != nil {
		return err
	}
	var n int64
	err = s.w.inTx(ctx, func() error {
		if _, err := s.w.exec(s.w.newRun, cp.RunID); err != nil {
			return err
		}
		if _, err := s.w.exec(s.threads.setOrigins, cp.RunID, originsJSON); err != nil {
			return err
		}
		res, err := s.w.exec(s.w.insertStep, cp.RunID, 0, meta, changesJSON)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			return errNotInserted
		}
		return err
	})
	if errors.Is(err, errNotInserted) {
		return fmt.Errorf("the run has a step 0: %w", pregel.ErrStepConflict)
	}
	return err
}

var errNotInserted = errors.New("step not inserted")

// originsOf returns where the values run inherited are: step row keys by
// channel.
func (s *Store) originsOf(ctx context.Context, runID string) (map[string]int64, error) {
	var data []byte
	err := s.threads.origins.QueryRowContext(ctx, runID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %q inherits values but has no origins", runID)
	}
	if err != nil {
		return nil, err
	}
	var out map[string]int64
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decode origins of run %q: %w", runID, err)
	}
	return out, nil
}

// loadInherited fills in cp the values of the channels it inherited.
func (s *Store) loadInherited(ctx context.Context, cp *pregel.Checkpoint) error {
	origins, err := s.originsOf(ctx, cp.RunID)
	if err != nil {
		return err
	}
	want := map[int64][]string{}
	for ch, v := range cp.Versions {
		if v != pregel.Inherited {
			continue
		}
		o, ok := origins[ch]
		if !ok {
			return fmt.Errorf("channel %q is inherited from nowhere", ch)
		}
		want[o] = append(want[o], ch)
	}
	keys, err := json.Marshal(slices.Sorted(maps.Keys(want)))
	if err != nil {
		return err
	}
	rows, err := s.threads.rows.QueryContext(ctx, string(keys))
	if err != nil {
		return err
	}
	defer rows.Close()
	found := 0
	for rows.Next() {
		var (
			key     int64
			data    []byte
			changes map[string]json.RawMessage
		)
		if err := rows.Scan(&key, &data); err != nil {
			return err
		}
		if err := json.Unmarshal(data, &changes); err != nil {
			return fmt.Errorf("decode inherited values: %w", err)
		}
		for _, ch := range want[key] {
			if v, ok := changes[ch]; ok {
				cp.Values[ch] = v
			}
		}
		found++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if found != len(want) {
		return fmt.Errorf("inherited values name %d steps, %d of them stored", len(want), found)
	}
	return nil
}
