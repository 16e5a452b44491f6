package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Run event streams ([runs.EventLog]): one row per event, keyed by run and
// id, the event as JSON (runs.LoggedEvent). A row compacted from the
// pieces of a message (runs.EventCompactor) is keyed by the last id it
// stands for, and column span says how many it stands for (1 for others;
// added, like at, by ALTER TABLE on first use). The table is created on first use, outside the
// numbered schema versions (it refers to no other table), by
// CREATE TABLE IF NOT EXISTS. A run keeps its newest events up to the
// retention (runs.DefaultStreamRetention unless SetEventRetention says);
// an append deletes those beyond it. Column at is when the event was
// appended (Unix milliseconds; 0 for rows of a store made before it was
// added, ALTER TABLE'd on first use), for ExpireEvents, which the
// Scheduler's sweep calls (embedded.SchedulerConfig.EventMaxAge). The sweep
// reads the whole table (no index on at: it would cost every append);
// it runs at most once a minute.

var _ runs.EventLog = (*Store)(nil)

const sqlEventsTable = `
CREATE TABLE IF NOT EXISTS run_events (
	run_id TEXT    NOT NULL,
	id     INTEGER NOT NULL CHECK (id > 0),
	-- The pregel.Event as JSON.
	event  BLOB    NOT NULL,
	-- When it was appended, Unix milliseconds.
	at     INTEGER NOT NULL DEFAULT 0,
	-- How many ids the row stands for: ids id - span + 1 to id.
	span   INTEGER NOT NULL DEFAULT 1,
	PRIMARY KEY (run_id, id)
) WITHOUT ROWID`

// sqlEventsAt and sqlEventsSpan add columns at and span to a table made
// before they existed.
const (
	sqlEventsAt   = `ALTER TABLE run_events ADD COLUMN at INTEGER NOT NULL DEFAULT 0`
	sqlEventsSpan = `ALTER TABLE run_events ADD COLUMN span INTEGER NOT NULL DEFAULT 1`
)

// sqlEventsSince reads a page and the first and last ids kept in one
// statement, so one snapshot: the LEFT JOIN gives one row with a NULL id
// when the page is empty.
const sqlEventsSince = `
SELECT e.id, e.event, e.span, b.first, b.last
FROM (SELECT COALESCE((SELECT id - span + 1 FROM run_events WHERE run_id = ?1 ORDER BY id LIMIT 1), 0) AS first,
	COALESCE(MAX(id), 0) AS last FROM run_events WHERE run_id = ?1) AS b
LEFT JOIN run_events AS e ON e.run_id = ?1 AND e.id > ?2
ORDER BY e.id
LIMIT ?3`

// eventStatements are the event log's statements, prepared on first use.
type eventStatements struct {
	once      sync.Once
	err       error
	retention int

	since                          *sql.Stmt // on the pool
	last, insert, truncate, expire *sql.Stmt // on the write connection
	cut, put                       *sql.Stmt // compaction; on the write connection
	// The batch being inserted; with the write connection.
	buf bytes.Buffer
}

// SetEventRetention sets how many events the Store keeps per run (the
// newest); 0 or less restores runs.DefaultStreamRetention. Call it before
// the first AppendEvents.
func (s *Store) SetEventRetention(n int) { s.events.retention = n }

func (s *Store) eventStmts(ctx context.Context) (*eventStatements, error) {
	e := &s.events
	e.once.Do(func() {
		ctx := context.WithoutCancel(ctx)
		e.err = s.w.do(ctx, func() error {
			if _, err := s.w.execLocking(ctx, s.w.begin); err != nil {
				return err
			}
			if _, err := s.w.conn.ExecContext(ctx, sqlEventsTable); err != nil {
				s.w.abort()
				return err
			}
			for _, col := range []struct{ name, add string }{{"at", sqlEventsAt}, {"span", sqlEventsSpan}} {
				var has int
				if err := s.w.conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('run_events') WHERE name = ?`, col.name).Scan(&has); err != nil {
					s.w.abort()
					return err
				}
				if has == 0 {
					if _, err := s.w.conn.ExecContext(ctx, col.add); err != nil {
						s.w.abort()
						return err
					}
				}
			}
			if _, err := s.w.exec(s.w.commit); err != nil {
				s.w.abort()
				return err
			}
			return prepareAll(ctx, s.w.conn, []prepared{
				{&e.last, `SELECT COALESCE(MAX(id), 0) FROM run_events WHERE run_id = ?`},
				// One statement for a batch: the events as a JSON array.
				{&e.insert, `INSERT INTO run_events (run_id, id, event, at) SELECT ?1, ?2 + key + 1, value, ?4 FROM json_each(?3)`},
				{&e.truncate, `DELETE FROM run_events WHERE run_id = ? AND id <= ?`},
				{&e.expire, `DELETE FROM run_events WHERE at < ?`},
				{&e.cut, `DELETE FROM run_events WHERE run_id = ? AND id BETWEEN ? AND ?`},
				{&e.put, `INSERT INTO run_events (run_id, id, event, at, span) VALUES (?, ?, ?, ?, ?)`},
			})
		})
		if e.err == nil {
			e.err = prepareAll(ctx, s.db, []prepared{{&e.since, sqlEventsSince}})
		}
		if e.err != nil {
			e.err = fmt.Errorf("sqlite: prepare the event log: %w", e.err)
		}
	})
	return e, e.err
}

// closeEvents closes the event log's statements.
func (e *eventStatements) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{e.since, e.last, e.insert, e.truncate, e.expire, e.cut, e.put} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// AppendEvents implements [runs.EventLog]: the events get the ids after
// the run's newest, in one transaction.
func (s *Store) AppendEvents(ctx context.Context, runID string, evs []pregel.Event) ([]runs.StreamEvent, error) {
	if runID == "" {
		return nil, fmt.Errorf("append events with no run id: %w", runs.ErrInvalid)
	}
	e, err := s.eventStmts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]runs.StreamEvent, len(evs))
	retention := int64(e.retention)
	if retention <= 0 {
		retention = runs.DefaultStreamRetention
	}
	err = s.w.inTx(ctx, func() error {
		buf := &e.buf
		buf.Reset()
		buf.WriteByte('[')
		enc := json.NewEncoder(buf)
		for i := range evs {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := enc.Encode(&evs[i]); err != nil {
				return fmt.Errorf("encode event %s: %w", evs[i].Type, err)
			}
		}
		buf.WriteByte(']')
		var last int64
		if err := s.w.queryRow(e.last, runID).Scan(&last); err != nil {
			return err
		}
		if _, err := s.w.exec(e.insert, runID, last, buf.Bytes(), time.Now().UnixMilli()); err != nil {
			return err
		}
		for i := range evs {
			out[i] = runs.StreamEvent{ID: last + int64(i) + 1, Event: evs[i]}
		}
		if last += int64(len(evs)); last > retention {
			if _, err := s.w.exec(e.truncate, runID, last-retention); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: append %d events of run %q: %w", len(evs), runID, err)
	}
	return out, nil
}

// EventsSince implements [runs.EventLog].
func (s *Store) EventsSince(ctx context.Context, runID string, after int64, limit int) (runs.EventPage, error) {
	if after < 0 {
		return runs.EventPage{}, fmt.Errorf("event id %d is negative: %w", after, runs.ErrInvalid)
	}
	e, err := s.eventStmts(ctx)
	if err != nil {
		return runs.EventPage{}, err
	}
	rows, err := e.since.QueryContext(ctx, runID, after, runs.PageLimit(limit))
	if err != nil {
		return runs.EventPage{}, fmt.Errorf("sqlite: read events of run %q: %w", runID, err)
	}
	defer rows.Close()
	var page runs.EventPage
	for rows.Next() {
		var (
			id, span sql.NullInt64
			data     []byte
		)
		if err := rows.Scan(&id, &data, &span, &page.First, &page.Last); err != nil {
			return runs.EventPage{}, fmt.Errorf("sqlite: read events of run %q: %w", runID, err)
		}
		if !id.Valid {
			continue
		}
		var le runs.LoggedEvent
		if err := json.Unmarshal(data, &le); err != nil {
			return runs.EventPage{}, fmt.Errorf("sqlite: decode event %d of run %q: %w", id.Int64, runID, err)
		}
		ev := runs.StreamEvent{ID: id.Int64, Event: le.Event, Pieces: le.Pieces}
		if len(page.Events) == 0 {
			ev = ev.From(after)
		}
		page.Events = append(page.Events, ev)
	}
	if err := rows.Err(); err != nil {
		return runs.EventPage{}, fmt.Errorf("sqlite: read events of run %q: %w", runID, err)
	}
	return page, nil
}

var _ runs.EventCompactor = (*Store)(nil)

// CompactEvents implements [runs.EventCompactor]: one transaction deletes
// the rows of ids c.First to c.Last (refused unless they are c.Stored)
// and inserts c.Events, each at its last id with its span.
func (s *Store) CompactEvents(ctx context.Context, runID string, c runs.Compaction) error {
	e, err := s.eventStmts(ctx)
	if err != nil {
		return err
	}
	rows := make([][]byte, len(c.Events))
	for i, ev := range c.Events {
		if rows[i], err = json.Marshal(runs.LoggedEvent{Event: ev.Event, Pieces: ev.Pieces}); err != nil {
			return fmt.Errorf("sqlite: compact events of run %q: encode event %d: %w", runID, ev.ID, err)
		}
	}
	err = s.w.inTx(ctx, func() error {
		res, err := s.w.exec(e.cut, runID, c.First, c.Last)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(c.Stored) {
			return fmt.Errorf("the log holds %d events for them, not %d: %w", n, c.Stored, runs.ErrConflict)
		}
		now := time.Now().UnixMilli()
		for i, ev := range c.Events {
			if _, err := s.w.exec(e.put, runID, ev.ID, rows[i], now, ev.ID-ev.FirstID()+1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: compact events %d to %d of run %q: %w", c.First, c.Last, runID, err)
	}
	return nil
}

var _ runs.EventExpirer = (*Store)(nil)

// ExpireEvents implements [runs.EventExpirer]: one statement deletes the
// events appended before before (rows of a store older than the column
// at count as appended at the Unix epoch).
func (s *Store) ExpireEvents(ctx context.Context, before time.Time) (int, error) {
	e, err := s.eventStmts(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.w.inTx(ctx, func() error {
		res, err := s.w.exec(e.expire, before.UnixMilli())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete events appended before %s: %w", before.Format(time.RFC3339), err)
	}
	return int(n), nil
}

var _ runs.StorageMeter = (*Store)(nil)

// sqlRunStorage measures a run's rows: its steps' metadata and changes,
// the part of the changes that is segments (channels named with the
// segment separator, U+001F), its task results and its events. It reads
// the run's steps by their key range and its events by run id.
const sqlRunStorage = `
WITH r AS (SELECT id FROM runs WHERE run_id = ?1),
s AS (SELECT meta, changes FROM steps WHERE id >= (SELECT id FROM r) << 32 AND id < ((SELECT id FROM r) + 1) << 32)
SELECT
	(SELECT COALESCE(SUM(length(CAST(meta AS BLOB)) + length(CAST(changes AS BLOB))), 0) FROM s),
	(SELECT COALESCE(SUM(length(CAST(j.value AS BLOB)) + length(CAST(j.key AS BLOB))), 0) FROM s, json_each(CAST(s.changes AS TEXT)) AS j WHERE instr(j.key, char(31)) > 0),
	(SELECT COALESCE(SUM(length(CAST(result AS BLOB))), 0) FROM pending_tasks WHERE run_id = ?1),
	(SELECT COALESCE(SUM(length(CAST(event AS BLOB))), 0) FROM run_events WHERE run_id = ?1)`

// RunStorage implements [runs.StorageMeter]: one query over the run's
// rows (see sqlRunStorage); the record is the Service's to count.
func (s *Store) RunStorage(ctx context.Context, runID string) (runs.Storage, error) {
	if _, err := s.eventStmts(ctx); err != nil { // the events table exists
		return runs.Storage{}, err
	}
	var steps, segs, tasks, events int64
	if err := s.db.QueryRowContext(ctx, sqlRunStorage, runID).Scan(&steps, &segs, &tasks, &events); err != nil {
		return runs.Storage{}, fmt.Errorf("sqlite: measure run %q: %w", runID, err)
	}
	return runs.Storage{
		CheckpointBytes: steps - segs + tasks,
		SegmentBytes:    segs,
		EventBytes:      events,
		Measured:        []string{runs.StorageCheckpoints, runs.StorageEvents},
	}, nil
}
