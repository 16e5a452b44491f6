package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
)

// A migration brings the schema from one version to the next, in the
// transaction of [migrate].
type migration func(ctx context.Context, tx *sql.Tx) error

// script is a migration that runs SQL statements.
func script(query string) migration {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, query)
		return err
	}
}

// migrations returns the schema changes in order: applying the first n
// brings a database to schema version n.
func migrations() []migration {
	return []migration{
		// Version 1: checkpoints as a row per step and a row per channel a
		// step changed, and a row per run holding its latest step as the
		// commit fence.
		script(`
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
`),
		// Version 2: a commit inserts one row into one B-tree.
		migrateToOneRowPerStep,
		// Version 3: run records.
		script(`
-- One row per run: the runs.Run as JSON, and the fields ListRuns filters
-- and orders by. created_at is CreatedAt in Unix nanoseconds.
CREATE TABLE run_records (
	id         TEXT    NOT NULL PRIMARY KEY,
	graph      TEXT    NOT NULL,
	status     TEXT    NOT NULL,
	context_id TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	version    INTEGER NOT NULL,
	record     BLOB    NOT NULL
);

-- Listings, newest first, of all runs and by each filter.
CREATE INDEX run_records_by_created ON run_records (created_at, id);
CREATE INDEX run_records_by_graph   ON run_records (graph, created_at, id);
CREATE INDEX run_records_by_status  ON run_records (status, created_at, id);
CREATE INDEX run_records_by_context ON run_records (context_id, created_at, id);
`),
		// Version 4: threads, and the origins of values runs inherit.
		script(migrateThreads),
		// Version 5: push-notification configs (push.go).
		script(migratePush),
		// Version 6: the graph version of each run record, for
		// listings by version (name or fingerprint). Records made
		// before have none.
		script(`
ALTER TABLE run_records ADD COLUMN graph_version     TEXT NOT NULL DEFAULT '';
ALTER TABLE run_records ADD COLUMN graph_fingerprint TEXT NOT NULL DEFAULT '';
`),
		// Version 7: the long-term store's items (longterm.go).
		script(migrateLongTerm),
		// Version 8: graph version stamps stored once, which steps name
		// by number (meta.go).
		script(sqlStamps),
		// Version 9: run records in a compact form, their graph
		// version named by its row in stamps (records.go), and stamps
		// rows that name their graph, which steps naming them leave out
		// (meta.go). Rows of earlier versions read as before.
		script(`ALTER TABLE run_records ADD COLUMN stamp_id INTEGER NOT NULL DEFAULT 0;`),
	}
}

// migrateToOneRowPerStep is the migration to schema version 2, in which a
// commit inserts one row into one B-tree, so that it usually writes one
// page to the WAL (version 1 wrote a step row and its index entry, channel
// rows and theirs, and the runs row: 5 pages).
//
// A step's row holds the step's metadata, now with the version of every
// channel, and the values of the channels the step changed: loading a step
// reads its row, then the rows of the steps its channel versions name.
//
// The row's key is (run << 32) + step, where run numbers the run (its id in
// the runs table). It is an integer key, the table's rowid: a run's steps
// are contiguous and in order, and a new step of the newest run goes at the
// end of the table, where SQLite appends a row without rebalancing pages (it
// does rebalance on appends to a WITHOUT ROWID table or an index). Rows of
// any size suit a rowid table.
//
// The commit fence is in the schema: the key refuses a step stored already,
// and the trigger steps_in_order ignores (inserts nothing for) a step other
// than 0 whose predecessor is missing, and a step of run 0, which is what a
// run without a row in runs gets. The trigger steps_discard_pending deletes
// the task results recorded for a step when it is inserted. The foreign keys
// of version 1 go.
//
// The migration rebuilds each step of version 1 as a row of the new steps
// table.
func migrateToOneRowPerStep(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `
-- One row per run, numbering the run for the keys of its steps.
CREATE TABLE runs_v2 (
	id     INTEGER NOT NULL PRIMARY KEY CHECK (id BETWEEN 1 AND 2147483647),
	run_id TEXT    NOT NULL UNIQUE
);
INSERT INTO runs_v2 (run_id) SELECT run_id FROM runs ORDER BY rowid;

-- One row per committed step, keyed by (run << 32) + step, where run is
-- the run's id in runs.
CREATE TABLE steps_v2 (
	id      INTEGER NOT NULL PRIMARY KEY,
	-- graph, next, barriers, tasks, counters, drain_request and the
	-- version of every channel, as JSON: see stepMeta.
	meta    BLOB    NOT NULL,
	-- The values of the channels the step changed, as a JSON object; a
	-- channel the step cleared has a version but no value.
	changes BLOB    NOT NULL
);

-- Results of the tasks of each run's open step; seq keeps the order in
-- which they were first recorded.
CREATE TABLE pending_tasks_v2 (
	seq     INTEGER NOT NULL PRIMARY KEY,
	run_id  TEXT    NOT NULL,
	step    INTEGER NOT NULL,
	task_id TEXT    NOT NULL,
	final   INTEGER NOT NULL,
	result  BLOB    NOT NULL,
	UNIQUE (run_id, step, task_id)
);
INSERT INTO pending_tasks_v2 (seq, run_id, step, task_id, final, result)
SELECT seq, run_id, step, task_id, final, result FROM pending_tasks;
`); err != nil {
		return err
	}

	insert, err := tx.PrepareContext(ctx, `
INSERT INTO steps_v2 (id, meta, changes)
SELECT (id << 32) + ?2, ?3, ?4 FROM runs_v2 WHERE run_id = ?1`)
	if err != nil {
		return err
	}
	defer insert.Close()
	changed, err := tx.PrepareContext(ctx, `SELECT channel, value FROM channel_values WHERE run_id = ? AND step = ?`)
	if err != nil {
		return err
	}
	defer changed.Close()
	rows, err := tx.QueryContext(ctx, `SELECT run_id, step, meta FROM steps ORDER BY run_id, step`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		run      string
		versions map[string]int
		buf      bytes.Buffer
	)
	for rows.Next() {
		var (
			id   string
			step int
			data []byte
			meta stepMeta
		)
		if err := rows.Scan(&id, &step, &data); err != nil {
			return err
		}
		if err := json.Unmarshal(data, &meta); err != nil {
			return fmt.Errorf("decode step %d of run %q: %w", step, id, err)
		}
		if id != run {
			run, versions = id, make(map[string]int)
		}
		values := make(map[string]json.RawMessage)
		if err := func() error {
			cs, err := changed.QueryContext(ctx, id, step)
			if err != nil {
				return err
			}
			defer cs.Close()
			for cs.Next() {
				var (
					ch    string
					value []byte
				)
				if err := cs.Scan(&ch, &value); err != nil {
					return err
				}
				versions[ch] = step
				if value != nil {
					values[ch] = value
				}
			}
			return cs.Err()
		}(); err != nil {
			return fmt.Errorf("channels of step %d of run %q: %w", step, id, err)
		}
		meta.Versions = maps.Clone(versions)
		metaJSON, err := marshalTo(&buf, meta)
		if err != nil {
			return fmt.Errorf("encode step %d of run %q: %w", step, id, err)
		}
		metaJSON = bytes.Clone(metaJSON)
		changes, err := marshalTo(&buf, values)
		if err != nil {
			return fmt.Errorf("encode the channels of step %d of run %q: %w", step, id, err)
		}
		if _, err := insert.ExecContext(ctx, id, step, metaJSON, changes); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()

	_, err = tx.ExecContext(ctx, `
-- Children before parents, for the foreign keys.
DROP TABLE channel_values;
DROP TABLE pending_tasks;
DROP TABLE steps;
DROP TABLE runs;
ALTER TABLE runs_v2 RENAME TO runs;
ALTER TABLE steps_v2 RENAME TO steps;
ALTER TABLE pending_tasks_v2 RENAME TO pending_tasks;

-- The fence: a step other than 0 is stored only after its predecessor,
-- and only for a run with a row in runs (run 0 has none). Inserting
-- another step inserts nothing.
CREATE TRIGGER steps_in_order BEFORE INSERT ON steps
WHEN NEW.id >> 32 = 0
	OR (NEW.id & 4294967295 > 0 AND NOT EXISTS (SELECT 1 FROM steps WHERE id = NEW.id - 1))
BEGIN
	SELECT RAISE(IGNORE);
END;

-- Committing a step discards the task results recorded for it.
CREATE TRIGGER steps_discard_pending AFTER INSERT ON steps BEGIN
	DELETE FROM pending_tasks
	WHERE run_id = (SELECT run_id FROM runs WHERE id = NEW.id >> 32) AND step = NEW.id & 4294967295;
END;
`)
	return err
}

// migrate creates the schema or upgrades it to the newest version, in one
// IMMEDIATE transaction, so that a Store opening the file meanwhile waits
// for it.
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
		if err := ms[i](ctx, tx); err != nil {
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
