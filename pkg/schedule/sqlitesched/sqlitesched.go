// Package sqlitesched keeps pkg/schedule's schedules in a SQLite file
// (the dev server's): a [schedule.Backend]. It is a package of its own so
// that programs that keep schedules elsewhere (the Lambda functions, with
// EventBridge Scheduler) do not link the SQLite driver, whose
// initialisers every process start pays for.
package sqlitesched

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
	"github.com/superstep/superstep/pkg/schedule"
	_ "modernc.org/sqlite" // the "sqlite" driver
)

// Store is a schedule.Backend in a SQLite file, in a table of its own
// (schedules), beside what pkg/store/sqlite keeps in the same file.
type Store struct {
	db *sql.DB
}

// record is what a row keeps: the schedule and its anchor.
type record struct {
	schedule.Schedule
	Anchor time.Time `json:"anchor"`
}

// Open opens (creating if need be) the schedules table in the
// SQLite file at path.
func Open(ctx context.Context, path string) (*Store, error) {
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
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func encode(sc schedule.Schedule) (string, error) {
	b, err := json.Marshal(record{Schedule: sc, Anchor: sc.Anchor})
	return string(b), err
}

func decode(raw string) (schedule.Schedule, error) {
	var r record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return schedule.Schedule{}, fmt.Errorf("schedule: decode: %w", err)
	}
	r.Schedule.Anchor = r.Anchor
	return r.Schedule, nil
}

// Create implements schedule.Backend.
func (s *Store) Create(ctx context.Context, sc schedule.Schedule) (schedule.Schedule, error) {
	rec, err := encode(sc)
	if err != nil {
		return schedule.Schedule{}, err
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO schedules (name, record) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, sc.Name, rec)
	if err != nil {
		return schedule.Schedule{}, fmt.Errorf("schedule: create: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return schedule.Schedule{}, fmt.Errorf("schedule %q exists; choose another name, or update it: %w", sc.Name, runs.ErrConflict)
	}
	return sc, nil
}

// Get implements schedule.Backend.
func (s *Store) Get(ctx context.Context, name string) (schedule.Schedule, error) {
	var raw string
	err := s.db.QueryRowContext(ctx, `SELECT record FROM schedules WHERE name = ?`, name).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return schedule.Schedule{}, fmt.Errorf("there is no schedule %q: %w", name, runs.ErrNotFound)
	}
	if err != nil {
		return schedule.Schedule{}, fmt.Errorf("schedule: get: %w", err)
	}
	return decode(raw)
}

// List implements schedule.Backend.
func (s *Store) List(ctx context.Context) ([]schedule.Schedule, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT record FROM schedules ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("schedule: list: %w", err)
	}
	defer rows.Close()
	out := []schedule.Schedule{}
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

// Mutate implements schedule.Backend, in one transaction.
func (s *Store) Mutate(ctx context.Context, name string, fn func(*schedule.Schedule) error) (schedule.Schedule, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return schedule.Schedule{}, fmt.Errorf("schedule: update: %w", err)
	}
	defer tx.Rollback()
	var raw string
	err = tx.QueryRowContext(ctx, `SELECT record FROM schedules WHERE name = ?`, name).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return schedule.Schedule{}, fmt.Errorf("there is no schedule %q: %w", name, runs.ErrNotFound)
	}
	if err != nil {
		return schedule.Schedule{}, fmt.Errorf("schedule: update: %w", err)
	}
	sc, err := decode(raw)
	if err != nil {
		return schedule.Schedule{}, err
	}
	if err := fn(&sc); err != nil {
		return schedule.Schedule{}, err
	}
	rec, err := encode(sc)
	if err != nil {
		return schedule.Schedule{}, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schedules SET record = ? WHERE name = ?`, rec, name); err != nil {
		return schedule.Schedule{}, fmt.Errorf("schedule: update: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return schedule.Schedule{}, fmt.Errorf("schedule: update: %w", err)
	}
	return sc, nil
}

// Delete implements schedule.Backend.
func (s *Store) Delete(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM schedules WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("schedule: delete: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("there is no schedule %q: %w", name, runs.ErrNotFound)
	}
	return nil
}
