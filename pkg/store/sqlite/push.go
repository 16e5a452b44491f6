package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/superstep/superstep/pkg/runs"
)

// migratePush is schema version 5: the push-notification configs of
// runs (pkg/a2a), one row each, with their delivery cursor.
const migratePush = `
-- config is the binding's config as JSON (it may hold secrets: tokens,
-- credentials); seen and last are the delivery cursor; created_at is in
-- Unix nanoseconds.
CREATE TABLE push_configs (
	run_id     TEXT    NOT NULL,
	id         TEXT    NOT NULL,
	config     BLOB    NOT NULL,
	seen       INTEGER NOT NULL,
	last       TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (run_id, id)
) WITHOUT ROWID;
`

// pushStatements are the prepared statements of push configs: writes on
// the write connection, reads on the pool.
type pushStatements struct {
	put, del, advance *sql.Stmt
	get, list, runs   *sql.Stmt
}

func (s *Store) preparePush(ctx context.Context) error {
	p := &s.push
	if err := prepareAll(ctx, s.w.conn, []prepared{
		{&p.put, `INSERT INTO push_configs (run_id, id, config, seen, last, created_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (run_id, id) DO UPDATE SET config = excluded.config, seen = excluded.seen, last = excluded.last`},
		{&p.del, `DELETE FROM push_configs WHERE run_id = ? AND id = ?`},
		{&p.advance, `UPDATE push_configs SET seen = ?3, last = ?4 WHERE run_id = ?1 AND id = ?2 AND seen < ?3`},
	}); err != nil {
		return err
	}
	return prepareAll(ctx, s.db, []prepared{
		{&p.get, `SELECT config, seen, last, created_at FROM push_configs WHERE run_id = ? AND id = ?`},
		{&p.list, `SELECT id, config, seen, last, created_at FROM push_configs WHERE run_id = ? ORDER BY id`},
		{&p.runs, `SELECT DISTINCT run_id FROM push_configs ORDER BY run_id`},
	})
}

func (p *pushStatements) all() []*sql.Stmt {
	return []*sql.Stmt{p.put, p.del, p.advance, p.get, p.list, p.runs}
}

// PutPushConfig stores a run's push config, replacing the one of the
// same ID (whose CreatedAt is kept).
func (s *Store) PutPushConfig(ctx context.Context, c runs.PushConfig) error {
	if c.RunID == "" || c.ID == "" {
		return fmt.Errorf("sqlite: put push config: empty run id or config id: %w", runs.ErrInvalid)
	}
	err := s.w.do(ctx, func() error {
		_, err := s.w.execLocking(ctx, s.push.put, c.RunID, c.ID, c.Config, c.Seen, c.Last, c.CreatedAt.UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: put push config %q of run %q: %w", c.ID, c.RunID, err)
	}
	return nil
}

// GetPushConfig returns a run's push config, or an error wrapping
// runs.ErrNotFound.
func (s *Store) GetPushConfig(ctx context.Context, runID, id string) (runs.PushConfig, error) {
	c := runs.PushConfig{RunID: runID, ID: id}
	var created int64
	err := s.push.get.QueryRowContext(ctx, runID, id).Scan(&c.Config, &c.Seen, &c.Last, &created)
	if errors.Is(err, sql.ErrNoRows) {
		err = runs.ErrNotFound
	}
	if err != nil {
		return runs.PushConfig{}, fmt.Errorf("sqlite: get push config %q of run %q: %w", id, runID, err)
	}
	c.CreatedAt = time.Unix(0, created).UTC()
	return c, nil
}

// ListPushConfigs returns a run's push configs, by ID.
func (s *Store) ListPushConfigs(ctx context.Context, runID string) ([]runs.PushConfig, error) {
	rows, err := s.push.list.QueryContext(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list push configs of run %q: %w", runID, err)
	}
	defer rows.Close()
	var out []runs.PushConfig
	for rows.Next() {
		c := runs.PushConfig{RunID: runID}
		var created int64
		if err := rows.Scan(&c.ID, &c.Config, &c.Seen, &c.Last, &created); err != nil {
			return nil, fmt.Errorf("sqlite: list push configs of run %q: %w", runID, err)
		}
		c.CreatedAt = time.Unix(0, created).UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list push configs of run %q: %w", runID, err)
	}
	return out, nil
}

// DeletePushConfig deletes a run's push config; one that is not there is
// not an error.
func (s *Store) DeletePushConfig(ctx context.Context, runID, id string) error {
	err := s.w.do(ctx, func() error {
		_, err := s.w.execLocking(ctx, s.push.del, runID, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete push config %q of run %q: %w", id, runID, err)
	}
	return nil
}

// AdvancePushConfig moves a push config's delivery cursor forward to seen
// and last; a cursor at or past seen is left alone. An unknown config is
// an error wrapping runs.ErrNotFound.
func (s *Store) AdvancePushConfig(ctx context.Context, runID, id string, seen int, last string) error {
	var n int64
	err := s.w.do(ctx, func() error {
		res, err := s.w.execLocking(ctx, s.push.advance, runID, id, seen, last)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: advance push config %q of run %q: %w", id, runID, err)
	}
	if n == 0 {
		// Nothing moved: the cursor is ahead, or there is no config.
		if _, err := s.GetPushConfig(ctx, runID, id); err != nil {
			return err
		}
	}
	return nil
}

// PushRuns returns the ids of the runs that have push configs, sorted: a
// server that restarts resumes their deliveries.
func (s *Store) PushRuns(ctx context.Context) ([]string, error) {
	rows, err := s.push.runs.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list runs with push configs: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite: list runs with push configs: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list runs with push configs: %w", err)
	}
	return out, nil
}
