package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Page sizes of ListRuns, as the memory store has them.
const (
	defaultPageSize = 50
	maxPageSize     = 500
)

// CreateRun implements [runs.Store]. A new record gets Version 1; a zero
// UpdatedAt is set to CreatedAt. The record returned is the one stored,
// read back.
func (s *Store) CreateRun(ctx context.Context, r runs.Run) (runs.Run, bool, error) {
	stored, created, err := s.createRun(ctx, r)
	if err != nil {
		return runs.Run{}, false, fmt.Errorf("sqlite: create run %q: %w", r.ID, err)
	}
	return stored, created, nil
}

func (s *Store) createRun(ctx context.Context, r runs.Run) (runs.Run, bool, error) {
	if err := ctx.Err(); err != nil {
		return runs.Run{}, false, err
	}
	if r.ID == "" {
		return runs.Run{}, false, fmt.Errorf("empty run id: %w", runs.ErrInvalid)
	}
	r.CreatedAt = r.CreatedAt.Round(0)
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	r.Version = 1
	stampID, err := s.runStampID(ctx, r)
	if err != nil {
		return runs.Run{}, false, err
	}
	record, err := encodeRun(&r, stampID)
	if err != nil {
		return runs.Run{}, false, fmt.Errorf("encode: %w", err)
	}
	var n int64
	err = s.w.do(ctx, func() error {
		res, err := s.w.execLocking(ctx, s.w.createRun, r.ID, r.Graph, string(r.Status), r.ContextID, r.CreatedAt.UnixNano(), r.Version, record, graphVersion(r), graphFingerprint(r), stampID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return runs.Run{}, false, err
	}
	// Records are deleted only with their thread, which no run of it
	// holds then, so the run read back is the one stored, by this call
	// or, when n is 0, before it.
	stored, err := s.getRun(ctx, r.ID)
	if err != nil {
		return runs.Run{}, false, err
	}
	return stored, n > 0, nil
}

// GetRun implements [runs.Store].
func (s *Store) GetRun(ctx context.Context, id string) (runs.Run, error) {
	r, err := s.getRun(ctx, id)
	if err != nil {
		return runs.Run{}, fmt.Errorf("sqlite: get run %q: %w", id, err)
	}
	return r, nil
}

func (s *Store) getRun(ctx context.Context, id string) (runs.Run, error) {
	var c runColumns
	err := s.reads.getRun.QueryRowContext(ctx, id).Scan(c.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return runs.Run{}, runs.ErrNotFound
	}
	if err != nil {
		return runs.Run{}, err
	}
	return s.decodeRun(ctx, &c)
}

// runColumnList are the columns of run_records that runColumns scans, in
// its order.
const runColumnList = "id, graph, status, context_id, created_at, version, stamp_id, record"

// runColumns are a row of run_records: the record and the columns that
// hold its fields.
type runColumns struct {
	id, graph, status, contextID string
	created, version, stampID    int64
	record                       []byte
}

// dest returns where Scan stores runColumnList.
func (c *runColumns) dest() []any {
	return []any{&c.id, &c.graph, &c.status, &c.contextID, &c.created, &c.version, &c.stampID, &c.record}
}

// storedRun is the compact form of a run record (schema version 9): the
// JSON of the runs.Run without the fields its row's columns hold (id,
// graph, status, context id, created_at when it is in UTC, version) and
// without its graph version, which the stamps table holds (the column
// stamp_id names it), and with zero counters left out. About 200 bytes a
// run less than the plain JSON. The outer fields shadow the Run's of the
// same JSON name; nil, they are left out.
//
// Records of earlier versions are the whole JSON of the runs.Run; a
// record without a run_id is of the compact form (see decodeRun).
type storedRun struct {
	*runs.Run
	ID           *struct{}      `json:"run_id,omitempty"`
	Graph        *struct{}      `json:"graph,omitempty"`
	Status       *struct{}      `json:"status,omitempty"`
	ContextID    *struct{}      `json:"context_id,omitempty"`
	CreatedAt    *time.Time     `json:"created_at,omitempty"`
	Version      *struct{}      `json:"version,omitempty"`
	GraphVersion *pregel.Stamp  `json:"graph_version,omitempty"`
	Counters     storedCounters `json:"counters,omitzero"`
}

// encodeRun returns the compact record of r, whose graph version is row
// stampID of the stamps table (0: it has none).
func encodeRun(r *runs.Run, stampID int64) ([]byte, error) {
	sr := storedRun{Run: r, Counters: storedCounters(r.Counters)}
	if y := r.CreatedAt.Year(); r.CreatedAt.Location() != time.UTC || y < 1700 || y > 2200 {
		// The column, in Unix nanoseconds, would not give it back.
		sr.CreatedAt = &r.CreatedAt
	}
	if stampID == 0 {
		sr.GraphVersion = r.GraphVersion
	}
	return json.Marshal(sr)
}

// runStampID returns the number of r's graph version in the stamps table,
// adding it if new; 0 when r has none.
func (s *Store) runStampID(ctx context.Context, r runs.Run) (int64, error) {
	if r.GraphVersion == nil {
		return 0, nil
	}
	return s.stampRowID(ctx, r.Graph, r.GraphVersion)
}

// decodeRun returns the run of a row of run_records, of the compact form
// or an earlier one.
func (s *Store) decodeRun(ctx context.Context, c *runColumns) (runs.Run, error) {
	var r runs.Run
	if err := json.Unmarshal(c.record, &r); err != nil {
		return runs.Run{}, fmt.Errorf("decode run record: %w", err)
	}
	if r.ID != "" {
		// Of an earlier schema version: the whole run.
		return r, nil
	}
	r.ID, r.Graph, r.Status, r.ContextID, r.Version = c.id, c.graph, pregel.RunStatus(c.status), c.contextID, c.version
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Unix(0, c.created).UTC()
	}
	if c.stampID != 0 {
		row, err := s.stampRow(ctx, c.stampID)
		if err != nil {
			return runs.Run{}, err
		}
		// A copy: the caller may change it.
		st := row.Stamp
		st.Reducers = maps.Clone(st.Reducers)
		r.GraphVersion = &st
	}
	return r, nil
}

// UpdateRun implements [runs.Store]. It stores r if the stored version is
// r.Version, with Version incremented and UpdatedAt set to now. A run's
// CreatedAt cannot change: the stored one is kept.
func (s *Store) UpdateRun(ctx context.Context, r runs.Run) (runs.Run, error) {
	out, err := s.updateRun(ctx, r)
	if err != nil {
		return runs.Run{}, fmt.Errorf("sqlite: update run %q at version %d: %w", r.ID, r.Version, err)
	}
	return out, nil
}

func (s *Store) updateRun(ctx context.Context, r runs.Run) (runs.Run, error) {
	if err := ctx.Err(); err != nil {
		return runs.Run{}, err
	}
	version := r.Version
	r.Version++
	r.UpdatedAt = time.Now().UTC()
	stampID, err := s.runStampID(ctx, r)
	if err != nil {
		return runs.Run{}, err
	}
	// At most twice: a second time if the first found the stored
	// CreatedAt differs from r's.
	for range 2 {
		r.CreatedAt = r.CreatedAt.Round(0)
		record, err := encodeRun(&r, stampID)
		if err != nil {
			return runs.Run{}, fmt.Errorf("encode: %w", err)
		}
		var n int64
		err = s.w.do(ctx, func() error {
			res, err := s.w.execLocking(ctx, s.w.updateRun, r.ID, version, r.Graph, string(r.Status), r.ContextID, record, r.CreatedAt.UnixNano(), graphVersion(r), graphFingerprint(r), stampID)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return runs.Run{}, err
		}
		if n > 0 {
			// What a read would return.
			return s.decodeRun(ctx, &runColumns{id: r.ID, graph: r.Graph, status: string(r.Status), contextID: r.ContextID,
				created: r.CreatedAt.UnixNano(), version: r.Version, stampID: stampID, record: record})
		}
		// Nothing updated: say why.
		old, err := s.getRun(ctx, r.ID)
		if err != nil {
			return runs.Run{}, err
		}
		if old.Version != version {
			return runs.Run{}, fmt.Errorf("stored version is %d: %w", old.Version, runs.ErrConflict)
		}
		r.CreatedAt = old.CreatedAt
	}
	return runs.Run{}, fmt.Errorf("the stored run changed meanwhile: %w", runs.ErrConflict)
}

// ListRuns implements [runs.Store]. Page tokens are opaque; they stay
// valid while runs are created.
func (s *Store) ListRuns(ctx context.Context, f runs.Filter) (runs.Page, error) {
	page, err := s.listRuns(ctx, f)
	if err != nil {
		return runs.Page{}, fmt.Errorf("sqlite: list runs: %w", err)
	}
	return page, nil
}

func (s *Store) listRuns(ctx context.Context, f runs.Filter) (runs.Page, error) {
	if err := ctx.Err(); err != nil {
		return runs.Page{}, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultPageSize
	}
	limit = min(limit, maxPageSize)
	var (
		key  listFilter
		args []any
	)
	if f.Graph != "" {
		key |= byGraph
		args = append(args, f.Graph)
	}
	if f.Status != "" {
		key |= byStatus
		args = append(args, string(f.Status))
	}
	if f.ContextID != "" {
		key |= byContext
		args = append(args, f.ContextID)
	}
	if f.Version != "" {
		key |= byVersion
		args = append(args, f.Version, f.Version)
	}
	if f.PageToken != "" {
		after, err := decodePageToken(f.PageToken)
		if err != nil {
			return runs.Page{}, err
		}
		key |= afterKey
		args = append(args, after.created, after.id)
	}
	// One more than the page, to know whether another page follows.
	args = append(args, limit+1)
	st, err := s.lists.get(ctx, s.db, key)
	if err != nil {
		return runs.Page{}, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return runs.Page{}, err
	}
	defer rows.Close()
	var page runs.Page
	var last pageKey
	for rows.Next() {
		if len(page.Runs) == limit {
			page.NextPageToken = encodePageToken(last)
			break
		}
		var c runColumns
		if err := rows.Scan(c.dest()...); err != nil {
			return runs.Page{}, err
		}
		last = pageKey{created: c.created, id: c.id}
		r, err := s.decodeRun(ctx, &c)
		if err != nil {
			return runs.Page{}, err
		}
		page.Runs = append(page.Runs, r)
	}
	if err := rows.Err(); err != nil {
		return runs.Page{}, err
	}
	return page, nil
}

// graphVersion and graphFingerprint are the columns of r's graph version.
func graphVersion(r runs.Run) string {
	if r.GraphVersion == nil {
		return ""
	}
	return r.GraphVersion.Version
}

func graphFingerprint(r runs.Run) string {
	if r.GraphVersion == nil {
		return ""
	}
	return r.GraphVersion.Fingerprint
}

// listFilter says which conditions a listing has: a set of the flags
// below.
type listFilter uint8

const (
	byGraph listFilter = 1 << iota
	byStatus
	byContext
	byVersion
	afterKey // a page token
	numListFilters
)

// listStatements are the prepared ListRuns statements, one per filter,
// prepared when first used.
type listStatements struct {
	mu    sync.Mutex
	stmts [numListFilters]*sql.Stmt
}

// get returns the statement of filter key, preparing it on db if needed.
// Its arguments are those of the conditions of key in the order of the
// flags, a page token taking two (created_at, id), and then the limit.
func (l *listStatements) get(ctx context.Context, db *sql.DB, key listFilter) (*sql.Stmt, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.stmts[key]; st != nil {
		return st, nil
	}
	var where []string
	if key&byGraph != 0 {
		where = append(where, "graph = ?")
	}
	if key&byStatus != 0 {
		where = append(where, "status = ?")
	}
	if key&byContext != 0 {
		where = append(where, "context_id = ?")
	}
	if key&byVersion != 0 {
		where = append(where, "(graph_version = ? OR graph_fingerprint = ?)")
	}
	if key&afterKey != 0 {
		where = append(where, "(created_at, id) < (?, ?)")
	}
	q := "SELECT " + runColumnList + " FROM run_records"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at DESC, id DESC LIMIT ?"
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", q, err)
	}
	l.stmts[key] = st
	return st, nil
}

// close closes the statements prepared.
func (l *listStatements) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for i, st := range l.stmts {
		if st != nil {
			errs = append(errs, st.Close())
			l.stmts[i] = nil
		}
	}
	return errors.Join(errs...)
}

// pageKey is where a listing continues: after the run with this
// created_at and id, in the order newest first.
type pageKey struct {
	created int64 // CreatedAt in Unix nanoseconds
	id      string
}

func encodePageToken(k pageKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(k.created, 10) + "|" + k.id))
}

func decodePageToken(tok string) (pageKey, error) {
	bad := fmt.Errorf("page token %q is not one this store issued; start the listing again without it: %w", tok, runs.ErrInvalid)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return pageKey{}, bad
	}
	ts, id, ok := strings.Cut(string(raw), "|")
	if !ok || id == "" {
		return pageKey{}, bad
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return pageKey{}, bad
	}
	return pageKey{n, id}, nil
}

// The Store reads a run's history a page at a time (HistoryPage).
var _ runs.HistoryPager = (*Store)(nil)
