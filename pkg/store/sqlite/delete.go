package sqlite

import (
	"context"
	"fmt"

	"github.com/superstep/superstep/pkg/runs"
)

var _ runs.RunDeleter = (*Store)(nil)

// sqlDeleteRun deletes what a run stored, ?1 being its id, the record
// last: its steps (a key range of the steps table), the origins of the
// values it inherited, its task results, its row in runs, its events and
// its record.
var sqlDeleteRun = []string{
	`DELETE FROM steps WHERE id >= (SELECT id FROM runs WHERE run_id = ?1) << 32 AND id < ((SELECT id FROM runs WHERE run_id = ?1) + 1) << 32`,
	`DELETE FROM run_origins WHERE run = (SELECT id FROM runs WHERE run_id = ?1)`,
	`DELETE FROM pending_tasks WHERE run_id = ?1`,
	`DELETE FROM runs WHERE run_id = ?1`,
	`DELETE FROM run_events WHERE run_id = ?1`,
	`DELETE FROM run_records WHERE id = ?1`,
}

// DeleteRun implements [runs.RunDeleter]: one transaction deletes the
// run's steps, task results, events and record. Values other runs
// inherited from its steps go with them: runs.Service deletes a thread's
// runs together, and refuses while forks of the thread exist.
func (s *Store) DeleteRun(ctx context.Context, id string) error {
	if _, err := s.eventStmts(ctx); err != nil { // the events table exists
		return err
	}
	err := s.w.inTx(ctx, func() error {
		for _, q := range sqlDeleteRun {
			if _, err := s.w.conn.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete run %q: %w", id, err)
	}
	return nil
}
