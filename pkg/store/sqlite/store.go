// Package sqlite implements a [pregel.Checkpointer] on a SQLite database
// file, with the pure Go driver modernc.org/sqlite (no cgo).
//
// A checkpoint is stored as deltas: one row per step holds its metadata
// (graph, next triggers, barriers, node statuses, counters, drain request)
// as JSON, and one row per channel the step changed (the channels of
// [pregel.Checkpoint.Changed]) holds that channel's value. Loading a step
// takes, for each channel, the newest row at or before that step, so a large
// value that never changes is stored once however many steps the run takes.
// A channel that a step lists in Versions but not in Values (the step
// cleared it) gets a row with a NULL value.
//
// Commits and task records run in IMMEDIATE transactions, and a commit
// advances the run's latest step only if it is the step before the one being
// committed. Several processes may therefore share a database file: at most
// one of them commits each step. The database runs in WAL mode, so reads do
// not wait for writes.
//
// The package expects checkpoints built as the engine builds them: every
// channel in Values has a version, and a channel's value changes only at the
// step its version names. Commit rejects a checkpoint whose Values and
// Versions disagree or whose versions lie outside 0..Step; it does not
// compare the values of unchanged channels with those stored.
package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/superstep/superstep/pkg/pregel"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// busyTimeoutMillis is how long a connection waits for another connection's
// write lock, including one held by another process, before failing with
// SQLITE_BUSY.
const busyTimeoutMillis = 10_000

// maxConns bounds the connection pool. Writes are serialised anyway; the
// rest serve concurrent reads.
const maxConns = 8

// Store is a [pregel.Checkpointer] backed by a SQLite database file. It is
// safe for concurrent use, and several Stores, in one process or several,
// may open the same file. Create one with [Open] and release it with
// [Store.Close].
type Store struct {
	db *sql.DB
	// write holds a token while one of this Store's write transactions
	// runs, so that its writers queue here instead of polling SQLite's
	// lock. Writers of other Stores and processes are kept out by BEGIN
	// IMMEDIATE and the busy timeout.
	write chan struct{}
	stmts statements
}

// statements are the prepared statements of a Store.
type statements struct {
	latest        *sql.Stmt
	stepMeta      *sql.Stmt
	values        *sql.Stmt
	historySteps  *sql.Stmt
	historyChange *sql.Stmt
	pending       *sql.Stmt

	startRun      *sql.Stmt
	advanceRun    *sql.Stmt
	insertStep    *sql.Stmt
	insertValue   *sql.Stmt
	deletePending *sql.Stmt
	upsertPending *sql.Stmt
	storedPending *sql.Stmt
}

// Open opens the SQLite database at path, creating the file and its schema
// if they do not exist, and upgrading the schema of an older file. path is a
// file name; an in-memory database is not supported, as each connection of
// the pool would see its own.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: open %q: want the name of a database file", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeoutMillis))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "1")
	q.Set("_txlock", "immediate")
	// A file: URI with the path escaped, so that names holding '?' or
	// '#' work; the driver reads the underscore parameters, SQLite
	// ignores them.
	uriPath := filepath.ToSlash(abs)
	if !strings.HasPrefix(uriPath, "/") { // a Windows drive: file:///C:/...
		uriPath = "/" + uriPath
	}
	dsn := (&url.URL{Scheme: "file", Path: uriPath, RawQuery: q.Encode()}).String()

	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	s := &Store{db: db, write: make(chan struct{}, 1)}
	if err := s.init(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	return s, nil
}

// init checks the journal mode, brings the schema up to date and prepares
// the statements.
func (s *Store) init(ctx context.Context) error {
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, want wal", mode)
	}
	if err := migrate(ctx, s.db); err != nil {
		return err
	}
	return s.prepare(ctx)
}

// Close closes the database. It does not wait for calls in progress.
func (s *Store) Close() error {
	var errs []error
	for _, st := range s.stmts.all() {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, s.db.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite: close: %w", err)
	}
	return nil
}

// Schema.

// migrations returns the schema changes in order: applying the first n
// brings a database to schema version n.
func migrations() []string {
	return []string{
		// Version 1.
		`
CREATE TABLE runs (
	run_id      TEXT    NOT NULL PRIMARY KEY,
	latest_step INTEGER NOT NULL CHECK (latest_step >= 0)
);

CREATE TABLE steps (
	run_id TEXT    NOT NULL REFERENCES runs (run_id),
	step   INTEGER NOT NULL CHECK (step >= 0),
	-- graph, next, barriers, tasks, counters and drain_request, as JSON.
	meta   BLOB    NOT NULL,
	UNIQUE (run_id, step)
);

-- One row per channel a step changed; value is NULL when the step
-- cleared the channel.
CREATE TABLE channel_values (
	run_id  TEXT    NOT NULL,
	channel TEXT    NOT NULL,
	step    INTEGER NOT NULL,
	value   BLOB,
	UNIQUE (run_id, channel, step),
	FOREIGN KEY (run_id, step) REFERENCES steps (run_id, step)
);

-- Results of the tasks of each run's open step; seq keeps the order in
-- which they were first recorded.
CREATE TABLE pending_tasks (
	seq     INTEGER NOT NULL PRIMARY KEY,
	run_id  TEXT    NOT NULL REFERENCES runs (run_id),
	step    INTEGER NOT NULL,
	task_id TEXT    NOT NULL,
	final   INTEGER NOT NULL,
	result  BLOB    NOT NULL,
	UNIQUE (run_id, step, task_id)
);
`,
	}
}

// migrate creates the schema or upgrades it to the newest version.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var version int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&version); err != nil {
		return fmt.Errorf("migrate: read schema version: %w", err)
	}
	ms := migrations()
	if version > len(ms) {
		return fmt.Errorf("migrate: database schema version %d is newer than this program's %d", version, len(ms))
	}
	if version == len(ms) {
		return nil
	}
	for i := version; i < len(ms); i++ {
		if _, err := tx.ExecContext(ctx, ms[i]); err != nil {
			return fmt.Errorf("migrate to schema version %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM schema_version`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (?)`, len(ms)); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

func (s *statements) all() []*sql.Stmt {
	return []*sql.Stmt{
		s.latest, s.stepMeta, s.values, s.historySteps, s.historyChange, s.pending,
		s.startRun, s.advanceRun, s.insertStep, s.insertValue, s.deletePending, s.upsertPending, s.storedPending,
	}
}

func (s *Store) prepare(ctx context.Context) error {
	st := &s.stmts
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&st.latest, `SELECT latest_step FROM runs WHERE run_id = ?`},
		{&st.stepMeta, `SELECT meta FROM steps WHERE run_id = ? AND step = ?`},
		// For each channel, its newest row at or before the step. The
		// subquery reads only the (run_id, channel, step) index; CROSS
		// JOIN keeps it the outer loop, so each value row is then found
		// by its full key.
		{&st.values, `
SELECT c.channel, c.step, c.value
FROM (
	SELECT channel, MAX(step) AS step
	FROM channel_values
	WHERE run_id = ?1 AND step <= ?2
	GROUP BY channel
) AS m
CROSS JOIN channel_values AS c ON c.run_id = ?1 AND c.channel = m.channel AND c.step = m.step`},
		{&st.historySteps, `SELECT step, meta FROM steps WHERE run_id = ? ORDER BY step`},
		{&st.historyChange, `SELECT step, channel FROM channel_values WHERE run_id = ?`},
		{&st.pending, `SELECT result FROM pending_tasks WHERE run_id = ? AND step = ? ORDER BY seq`},
		{&st.startRun, `INSERT INTO runs (run_id, latest_step) VALUES (?, 0) ON CONFLICT (run_id) DO NOTHING`},
		{&st.advanceRun, `UPDATE runs SET latest_step = ?2 WHERE run_id = ?1 AND latest_step = ?2 - 1`},
		{&st.insertStep, `INSERT INTO steps (run_id, step, meta) VALUES (?, ?, ?)`},
		{&st.insertValue, `INSERT INTO channel_values (run_id, channel, step, value) VALUES (?, ?, ?, ?)`},
		{&st.deletePending, `DELETE FROM pending_tasks WHERE run_id = ? AND step = ?`},
		// Insert the result, or replace a stored result that is not final.
		{&st.upsertPending, `
INSERT INTO pending_tasks (run_id, step, task_id, final, result) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (run_id, step, task_id) DO UPDATE SET final = excluded.final, result = excluded.result
WHERE NOT pending_tasks.final`},
		{&st.storedPending, `SELECT result FROM pending_tasks WHERE run_id = ? AND step = ? AND task_id = ?`},
	} {
		stmt, err := s.db.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", strings.TrimSpace(p.sql), err)
		}
		*p.stmt = stmt
	}
	return nil
}

// Writing.

// stepMeta is what a step's row holds besides its channels.
type stepMeta struct {
	Graph        string              `json:"graph"`
	Next         []pregel.Trigger    `json:"next,omitempty"`
	Barriers     map[string][]string `json:"barriers,omitempty"`
	Tasks        []pregel.TaskStatus `json:"tasks,omitempty"`
	Counters     pregel.Counters     `json:"counters"`
	DrainRequest string              `json:"drain_request,omitempty"`
}

// Commit implements [pregel.Checkpointer]. It writes the step's metadata and
// the channels of cp.Changed, in one transaction that first advances the
// run's latest step from cp.Step-1 to cp.Step.
func (s *Store) Commit(ctx context.Context, cp *pregel.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: commit step %d of run %q: %w", cp.Step, cp.RunID, err)
	}
	if cp.Step < 0 {
		return fmt.Errorf("sqlite: commit step %d of run %q: %w", cp.Step, cp.RunID, pregel.ErrStepConflict)
	}
	if err := validate(cp); err != nil {
		return fmt.Errorf("sqlite: commit step %d of run %q: %w", cp.Step, cp.RunID, err)
	}
	meta, err := marshal(stepMeta{
		Graph: cp.Graph, Next: cp.Next, Barriers: cp.Barriers, Tasks: cp.Tasks,
		Counters: cp.Counters, DrainRequest: cp.DrainRequest,
	})
	if err != nil {
		return fmt.Errorf("sqlite: commit step %d of run %q: %w", cp.Step, cp.RunID, err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var res sql.Result
		var err error
		if cp.Step == 0 {
			res, err = tx.StmtContext(ctx, s.stmts.startRun).ExecContext(ctx, cp.RunID)
		} else {
			res, err = tx.StmtContext(ctx, s.stmts.advanceRun).ExecContext(ctx, cp.RunID, cp.Step)
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("the run's latest step is not %d: %w", cp.Step-1, pregel.ErrStepConflict)
		}
		if _, err := tx.StmtContext(ctx, s.stmts.insertStep).ExecContext(ctx, cp.RunID, cp.Step, meta); err != nil {
			return err
		}
		insertValue := tx.StmtContext(ctx, s.stmts.insertValue)
		for _, ch := range cp.Changed() {
			var v any // NULL: the step cleared the channel
			if val, ok := cp.Values[ch]; ok {
				v = []byte(val)
			}
			if _, err := insertValue.ExecContext(ctx, cp.RunID, ch, cp.Step, v); err != nil {
				return fmt.Errorf("channel %q: %w", ch, err)
			}
		}
		_, err = tx.StmtContext(ctx, s.stmts.deletePending).ExecContext(ctx, cp.RunID, cp.Step)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: commit step %d of run %q: %w", cp.Step, cp.RunID, err)
	}
	return nil
}

// validate checks that cp's Values and Versions agree, as loading it back
// from deltas requires.
func validate(cp *pregel.Checkpoint) error {
	for ch := range cp.Values {
		if _, ok := cp.Versions[ch]; !ok {
			return fmt.Errorf("invalid checkpoint: channel %q has a value but no version", ch)
		}
	}
	for ch, v := range cp.Versions {
		if v < 0 || v > cp.Step {
			return fmt.Errorf("invalid checkpoint: channel %q has version %d, outside 0..%d", ch, v, cp.Step)
		}
	}
	return nil
}

// RecordTask implements [pregel.Checkpointer].
func (s *Store) RecordTask(ctx context.Context, runID string, step int, r pregel.TaskResult) (pregel.TaskResult, error) {
	if err := ctx.Err(); err != nil {
		return pregel.TaskResult{}, fmt.Errorf("sqlite: record task %q of run %q step %d: %w", r.TaskID, runID, step, err)
	}
	data, err := marshal(r)
	if err != nil {
		return pregel.TaskResult{}, fmt.Errorf("sqlite: record task %q of run %q step %d: %w", r.TaskID, runID, step, err)
	}
	stored := r
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var latest int
		switch err := tx.StmtContext(ctx, s.stmts.latest).QueryRowContext(ctx, runID).Scan(&latest); {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("run has no committed step: %w", pregel.ErrNotFound)
		case err != nil:
			return err
		}
		if step != latest+1 {
			return fmt.Errorf("step %d is open: %w", latest+1, pregel.ErrStepConflict)
		}
		res, err := tx.StmtContext(ctx, s.stmts.upsertPending).ExecContext(ctx, runID, step, r.TaskID, r.Final(), data)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		// A final result is already stored: return it.
		var old []byte
		if err := tx.StmtContext(ctx, s.stmts.storedPending).QueryRowContext(ctx, runID, step, r.TaskID).Scan(&old); err != nil {
			return err
		}
		stored = pregel.TaskResult{}
		if err := json.Unmarshal(old, &stored); err != nil {
			return fmt.Errorf("decode stored result: %w", err)
		}
		return nil
	})
	if err != nil {
		return pregel.TaskResult{}, fmt.Errorf("sqlite: record task %q of run %q step %d: %w", r.TaskID, runID, step, err)
	}
	return stored, nil
}

// inTx runs fn in a write transaction, which it commits if fn returns nil.
// It maps constraint violations to [pregel.ErrStepConflict].
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	select {
	case s.write <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.write }()

	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: see _txlock in Open
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return conflict(err)
	}
	return conflict(tx.Commit())
}

// conflict wraps err with ErrStepConflict when it is a uniqueness
// violation: another writer stored the same step first. The fence in Commit
// makes that unreachable; this is a second line of defence.
func conflict(err error) error {
	var e *sqlite.Error
	if errors.As(err, &e) && !errors.Is(err, pregel.ErrStepConflict) {
		switch e.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %w", pregel.ErrStepConflict, err)
		}
	}
	return err
}

// marshal encodes v as JSON without escaping <, > and &, so that the raw
// JSON values it holds come back byte for byte.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Reading.

// PendingTasks implements [pregel.Checkpointer]. It returns no results,
// and no error, for an unknown run.
func (s *Store) PendingTasks(ctx context.Context, runID string, step int) ([]pregel.TaskResult, error) {
	rows, err := s.stmts.pending.QueryContext(ctx, runID, step)
	if err != nil {
		return nil, fmt.Errorf("sqlite: pending tasks of run %q step %d: %w", runID, step, err)
	}
	defer rows.Close()
	var out []pregel.TaskResult
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("sqlite: pending tasks of run %q step %d: %w", runID, step, err)
		}
		var r pregel.TaskResult
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("sqlite: pending tasks of run %q step %d: decode: %w", runID, step, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: pending tasks of run %q step %d: %w", runID, step, err)
	}
	return out, nil
}

// Load implements [pregel.Checkpointer]. It rebuilds the step's Values and
// Versions from the newest row of each channel at or before the step.
func (s *Store) Load(ctx context.Context, runID string, step int) (*pregel.Checkpoint, error) {
	cp, err := s.load(ctx, runID, step)
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
	if step == pregel.Latest {
		err := s.stmts.latest.QueryRowContext(ctx, runID).Scan(&step)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, pregel.ErrNotFound
		}
		if err != nil {
			return nil, err
		}
	}
	if step < 0 {
		return nil, pregel.ErrNotFound
	}
	var data []byte
	err := s.stmts.stepMeta.QueryRowContext(ctx, runID, step).Scan(&data)
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
	cp := &pregel.Checkpoint{
		RunID: runID, Graph: meta.Graph, Step: step,
		Values: make(map[string]json.RawMessage), Versions: make(map[string]int),
		Next: meta.Next, Barriers: meta.Barriers, Tasks: meta.Tasks,
		Counters: meta.Counters, DrainRequest: meta.DrainRequest,
	}
	rows, err := s.stmts.values.QueryContext(ctx, runID, step)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			ch      string
			version int
			value   []byte
		)
		if err := rows.Scan(&ch, &version, &value); err != nil {
			return nil, err
		}
		cp.Versions[ch] = version
		if value != nil {
			cp.Values[ch] = value
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
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

func (s *Store) history(ctx context.Context, runID string) ([]pregel.StepInfo, error) {
	// A read transaction (plain BEGIN, despite _txlock) so both queries
	// see the same steps.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()

	var out []pregel.StepInfo
	rows, err := tx.StmtContext(ctx, s.stmts.historySteps).QueryContext(ctx, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
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
		next := make([]string, 0, len(meta.Next))
		for _, t := range meta.Next {
			next = append(next, t.Node)
		}
		if step != len(out) {
			return nil, fmt.Errorf("step %d stored after step %d", step, len(out)-1)
		}
		out = append(out, pregel.StepInfo{Step: step, Tasks: meta.Tasks, Next: next})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, pregel.ErrNotFound
	}

	changes, err := tx.StmtContext(ctx, s.stmts.historyChange).QueryContext(ctx, runID)
	if err != nil {
		return nil, err
	}
	defer changes.Close()
	for changes.Next() {
		var (
			step int
			ch   string
		)
		if err := changes.Scan(&step, &ch); err != nil {
			return nil, err
		}
		if step >= 0 && step < len(out) {
			out[step].Changed = append(out[step].Changed, ch)
		}
	}
	if err := changes.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		slices.Sort(out[i].Changed)
	}
	return out, nil
}

// Compile-time check that Store implements the interface.
var _ pregel.Checkpointer = (*Store)(nil)
