package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/superstep/superstep/pkg/pregel"
)

// Statements on steps. The key of a step's row is (run << 32) + step,
// where run is the id of the run's row in runs: the steps of a run are
// the keys from run << 32 to (run << 32) + 4294967295, in order, and the
// step of a key k is k & 4294967295. (In SQL, << binds less tightly than
// +.) See migrateToOneRowPerStep for the schema.
const (
	// sqlLatest selects the newest step of run ?1.
	sqlLatest = `
SELECT s.id & 4294967295
FROM runs AS r JOIN steps AS s ON s.id BETWEEN (r.id << 32) AND (r.id << 32) + 4294967295
WHERE r.run_id = ?1
ORDER BY s.id DESC LIMIT 1`

	// sqlLatestMeta selects the newest step of run ?1 and its metadata.
	sqlLatestMeta = `
SELECT s.id & 4294967295, s.meta
FROM runs AS r JOIN steps AS s ON s.id BETWEEN (r.id << 32) AND (r.id << 32) + 4294967295
WHERE r.run_id = ?1
ORDER BY s.id DESC LIMIT 1`

	// sqlStepMeta selects step ?2 of run ?1 and its metadata.
	sqlStepMeta = `
SELECT s.id & 4294967295, s.meta
FROM runs AS r JOIN steps AS s ON s.id = (r.id << 32) + ?2
WHERE r.run_id = ?1`

	// sqlChanges selects the steps of run ?1 that the JSON array ?2
	// lists, and the values of the channels they changed.
	sqlChanges = `
SELECT s.id & 4294967295, s.changes
FROM runs AS r, json_each(?2) AS j JOIN steps AS s ON s.id = (r.id << 32) + j.value
WHERE r.run_id = ?1`

	// sqlHistory selects the steps of run ?1, oldest first, and their
	// metadata.
	sqlHistory = `
SELECT s.id & 4294967295, s.meta
FROM runs AS r JOIN steps AS s ON s.id BETWEEN (r.id << 32) AND (r.id << 32) + 4294967295
WHERE r.run_id = ?1
ORDER BY s.id`

	// sqlHistoryPage selects at most ?3 steps of run ?1 from step ?2 on,
	// oldest first, and their metadata: a range of the steps' keys.
	sqlHistoryPage = `
SELECT s.id & 4294967295, s.meta
FROM runs AS r JOIN steps AS s ON s.id BETWEEN (r.id << 32) + ?2 AND (r.id << 32) + 4294967295
WHERE r.run_id = ?1
ORDER BY s.id
LIMIT ?3`

	// sqlNewRun numbers run ?1, unless it is numbered already.
	sqlNewRun = `INSERT INTO runs (run_id) VALUES (?1) ON CONFLICT DO NOTHING`

	// sqlInsertStep inserts step ?2 of run ?1 with metadata ?3 and
	// channel values ?4, or nothing: the primary key refuses a step
	// stored already, and the trigger steps_in_order a step whose
	// predecessor is missing or whose run is not numbered (run 0, the
	// key of a step of a run without a row in runs).
	//
	// It is INSERT ... VALUES, not INSERT ... SELECT: SQLite copies the
	// rows an INSERT ... SELECT selects into a temporary table first when
	// the target table has triggers.
	sqlInsertStep = `
INSERT INTO steps (id, meta, changes)
VALUES ((coalesce((SELECT id FROM runs WHERE run_id = ?1), 0) << 32) + ?2, ?3, ?4)
ON CONFLICT DO NOTHING`
)

// maxStep is the highest step a key holds.
const maxStep = 1<<32 - 1

// Commit implements [pregel.Checkpointer]. It inserts the step's row, with
// the values of the channels of cp.Changed, if the run's latest step is
// cp.Step-1 (or, for step 0, if the run has no step): one statement, so one
// transaction, that usually writes one page. Step 0 first numbers the run.
//
// A channel stored in segments (see [pregel.PackSegments]) has its
// segments as channels of their own: the step writes only those it changed.
func (s *Store) Commit(ctx context.Context, cp *pregel.Checkpoint) error {
	if err := s.commit(ctx, pregel.PackSegments(cp)); err != nil {
		return fmt.Errorf("sqlite: commit step %d of run %q: %w", cp.Step, cp.RunID, err)
	}
	return nil
}

func (s *Store) commit(ctx context.Context, cp *pregel.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if cp.Step < 0 {
		return pregel.ErrStepConflict
	}
	if cp.Step > maxStep {
		return fmt.Errorf("step %d: this store holds steps up to %d", cp.Step, maxStep)
	}
	changes, err := validate(cp, false)
	if err != nil {
		return err
	}
	stampID, err := s.stampID(ctx, cp.Graph, cp.Stamp)
	if err != nil {
		return err
	}
	metaBuf, changesBuf := getBuffer(), getBuffer()
	defer putBuffer(metaBuf)
	defer putBuffer(changesBuf)
	tasks := getTasks()
	defer putTasks(tasks)
	m := newStepMeta(cp, stampID, *tasks)
	*tasks = m.Tasks
	meta, err := marshalTo(metaBuf, m)
	if err != nil {
		return err
	}
	changesJSON, err := marshalTo(changesBuf, changes)
	if err != nil {
		return fmt.Errorf("encode channel values: %w", err)
	}
	var n int64
	err = s.w.do(ctx, func() error {
		if cp.Step == 0 {
			// Number the run, unless it is numbered already. On its
			// own, a run's row is of no consequence, so it needs no
			// transaction with the step.
			if _, err := s.w.execLocking(ctx, s.w.newRun, cp.RunID); err != nil {
				return err
			}
		}
		res, err := s.w.execLocking(ctx, s.w.insertStep, cp.RunID, cp.Step, meta, changesJSON)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("the run's latest step is not %d: %w", cp.Step-1, pregel.ErrStepConflict)
	}
	return nil
}

// validate checks that cp's Values and Versions agree, as loading it back
// from deltas requires, and returns the values of the channels it changed.
// A channel it cleared has no entry. Channels of version pregel.Inherited
// are accepted in a step 0 only when seeding (CommitFrom), which records
// where their values are.
func validate(cp *pregel.Checkpoint, seeding bool) (map[string]json.RawMessage, error) {
	for ch := range cp.Values {
		if _, ok := cp.Versions[ch]; !ok {
			return nil, fmt.Errorf("invalid checkpoint: channel %q has a value but no version", ch)
		}
	}
	changes := make(map[string]json.RawMessage)
	for ch, v := range cp.Versions {
		if v == pregel.Inherited {
			if cp.Step == 0 && !seeding {
				return nil, fmt.Errorf("invalid checkpoint: channel %q is inherited; commit a step 0 that inherits values with CommitFrom", ch)
			}
			continue
		}
		if v < 0 || v > cp.Step {
			return nil, fmt.Errorf("invalid checkpoint: channel %q has version %d, outside 0..%d", ch, v, cp.Step)
		}
		if val, ok := cp.Values[ch]; ok && v == cp.Step {
			changes[ch] = val
		}
	}
	return changes, nil
}

// RecordTask implements [pregel.Checkpointer].
func (s *Store) RecordTask(ctx context.Context, runID string, step int, r pregel.TaskResult) (pregel.TaskResult, error) {
	stored, err := s.recordTask(ctx, runID, step, r)
	if err != nil {
		return pregel.TaskResult{}, fmt.Errorf("sqlite: record task %q of run %q step %d: %w", r.TaskID, runID, step, err)
	}
	return stored, nil
}

func (s *Store) recordTask(ctx context.Context, runID string, step int, r pregel.TaskResult) (pregel.TaskResult, error) {
	if err := ctx.Err(); err != nil {
		return pregel.TaskResult{}, err
	}
	buf := getBuffer()
	defer putBuffer(buf)
	data, err := marshalTo(buf, r)
	if err != nil {
		return pregel.TaskResult{}, err
	}
	stored := r
	err = s.w.inTx(ctx, func() error {
		var latest int
		switch err := s.w.queryRow(s.w.latest, runID).Scan(&latest); {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("run has no committed step: %w", pregel.ErrNotFound)
		case err != nil:
			return err
		}
		if step != latest+1 {
			return fmt.Errorf("step %d is open: %w", latest+1, pregel.ErrStepConflict)
		}
		res, err := s.w.exec(s.w.upsertPending, runID, step, r.TaskID, r.Final(), data)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		// A final result is already stored: return it.
		var old []byte
		if err := s.w.queryRow(s.w.storedPending, runID, step, r.TaskID).Scan(&old); err != nil {
			return err
		}
		stored = pregel.TaskResult{}
		if err := json.Unmarshal(old, &stored); err != nil {
			return fmt.Errorf("decode stored result: %w", err)
		}
		return nil
	})
	if err != nil {
		return pregel.TaskResult{}, err
	}
	return stored, nil
}

// buffers recycles the buffers that marshalTo encodes into.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuffer() *bytes.Buffer { return buffers.Get().(*bytes.Buffer) }

func putBuffer(b *bytes.Buffer) {
	if b.Cap() > 64<<10 {
		return // let a large one go
	}
	b.Reset()
	buffers.Put(b)
}

// taskLists recycles the scratch space of newStepMeta.
var taskLists = sync.Pool{New: func() any { return new([]storedTask) }}

func getTasks() *[]storedTask { return taskLists.Get().(*[]storedTask) }

func putTasks(t *[]storedTask) {
	if cap(*t) > 1024 {
		return
	}
	clear(*t)
	*t = (*t)[:0]
	taskLists.Put(t)
}

// marshalTo encodes v as JSON into buf, without escaping <, > and &, so
// that the raw JSON values it holds come back byte for byte. It returns
// the bytes of buf, which stay valid until buf is reused.
func marshalTo(buf *bytes.Buffer, v any) ([]byte, error) {
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Reading.

// PendingTasks implements [pregel.Checkpointer]. It returns no results,
// and no error, for an unknown run.
func (s *Store) PendingTasks(ctx context.Context, runID string, step int) ([]pregel.TaskResult, error) {
	out, err := s.pendingTasks(ctx, runID, step)
	if err != nil {
		return nil, fmt.Errorf("sqlite: pending tasks of run %q step %d: %w", runID, step, err)
	}
	return out, nil
}

func (s *Store) pendingTasks(ctx context.Context, runID string, step int) ([]pregel.TaskResult, error) {
	rows, err := s.reads.pending.QueryContext(ctx, runID, step)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pregel.TaskResult
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var r pregel.TaskResult
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("decode: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Load implements [pregel.Checkpointer]. It reads the step's row, whose
// metadata holds every channel's version, and then the rows of the steps
// that wrote the channels' values.
func (s *Store) Load(ctx context.Context, runID string, step int) (*pregel.Checkpoint, error) {
	cp, err := s.load(ctx, runID, step)
	if err == nil {
		cp, err = pregel.UnpackSegments(cp)
	}
	if err != nil {
		what := "latest step"
		if step != pregel.Latest {
			what = fmt.Sprint("step ", step)
		}
		return nil, fmt.Errorf("sqlite: load %s of run %q: %w", what, runID, err)
	}
	return cp, nil
}

func (s *Store) load(ctx context.Context, runID string, step int) (*pregel.Checkpoint, error) {
	// Committed steps never change, so the queries below need no common
	// transaction: a commit running meanwhile adds only later steps.
	var (
		row  *sql.Row
		data []byte
	)
	switch {
	case step == pregel.Latest:
		row = s.reads.latestMeta.QueryRowContext(ctx, runID)
	case step >= 0:
		row = s.reads.stepMeta.QueryRowContext(ctx, runID, step)
	default:
		return nil, pregel.ErrNotFound
	}
	err := row.Scan(&step, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, pregel.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var meta stepMeta
	if err := json.Unmarshal(data, &meta); err != nil {
		return nil, fmt.Errorf("decode step: %w", err)
	}
	graph, stamp, err := s.stamp(ctx, &meta)
	if err != nil {
		return nil, err
	}
	versions := meta.versions()
	cp := &pregel.Checkpoint{
		RunID: runID, Graph: graph, Step: step,
		Values: make(map[string]json.RawMessage, len(versions)), Versions: versions,
		Next: meta.Next, Barriers: meta.Barriers, Tasks: meta.tasks(),
		Counters: pregel.Counters(meta.Counters), DrainRequest: meta.DrainRequest, Stamp: stamp,
	}
	if cp.Versions == nil {
		cp.Versions = make(map[string]int)
	}
	if len(cp.Versions) == 0 {
		return cp, nil
	}
	// The steps that wrote the channels, as a JSON array.
	var steps []int
	inherited := false
	for _, v := range cp.Versions {
		if v == pregel.Inherited {
			inherited = true
			continue
		}
		steps = append(steps, v)
	}
	if inherited {
		if err := s.loadInherited(ctx, cp); err != nil {
			return nil, err
		}
	}
	if len(steps) == 0 {
		return cp, nil
	}
	slices.Sort(steps)
	steps = slices.Compact(steps)
	stepsJSON, err := json.Marshal(steps)
	if err != nil {
		return nil, err
	}
	rows, err := s.reads.changes.QueryContext(ctx, runID, string(stepsJSON)) // TEXT: SQLite reads a BLOB as JSONB
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := 0
	for rows.Next() {
		var (
			at      int
			changes map[string]json.RawMessage
		)
		if err := rows.Scan(&at, &data); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &changes); err != nil {
			return nil, fmt.Errorf("decode the channels of step %d: %w", at, err)
		}
		for ch, v := range changes {
			if version, ok := cp.Versions[ch]; ok && version == at {
				cp.Values[ch] = v
			}
		}
		found++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if found != len(steps) {
		return nil, fmt.Errorf("channel versions name %d steps, %d of them stored", len(steps), found)
	}
	return cp, nil
}

// History implements [pregel.Checkpointer]. It returns an error wrapping
// [pregel.ErrNotFound] for a run with no committed step.
func (s *Store) History(ctx context.Context, runID string) ([]pregel.StepInfo, error) {
	out, err := s.history(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: history of run %q: %w", runID, err)
	}
	return out, nil
}

// HistoryPage lists at most limit committed steps of a run after step
// after (-1 for the first ones), oldest first, reading only those rows;
// none after it is an empty page. (It makes the Store a
// runs.HistoryPager.)
func (s *Store) HistoryPage(ctx context.Context, runID string, after, limit int) ([]pregel.StepInfo, error) {
	out, err := s.historyPage(ctx, runID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: history of run %q after step %d: %w", runID, after, err)
	}
	return out, nil
}

func (s *Store) historyPage(ctx context.Context, runID string, after, limit int) ([]pregel.StepInfo, error) {
	from := max(after+1, 0)
	if limit <= 0 || from > maxStoredStep {
		return nil, ctx.Err()
	}
	rows, err := s.reads.historyPage.QueryContext(ctx, runID, from, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pregel.StepInfo
	for rows.Next() {
		var (
			step int
			data []byte
			meta stepMeta
		)
		if err := rows.Scan(&step, &data); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &meta); err != nil {
			return nil, fmt.Errorf("decode step %d: %w", step, err)
		}
		if want := from + len(out); step != want {
			return nil, fmt.Errorf("step %d stored where step %d belongs", step, want)
		}
		cp := pregel.Checkpoint{Step: step, Versions: meta.versions(), Next: meta.Next, Tasks: meta.tasks()}
		out = append(out, cp.Info())
	}
	return out, rows.Err()
}

// maxStoredStep is the largest step the low 32 bits of a step's key hold.
const maxStoredStep = 4294967295

func (s *Store) history(ctx context.Context, runID string) ([]pregel.StepInfo, error) {
	rows, err := s.reads.history.QueryContext(ctx, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pregel.StepInfo
	for rows.Next() {
		var (
			step int
			data []byte
			meta stepMeta
		)
		if err := rows.Scan(&step, &data); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &meta); err != nil {
			return nil, fmt.Errorf("decode step %d: %w", step, err)
		}
		if step != len(out) {
			return nil, fmt.Errorf("step %d stored after step %d", step, len(out)-1)
		}
		cp := pregel.Checkpoint{Step: step, Versions: meta.versions(), Next: meta.Next, Tasks: meta.tasks()}
		out = append(out, cp.Info())
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, pregel.ErrNotFound
	}
	return out, nil
}
