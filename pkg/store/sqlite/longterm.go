package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/superstep/superstep/pkg/longterm"
)

// migrateLongTerm is schema version 7: the items of the long-term store
// (pkg/longterm), one row each.
const migrateLongTerm = `
-- sort_key is longterm.SortKey(namespace, key): a prefix's items are one
-- range of it. namespace is the namespace as a JSON array. Times are Unix
-- nanoseconds; expires_at is 0 for an item that does not expire. vector is
-- the item's embedding (longterm.EncodeVector), or NULL.
CREATE TABLE longterm_items (
	sort_key   TEXT    NOT NULL PRIMARY KEY,
	namespace  TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	value      BLOB    NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	vector     BLOB
);
-- Expired items, for the purge a Put makes.
CREATE INDEX longterm_items_expiry ON longterm_items (expires_at) WHERE expires_at > 0;
`

// purgeBatch is how many expired items a Put deletes: expired items are
// invisible at once (the longterm.Store checks expiry) and go a few at a
// time, so no Put pays for a large purge.
const purgeBatch = 16

// LongTerm returns the long-term store backend (pkg/longterm) on the
// Store's database: wrap it with longterm.New.
func (s *Store) LongTerm() longterm.Backend { return longTermBackend{s} }

type longTermBackend struct{ s *Store }

var (
	_ longterm.Backend = longTermBackend{}
	_ longterm.Roots   = longTermBackend{}
)

const longTermColumns = `sort_key, namespace, key, value, created_at, updated_at, expires_at, vector`

func (b longTermBackend) Put(ctx context.Context, r longterm.Record) error {
	ns, err := json.Marshal(r.Namespace)
	if err != nil {
		return fmt.Errorf("sqlite: put long-term item: %w", err)
	}
	var expires int64
	if !r.ExpiresAt.IsZero() {
		expires = r.ExpiresAt.UnixNano()
	}
	w := b.s.w
	err = w.do(ctx, func() error {
		if _, err := w.execLocking(ctx, w.ltPut, r.SortKey, string(ns), r.Key, []byte(r.Value), r.CreatedAt.UnixNano(), r.UpdatedAt.UnixNano(), expires, r.Vector); err != nil {
			return err
		}
		_, err := w.execLocking(ctx, w.ltPurge, r.UpdatedAt.UnixNano(), purgeBatch)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: put long-term item: %w", err)
	}
	return nil
}

func (b longTermBackend) Get(ctx context.Context, sortKey string) (longterm.Record, error) {
	r, err := scanLongTerm(b.s.db.QueryRowContext(ctx, `SELECT `+longTermColumns+` FROM longterm_items WHERE sort_key = ?`, sortKey))
	if errors.Is(err, sql.ErrNoRows) {
		err = longterm.ErrNotFound
	}
	if err != nil {
		return longterm.Record{}, fmt.Errorf("sqlite: get long-term item: %w", err)
	}
	return r, nil
}

func (b longTermBackend) Delete(ctx context.Context, sortKey string) error {
	w := b.s.w
	err := w.do(ctx, func() error {
		_, err := w.execLocking(ctx, w.ltDelete, sortKey)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete long-term item: %w", err)
	}
	return nil
}

func (b longTermBackend) Scan(ctx context.Context, prefix longterm.Namespace, after string, limit int) ([]longterm.Record, error) {
	lo, hi := longterm.PrefixRange(prefix)
	rows, err := b.s.db.QueryContext(ctx, `SELECT `+longTermColumns+` FROM longterm_items
WHERE sort_key >= ? AND sort_key < ? AND sort_key > ? ORDER BY sort_key LIMIT ?`, lo, hi, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: scan long-term items: %w", err)
	}
	defer rows.Close()
	var out []longterm.Record
	for rows.Next() {
		r, err := scanLongTerm(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan long-term items: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: scan long-term items: %w", err)
	}
	return out, nil
}

func (b longTermBackend) Roots(ctx context.Context) ([]string, error) {
	rows, err := b.s.db.QueryContext(ctx, `SELECT DISTINCT json_extract(namespace, '$[0]') AS root FROM longterm_items ORDER BY root`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list long-term roots: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var root string
		if err := rows.Scan(&root); err != nil {
			return nil, fmt.Errorf("sqlite: list long-term roots: %w", err)
		}
		out = append(out, root)
	}
	return out, rows.Err()
}

type rowScanner interface{ Scan(dest ...any) error }

func scanLongTerm(row rowScanner) (longterm.Record, error) {
	var (
		r                         longterm.Record
		ns                        string
		value                     []byte
		created, updated, expires int64
	)
	if err := row.Scan(&r.SortKey, &ns, &r.Key, &value, &created, &updated, &expires, &r.Vector); err != nil {
		return longterm.Record{}, err
	}
	if err := json.Unmarshal([]byte(ns), &r.Namespace); err != nil {
		return longterm.Record{}, fmt.Errorf("decode namespace: %w", err)
	}
	r.Value = value
	r.CreatedAt = time.Unix(0, created).UTC()
	r.UpdatedAt = time.Unix(0, updated).UTC()
	if expires > 0 {
		r.ExpiresAt = time.Unix(0, expires).UTC()
	}
	return r, nil
}
