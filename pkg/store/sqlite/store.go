// Package sqlite implements a [pregel.Checkpointer] and a [runs.Store] on
// one SQLite database file, with the pure Go driver modernc.org/sqlite (no
// cgo).
//
// # Checkpoints
//
// A checkpoint is stored as deltas, one row per step: the step's metadata
// (graph, next triggers, barriers, node statuses, counters, drain request
// and the version of every channel) and the values of the channels the
// step changed (those of [pregel.Checkpoint.Changed]), each as JSON.
// Loading a step reads its row, then the rows of the steps that its
// channel versions name, so a large value that never changes is stored
// once however many steps the run takes. A channel that a step lists in
// Versions but not in Values (the step cleared it) has a version and no
// value. Values come back byte for byte if they were compact JSON, and
// compacted otherwise.
//
// A commit is one INSERT statement, so one transaction, that stores the
// step only if the run's previous step is stored and the step itself is
// not: the steps of a run stay contiguous and at most one writer commits
// each step. Inserting a step deletes the task results recorded for it, in
// the same statement. The row's key keeps each run's steps together and in
// order, so that a commit usually writes a single page to the WAL; see
// migrateToOneRowPerStep for the schema.
//
// The package expects checkpoints built as the engine builds them: every
// channel in Values has a version, and a channel's value changes only at the
// step its version names. Commit rejects a checkpoint whose Values and
// Versions disagree or whose versions lie outside 0..Step; it does not
// compare the values of unchanged channels with those stored.
//
// # Run records
//
// Run records ([runs.Run]) are stored as JSON, one row per run, beside
// columns for the fields that [runs.Store.ListRuns] filters and orders by.
// Updates are optimistic: an update applies only if the stored version is
// the one the caller read. Page tokens encode the CreatedAt and id of the
// last run of a page, so a listing pages through an index, and runs created
// meanwhile neither shift nor repeat its pages.
//
// # Concurrency and durability
//
// The database runs in WAL mode with synchronous=NORMAL: a committed
// transaction survives a crash of the process as soon as the call returns,
// and a power loss once the WAL has been synced, at the next checkpoint of
// the WAL into the database file (SQLite's automatic checkpoints, every
// 1000 pages of WAL). A commit makes no fsync of its own. Reads do not wait
// for writes.
//
// A Store keeps one connection for its writes, with its statements prepared
// on it. Its writers queue for that connection; while another Store or
// process holds SQLite's write lock, a writer retries on SQLite's schedule
// until it gets the lock, its context is done, or a busy timeout passes.
// Writes of several statements run in IMMEDIATE transactions. Reads use a
// pool of other connections. Several Stores, in one process or several, may
// therefore share a database file, and may open a new one at the same time:
// Open waits, as a write does, while another opens and sets it up.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// busyTimeout is how long a write waits for another connection's write
// lock, including one held by another process, before failing with
// SQLITE_BUSY; reads wait as long for the rare locks they need (WAL
// recovery after a crash, for one).
const busyTimeout = 10 * time.Second

// maxConns bounds the connection pool: the write connection and up to
// maxConns-1 connections serving concurrent reads.
const maxConns = 8

// Compile-time checks that Store implements the interfaces.
var (
	_ pregel.Checkpointer = (*Store)(nil)
	_ runs.Store          = (*Store)(nil)
)

// Store is a [pregel.Checkpointer] and a [runs.Store] backed by a SQLite
// database file. It is safe for concurrent use, and several Stores, in one
// process or several, may open the same file. Create one with [Open] and
// release it with [Store.Close].
type Store struct {
	// db is the pool of read connections; it also holds w's connection.
	db *sql.DB
	w  *writer
	// Statements prepared on the pool, for reads.
	reads readStatements
	// lists holds the ListRuns statements, by filter.
	lists listStatements
	// events is the run event log's (events.go).
	events eventStatements
	// threads holds the statements of threads (threads.go).
	threads threadStatements
	// push holds the statements of push configs (push.go).
	push pushStatements
	// stamps caches the graph version stamps of the stamps table
	// (meta.go).
	stamps stamps
}

// readStatements are the prepared statements of reads.
type readStatements struct {
	latestMeta *sql.Stmt
	stepMeta   *sql.Stmt
	changes    *sql.Stmt
	history    *sql.Stmt
	// historyPage reads a page of a run's history (HistoryPage).
	historyPage *sql.Stmt
	pending     *sql.Stmt
	getRun      *sql.Stmt
	stamp       *sql.Stmt
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
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	// No _journal_mode: init switches the file to WAL once, waiting for
	// other processes doing the same (see setWAL).
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "1")   // those of schema version 1, until it is migrated
	q.Set("_txlock", "immediate") // for the migration's transaction
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
	s := &Store{db: db}
	if err := s.init(ctx); err != nil {
		s.close()
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	return s, nil
}

// init puts the database in WAL mode, brings the schema up to date and
// prepares the statements.
func (s *Store) init(ctx context.Context) error {
	if err := setWAL(ctx, s.db); err != nil {
		return err
	}
	if err := migrate(ctx, s.db); err != nil {
		return err
	}
	w, err := newWriter(ctx, s.db)
	if err != nil {
		return err
	}
	s.w = w
	if err := s.prepareThreads(ctx); err != nil {
		return err
	}
	if err := s.preparePush(ctx); err != nil {
		return err
	}
	return prepareAll(ctx, s.db, []prepared{
		{&s.reads.latestMeta, sqlLatestMeta},
		{&s.reads.stepMeta, sqlStepMeta},
		{&s.reads.changes, sqlChanges},
		{&s.reads.history, sqlHistory},
		{&s.reads.historyPage, sqlHistoryPage},
		{&s.reads.pending, `SELECT result FROM pending_tasks WHERE run_id = ? AND step = ? ORDER BY seq`},
		{&s.reads.getRun, `SELECT ` + runColumnList + ` FROM run_records WHERE id = ?`},
		{&s.reads.stamp, `SELECT stamp FROM stamps WHERE id = ?`},
	})
}

// Close closes the database. It waits for the write in progress, if any,
// but not for reads.
func (s *Store) Close() error {
	if err := s.close(); err != nil {
		return fmt.Errorf("sqlite: close: %w", err)
	}
	return nil
}

func (s *Store) close() error {
	var errs []error
	if s.w != nil {
		errs = append(errs, s.w.close())
	}
	r := &s.reads
	for _, st := range append([]*sql.Stmt{r.latestMeta, r.stepMeta, r.changes, r.history, r.historyPage, r.pending, r.getRun, r.stamp}, append(s.threads.all(), s.push.all()...)...) {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, s.lists.close())
	errs = append(errs, s.events.close())
	errs = append(errs, s.db.Close())
	return errors.Join(errs...)
}

// prepared names a statement to prepare and where to keep it.
type prepared struct {
	stmt **sql.Stmt
	sql  string
}

// preparer is a *sql.DB or a *sql.Conn.
type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// prepareAll prepares the statements of ps on p.
func prepareAll(ctx context.Context, p preparer, ps []prepared) error {
	for _, x := range ps {
		stmt, err := p.PrepareContext(ctx, x.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", strings.TrimSpace(x.sql), err)
		}
		*x.stmt = stmt
	}
	return nil
}

// Writing.

// writer is a Store's write connection and the statements prepared on it.
// A goroutine must hold its token (see acquire) to use it.
type writer struct {
	// token holds a value while a goroutine uses the connection, so that
	// the Store's writers queue here instead of polling SQLite's lock.
	// Writers of other Stores and processes are kept out by SQLite's
	// write lock: see execLocking.
	token chan struct{}
	conn  *sql.Conn
	// closed is set, with the token held, when the Store is closed.
	closed bool

	begin, commit, rollback *sql.Stmt

	newRun        *sql.Stmt
	insertStep    *sql.Stmt
	addStamp      *sql.Stmt
	stampByJSON   *sql.Stmt
	latest        *sql.Stmt
	upsertPending *sql.Stmt
	storedPending *sql.Stmt

	createRun *sql.Stmt
	updateRun *sql.Stmt

	// The long-term store's writes (longterm.go).
	ltPut, ltDelete, ltPurge *sql.Stmt
}

// newWriter takes a connection from db for writes and prepares its
// statements.
func newWriter(ctx context.Context, db *sql.DB) (*writer, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	// The connection does not wait for locks itself; execLocking does.
	if _, err := conn.ExecContext(ctx, `PRAGMA busy_timeout = 0`); err != nil {
		conn.Close()
		return nil, err
	}
	w := &writer{token: make(chan struct{}, 1), conn: conn}
	err = prepareAll(ctx, conn, []prepared{
		{&w.begin, `BEGIN IMMEDIATE`},
		{&w.commit, `COMMIT`},
		{&w.rollback, `ROLLBACK`},
		{&w.newRun, sqlNewRun},
		{&w.insertStep, sqlInsertStep},
		{&w.addStamp, `INSERT INTO stamps (stamp) VALUES (?) ON CONFLICT (stamp) DO NOTHING`},
		{&w.stampByJSON, `SELECT id FROM stamps WHERE stamp = ?`},
		{&w.latest, sqlLatest},
		// Insert the result, or replace a stored result that is not
		// final.
		{&w.upsertPending, `
INSERT INTO pending_tasks (run_id, step, task_id, final, result) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (run_id, step, task_id) DO UPDATE SET final = excluded.final, result = excluded.result
WHERE NOT pending_tasks.final`},
		{&w.storedPending, `SELECT result FROM pending_tasks WHERE run_id = ? AND step = ? AND task_id = ?`},
		{&w.createRun, `
INSERT INTO run_records (id, graph, status, context_id, created_at, version, record, graph_version, graph_fingerprint, stamp_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING`},
		{&w.updateRun, `
UPDATE run_records SET graph = ?3, status = ?4, context_id = ?5, version = ?2 + 1, record = ?6, graph_version = ?8, graph_fingerprint = ?9, stamp_id = ?10
WHERE id = ?1 AND version = ?2 AND created_at = ?7`},
		// Last writer wins; a replaced item keeps its created_at.
		{&w.ltPut, `INSERT INTO longterm_items (` + longTermColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (sort_key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,
	expires_at = excluded.expires_at, vector = excluded.vector,
	created_at = CASE WHEN longterm_items.expires_at > 0 AND longterm_items.expires_at <= excluded.updated_at
		THEN excluded.created_at ELSE longterm_items.created_at END`},
		{&w.ltDelete, `DELETE FROM longterm_items WHERE sort_key = ?`},
		{&w.ltPurge, `DELETE FROM longterm_items WHERE sort_key IN
	(SELECT sort_key FROM longterm_items WHERE expires_at > 0 AND expires_at <= ? LIMIT ?)`},
	})
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// errClosed is returned by the methods of a closed Store.
var errClosed = errors.New("store is closed")

// acquire waits for the write connection. The caller must call release
// when done with it.
func (w *writer) acquire(ctx context.Context) error {
	select {
	case w.token <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if w.closed {
		w.release()
		return errClosed
	}
	return nil
}

func (w *writer) release() { <-w.token }

// exec runs a statement on the write connection, which the caller holds.
//
// It does not pass the caller's context to the driver, which would start a
// goroutine per statement to watch a context that can be cancelled. The
// statements it runs wait for nothing: those that take the write lock run
// through execLocking, which does the waiting and watches the context, and
// the others run in a transaction that holds the lock.
func (w *writer) exec(st *sql.Stmt, args ...any) (sql.Result, error) {
	return st.ExecContext(context.Background(), args...)
}

// queryRow runs a query on the write connection, as exec does.
func (w *writer) queryRow(st *sql.Stmt, args ...any) *sql.Row {
	return st.QueryRowContext(context.Background(), args...)
}

// busyDelays is the schedule of execLocking's retries, SQLite's own: the
// pause before the first, second... retry; the last repeats.
var busyDelays = [...]time.Duration{1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100}

// execLocking runs st, a statement that takes the write lock before it does
// anything (BEGIN IMMEDIATE, or a write statement outside a transaction).
// While another connection holds the lock, it runs st again after a pause,
// until ctx is done or busyTimeout has passed.
func (w *writer) execLocking(ctx context.Context, st *sql.Stmt, args ...any) (sql.Result, error) {
	var waited time.Duration
	for i := 0; ; i++ {
		res, err := w.exec(st, args...)
		if !isBusy(err) {
			return res, err
		}
		pause := busyDelays[min(i, len(busyDelays)-1)] * time.Millisecond
		if waited+pause > busyTimeout {
			return nil, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		waited += pause
	}
}

// setWAL switches the database to WAL mode, which the file keeps. Switching
// a new file takes an exclusive lock, and SQLite answers SQLITE_BUSY at once,
// without waiting for the busy timeout, when another connection (another
// process opening the same new file, say) holds a lock meanwhile; so the
// switch is tried again on execLocking's schedule until busyTimeout has
// passed. On a file already in WAL mode it takes no lock.
func setWAL(ctx context.Context, db *sql.DB) error {
	var waited time.Duration
	for i := 0; ; i++ {
		var mode string
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		switch {
		case err == nil && strings.EqualFold(mode, "wal"):
			return nil
		case err == nil:
			return fmt.Errorf("journal mode is %q and cannot be set to wal", mode)
		case !isBusy(err):
			return fmt.Errorf("set journal mode to wal: %w", err)
		}
		pause := busyDelays[min(i, len(busyDelays)-1)] * time.Millisecond
		if waited+pause > busyTimeout {
			return fmt.Errorf("set journal mode to wal: %w", err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		waited += pause
	}
}

// isBusy reports whether err says that another connection holds a lock.
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// do runs fn with the write connection held, outside a transaction.
func (w *writer) do(ctx context.Context, fn func() error) error {
	if err := w.acquire(ctx); err != nil {
		return err
	}
	defer w.release()
	return fn()
}

// inTx runs fn in an IMMEDIATE transaction on the write connection, which
// it commits if fn returns nil and rolls back otherwise.
func (w *writer) inTx(ctx context.Context, fn func() error) error {
	return w.do(ctx, func() error {
		if _, err := w.execLocking(ctx, w.begin); err != nil {
			return err
		}
		if err := fn(); err != nil {
			w.abort()
			return err
		}
		if _, err := w.exec(w.commit); err != nil {
			w.abort()
			return err
		}
		return nil
	})
}

// abort rolls back the transaction in progress, if any. SQLite may have
// rolled it back already (after some errors it does), so the error of the
// ROLLBACK is of no interest.
func (w *writer) abort() {
	_, _ = w.exec(w.rollback)
}

// close closes the statements and gives the connection back to the pool.
// It waits for the goroutine using the connection, if any.
func (w *writer) close() error {
	w.token <- struct{}{}
	defer w.release()
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	for _, st := range []*sql.Stmt{w.begin, w.commit, w.rollback, w.newRun, w.insertStep, w.addStamp, w.stampByJSON, w.latest, w.upsertPending, w.storedPending, w.createRun, w.updateRun, w.ltPut, w.ltDelete, w.ltPurge} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, w.conn.Close())
	return errors.Join(errs...)
}
