package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// stepMeta is the meta column of a step's row: the checkpoint but for its
// Values. Schema version 1 had no Versions.
//
// Every step of every run writes one, so its form is compact (schema
// version 8; the decoder reads every earlier form too):
//
//   - a task's times are two integers (see storedTask), not two RFC 3339
//     strings;
//   - counters that are zero are left out;
//   - the graph's version stamp is a number, StampID, naming a row of the
//     stamps table, which holds each distinct stamp once; steps written
//     before carry the whole Stamp;
//   - with a StampID, the graph's name is left out too: the stamp's row
//     holds it with the stamp (schema version 9; steps of version 8 name
//     rows without a graph and hold their own);
//   - the versions of a segmented channel's segments (see
//     [pregel.PackSegments]) are a list in Segments, by segment number,
//     not a key each in Versions.
//
// For a small loop such as the counter graph this is about 180 bytes a
// step less than the plain JSON of the checkpoint's fields.
type stepMeta struct {
	Graph        string              `json:"graph,omitempty"`
	Next         []pregel.Trigger    `json:"next,omitempty"`
	Barriers     map[string][]string `json:"barriers,omitempty"`
	Tasks        []storedTask        `json:"tasks,omitempty"`
	Counters     storedCounters      `json:"counters,omitzero"`
	DrainRequest string              `json:"drain_request,omitempty"`
	Stamp        *pregel.Stamp       `json:"stamp,omitempty"`
	StampID      int64               `json:"sid,omitempty"`
	Versions     map[string]int      `json:"versions,omitempty"`
	Segments     map[string][]int    `json:"segs,omitempty"`
}

// storedTask is a task's status as a step's row holds it: Started as Unix
// nanoseconds (T0) and Finished as nanoseconds after Started (DT). Rows
// written before schema version 8 hold them as the embedded status's
// RFC 3339 "started" and "finished".
type storedTask struct {
	pregel.TaskStatus
	T0 int64 `json:"t0,omitempty"`
	DT int64 `json:"dt,omitempty"`
}

// storedCounters is [pregel.Counters] without its zeros.
type storedCounters struct {
	Completed int `json:"completed,omitempty"`
	Skipped   int `json:"skipped,omitempty"`
	Cancelled int `json:"cancelled,omitempty"`
	Failed    int `json:"failed,omitempty"`
}

// newStepMeta returns the stored form of cp's metadata, its stamp given by
// its number in the stamps table (0: none), which also names cp's graph.
// tasks is scratch space for the tasks, reused by the caller.
func newStepMeta(cp *pregel.Checkpoint, stampID int64, tasks []storedTask) stepMeta {
	m := stepMeta{
		Graph: cp.Graph, Next: cp.Next, Barriers: cp.Barriers,
		Counters:     storedCounters(cp.Counters),
		DrainRequest: cp.DrainRequest, StampID: stampID,
	}
	if stampID == 0 {
		m.Stamp = cp.Stamp
	} else {
		// The stamp's row names the graph (schema version 9).
		m.Graph = ""
	}
	if len(cp.Tasks) > 0 {
		tasks = tasks[:0]
		for _, t := range cp.Tasks {
			st := storedTask{TaskStatus: t}
			if y := t.Started.Year(); y > 1970 && y < 2262 && !t.Finished.IsZero() {
				// Within what UnixNano represents; a task that took no
				// time has no DT, and Finished is Started.
				st.T0, st.DT = t.Started.UnixNano(), t.Finished.Sub(t.Started).Nanoseconds()
				st.Started, st.Finished = time.Time{}, time.Time{}
			}
			tasks = append(tasks, st)
		}
		m.Tasks = tasks
	}
	m.Versions, m.Segments = splitSegments(cp.Versions)
	return m
}

// splitSegments returns versions with the versions of segments taken out
// into lists by channel and segment number, when every segment of a
// channel from 0 on is there; versions itself when it names no segment.
func splitSegments(versions map[string]int) (map[string]int, map[string][]int) {
	has := false
	for name := range versions {
		if pregel.IsSegment(name) {
			has = true
			break
		}
	}
	if !has {
		return versions, nil
	}
	counts := map[string]int{}
	for name := range versions {
		if ch, ok := pregel.SegmentOf(name); ok {
			counts[ch]++
		}
	}
	segs := make(map[string][]int, len(counts))
	for ch, n := range counts {
		list := make([]int, n)
		ok := true
		for k := range n {
			v, found := versions[pregel.SegmentName(ch, k)]
			if !found {
				ok = false
				break
			}
			list[k] = v
		}
		if ok {
			segs[ch] = list
		}
	}
	rest := make(map[string]int, len(versions))
	for name, v := range versions {
		if ch, ok := pregel.SegmentOf(name); ok && segs[ch] != nil {
			continue
		}
		rest[name] = v
	}
	return rest, segs
}

// versions returns the version of every channel and segment, as the
// checkpoint has them.
func (m *stepMeta) versions() map[string]int {
	if len(m.Segments) == 0 {
		return m.Versions
	}
	n := len(m.Versions)
	for _, list := range m.Segments {
		n += len(list)
	}
	out := make(map[string]int, n)
	for name, v := range m.Versions {
		out[name] = v
	}
	for ch, list := range m.Segments {
		for k, v := range list {
			out[pregel.SegmentName(ch, k)] = v
		}
	}
	return out
}

// tasks returns the tasks' statuses.
func (m *stepMeta) tasks() []pregel.TaskStatus {
	if len(m.Tasks) == 0 {
		return nil
	}
	out := make([]pregel.TaskStatus, len(m.Tasks))
	for i, st := range m.Tasks {
		out[i] = st.TaskStatus
		if st.T0 != 0 {
			out[i].Started = time.Unix(0, st.T0).UTC()
			out[i].Finished = out[i].Started.Add(time.Duration(st.DT))
		}
	}
	return out
}

// stamps holds the graph version stamps a Store has written or read, by
// their number in the stamps table and by their JSON.
//
// A row of the stamps table is the JSON of a stampRow: since schema
// version 9 the graph's name with its stamp, so that a step's metadata
// naming the row by number needs no "graph" of its own. Rows of schema
// version 8 hold the stamp alone; the steps that name them hold their
// graph.
type stamps struct {
	mu     sync.Mutex
	byID   map[int64]*stampRow
	byJSON map[string]int64
	// byPtr remembers the numbers of the stamps committed most often: a
	// compiled graph stamps each of its checkpoints with one pointer.
	byPtr map[stampKey]int64
}

// stampRow is a row of the stamps table, decoded.
type stampRow struct {
	Graph string `json:"graph,omitempty"`
	pregel.Stamp
}

// stampKey is a graph's name and its stamp's pointer.
type stampKey struct {
	graph string
	st    *pregel.Stamp
}

// maxStampPtrs bounds stamps.byPtr, which checkpoints decoded from JSON
// could otherwise grow without end.
const maxStampPtrs = 256

// stampID returns the number of graph's stamp st in the stamps table,
// adding it if it is new; 0 for no stamp.
func (s *Store) stampID(ctx context.Context, graph string, st *pregel.Stamp) (int64, error) {
	if st == nil {
		return 0, nil
	}
	c := &s.stamps
	c.mu.Lock()
	id, ok := c.byPtr[stampKey{graph, st}]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := s.stampRowID(ctx, graph, st)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byPtr) >= maxStampPtrs {
		clear(c.byPtr)
	}
	c.byPtr[stampKey{graph, st}] = id
	return id, nil
}

// stampRowID is stampID without the cache by pointer, for stamps decoded
// from JSON (those of run records), whose pointers are new each time.
func (s *Store) stampRowID(ctx context.Context, graph string, st *pregel.Stamp) (int64, error) {
	data, err := json.Marshal(stampRow{Graph: graph, Stamp: *st})
	if err != nil {
		return 0, fmt.Errorf("encode graph version: %w", err)
	}
	key := string(data)
	c := &s.stamps
	c.mu.Lock()
	id, ok := c.byJSON[key]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	err = s.w.do(ctx, func() error {
		if _, err := s.w.execLocking(ctx, s.w.addStamp, data); err != nil {
			return err
		}
		return s.w.queryRow(s.w.stampByJSON, data).Scan(&id)
	})
	if err != nil {
		return 0, fmt.Errorf("store graph version: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.init()
	c.byJSON[key] = id
	if _, ok := c.byID[id]; !ok {
		c.byID[id] = &stampRow{Graph: graph, Stamp: *st}
	}
	return id, nil
}

func (c *stamps) init() {
	if c.byJSON == nil {
		c.byJSON, c.byID, c.byPtr = map[string]int64{}, map[int64]*stampRow{}, map[stampKey]int64{}
	}
}

// stamp returns the graph and the stamp a step's metadata names: its own
// Graph, or the stamp row's when it has none (schema version 9), and nil
// for no stamp.
func (s *Store) stamp(ctx context.Context, m *stepMeta) (string, *pregel.Stamp, error) {
	if m.StampID == 0 {
		return m.Graph, m.Stamp, nil
	}
	row, err := s.stampRow(ctx, m.StampID)
	if err != nil {
		return "", nil, err
	}
	graph := m.Graph
	if graph == "" {
		graph = row.Graph
	}
	return graph, &row.Stamp, nil
}

// stampRow returns row id of the stamps table. The stamp it holds is
// shared: callers copy what they hand out to be changed.
func (s *Store) stampRow(ctx context.Context, id int64) (*stampRow, error) {
	c := &s.stamps
	c.mu.Lock()
	row, ok := c.byID[id]
	c.mu.Unlock()
	if ok {
		return row, nil
	}
	var data []byte
	err := s.reads.stamp.QueryRowContext(ctx, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("graph version %d is not stored", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read graph version %d: %w", id, err)
	}
	row = new(stampRow)
	if err := json.Unmarshal(data, row); err != nil {
		return nil, fmt.Errorf("decode graph version %d: %w", id, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.init()
	if known, ok := c.byID[id]; ok {
		return known, nil
	}
	c.byID[id] = row
	c.byJSON[string(data)] = id
	return row, nil
}

// sqlStamps is schema version 8's table of graph version stamps.
const sqlStamps = `
CREATE TABLE stamps (
	id    INTEGER NOT NULL PRIMARY KEY,
	stamp BLOB    NOT NULL UNIQUE
);
`
