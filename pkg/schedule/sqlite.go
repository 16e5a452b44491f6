package schedule

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/runs"
	_ "modernc.org/sqlite" // the "sqlite" driver
)

// SQLiteStore is a Backend in a SQLite file, in a table of its own
// (schedules), beside what pkg/store/sqlite keeps in the same file.
type SQLiteStore struct {
	db *sql.DB
}

// record is what a row keeps: the schedule and its anchor.
type record struct {
	Schedule
	Anchor time.Time `json:"anchor"`
}

// OpenSQLite opens (creating if need be) the schedules table in the
// SQLite file at path.
func OpenSQLite(ctx context.Context, path string) (*SQLiteStore, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("schedule: open %q: %w", path, err)
	}
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("_txlock", "immediate")
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: p, RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, fmt.Errorf("schedule: open %q: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one writer; schedules are few and small
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schedules (name TEXT PRIMARY KEY, record TEXT NOT NULL)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("schedule: open %q: %w", path, err)
	}
	return &SQLiteStore{db: db}, nil
}

// Close closes the database.
func (s *SQLiteStore) Close() error { return s.db.Close() }

func encode(sc Schedule) (string, error) {
	b, err := json.Marshal(record{Schedule: sc, Anchor: sc.Anchor})
	return string(b), err
}

func decode(raw string) (Schedule, error) {
	var r record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return Schedule{}, fmt.Errorf("schedule: decode: %w", err)
	}
	r.Schedule.Anchor = r.Anchor
	return r.Schedule, nil
}

// Create implements Backend.
func (s *SQLiteStore) Create(ctx context.Context, sc Schedule) (Schedule, error) {
	rec, err := encode(sc)
	if err != nil {
		return Schedule{}, err
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO schedules (name, record) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, sc.Name, rec)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule: create: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Schedule{}, fmt.Errorf("schedule %q exists; choose another name, or update it: %w", sc.Name, runs.ErrConflict)
	}
	return sc, nil
}

// Get implements Backend.
func (s *SQLiteStore) Get(ctx context.Context, name string) (Schedule, error) {
	var raw string
	err := s.db.QueryRowContext(ctx, `SELECT record FROM schedules WHERE name = ?`, name).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return Schedule{}, notFound(name)
	}
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule: get: %w", err)
	}
	return decode(raw)
}

// List implements Backend.
func (s *SQLiteStore) List(ctx context.Context) ([]Schedule, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT record FROM schedules ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("schedule: list: %w", err)
	}
	defer rows.Close()
	out := []Schedule{}
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("schedule: list: %w", err)
		}
		sc, err := decode(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, rows.Err()
}

// Mutate implements Backend, in one transaction.
func (s *SQLiteStore) Mutate(ctx context.Context, name string, fn func(*Schedule) error) (Schedule, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule: update: %w", err)
	}
	defer tx.Rollback()
	var raw string
	err = tx.QueryRowContext(ctx, `SELECT record FROM schedules WHERE name = ?`, name).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return Schedule{}, notFound(name)
	}
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule: update: %w", err)
	}
	sc, err := decode(raw)
	if err != nil {
		return Schedule{}, err
	}
	if err := fn(&sc); err != nil {
		return Schedule{}, err
	}
	rec, err := encode(sc)
	if err != nil {
		return Schedule{}, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schedules SET record = ? WHERE name = ?`, rec, name); err != nil {
		return Schedule{}, fmt.Errorf("schedule: update: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Schedule{}, fmt.Errorf("schedule: update: %w", err)
	}
	return sc, nil
}

// Delete implements Backend.
func (s *SQLiteStore) Delete(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM schedules WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("schedule: delete: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound(name)
	}
	return nil
}
