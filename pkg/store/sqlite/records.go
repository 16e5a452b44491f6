package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

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
	record, err := json.Marshal(r)
	if err != nil {
		return runs.Run{}, false, fmt.Errorf("encode: %w", err)
	}
	var n int64
	err = s.w.do(ctx, func() error {
		res, err := s.w.execLocking(ctx, s.w.createRun, r.ID, r.Graph, string(r.Status), r.ContextID, r.CreatedAt.UnixNano(), r.Version, record, graphVersion(r), graphFingerprint(r))
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
	var record []byte
	err := s.reads.getRun.QueryRowContext(ctx, id).Scan(&record)
	if errors.Is(err, sql.ErrNoRows) {
		return runs.Run{}, runs.ErrNotFound
	}
	if err != nil {
		return runs.Run{}, err
	}
	return decodeRun(record)
}

func decodeRun(record []byte) (runs.Run, error) {
	var r runs.Run
	if err := json.Unmarshal(record, &r); err != nil {
		return runs.Run{}, fmt.Errorf("decode run record: %w", err)
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
	// At most twice: a second time if the first found the stored
	// CreatedAt differs from r's.
	for range 2 {
		r.CreatedAt = r.CreatedAt.Round(0)
		record, err := json.Marshal(r)
		if err != nil {
			return runs.Run{}, fmt.Errorf("encode: %w", err)
		}
		var n int64
		err = s.w.do(ctx, func() error {
			res, err := s.w.execLocking(ctx, s.w.updateRun, r.ID, version, r.Graph, string(r.Status), r.ContextID, record, r.CreatedAt.UnixNano(), graphVersion(r), graphFingerprint(r))
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
			return decodeRun(record)
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
		var record []byte
		if err := rows.Scan(&last.created, &last.id, &record); err != nil {
			return runs.Page{}, err
		}
		r, err := decodeRun(record)
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
	q := "SELECT created_at, id, record FROM run_records"
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
