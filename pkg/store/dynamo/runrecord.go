package dynamo

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// storedRun is the compact form of a run record, the rec document of a
// run item: the JSON of the runs.Run without the fields the item's own
// attributes hold (the id in its key, graph, status, context id, version,
// and created_at in run_pos when the position gives it back), without
// step 0, with zero counters left out and its events compact
// (storedEvent). The outer fields shadow the Run's of the same JSON name;
// nil or zero, they are left out.
//
// Items written before (and items a writer from before updates) hold the
// whole JSON of the runs.Run in data instead; see recordAttr.
type storedRun struct {
	*runs.Run
	ID        *struct{}      `json:"run_id,omitempty"`
	Graph     *struct{}      `json:"graph,omitempty"`
	Status    *struct{}      `json:"status,omitempty"`
	ContextID *struct{}      `json:"context_id,omitempty"`
	CreatedAt *time.Time     `json:"created_at,omitempty"`
	Version   *struct{}      `json:"version,omitempty"`
	Step      int            `json:"step,omitempty"`
	Counters  storedCounters `json:"counters,omitzero"`
	Events    []storedEvent  `json:"events,omitempty"`
}

// storedEvent is a run event as a run record holds it: its time as Unix
// nanoseconds (T), or as nanoseconds after the previous event's (DT), when
// it is in UTC and within what Unix nanoseconds represent, else as the
// event's own "at"; its status left out when it is its type (a change of
// status), and step 0 left out. About 170 bytes less for the three events
// of a short run. Events of earlier records are the whole runs.Event, and
// read as before.
type storedEvent struct {
	At     *time.Time        `json:"at,omitempty"`
	T      *int64            `json:"t,omitempty"`
	DT     *int64            `json:"dt,omitempty"`
	Type   runs.EventType    `json:"type"`
	Status *pregel.RunStatus `json:"status,omitempty"`
	Step   int               `json:"step,omitempty"`
	Detail string            `json:"detail,omitempty"`
}

// storeEvents returns the stored form of evs.
func storeEvents(evs []runs.Event) []storedEvent {
	if len(evs) == 0 {
		return nil
	}
	out := make([]storedEvent, len(evs))
	var prev int64
	chained := false
	for i := range evs {
		ev := &evs[i]
		se := storedEvent{Type: ev.Type, Step: ev.Step, Detail: ev.Detail}
		if string(ev.Status) != string(ev.Type) {
			se.Status = &ev.Status
		}
		if y := ev.At.Year(); ev.At.Location() == time.UTC && y > 1678 && y < 2262 {
			n := ev.At.UnixNano()
			if chained {
				d := n - prev
				se.DT = &d
			} else {
				se.T = &n
			}
			prev, chained = n, true
		} else {
			se.At = &ev.At
			chained = false
		}
		out[i] = se
	}
	return out
}

// loadEvents returns the events of their stored form.
func loadEvents(evs []storedEvent) ([]runs.Event, error) {
	if evs == nil {
		return nil, nil
	}
	out := make([]runs.Event, len(evs))
	var prev int64
	chained := false
	for i, se := range evs {
		ev := runs.Event{Type: se.Type, Step: se.Step, Detail: se.Detail, Status: pregel.RunStatus(se.Type)}
		if se.Status != nil {
			ev.Status = *se.Status
		}
		switch {
		case se.T != nil:
			prev, chained = *se.T, true
			ev.At = time.Unix(0, prev).UTC()
		case se.DT != nil:
			if !chained {
				return nil, fmt.Errorf("event %d is timed after the one before, which has no Unix time", i)
			}
			prev += *se.DT
			ev.At = time.Unix(0, prev).UTC()
		case se.At != nil:
			ev.At, chained = *se.At, false
		}
		out[i] = ev
	}
	return out, nil
}

// encodeRun returns the compact record of r (storedRun).
func encodeRun(r *runs.Run) ([]byte, error) {
	sr := storedRun{Run: r, Step: r.Step, Counters: storedCounters(r.Counters), Events: storeEvents(r.Events)}
	if t, _, err := parsePos(runPos(r.CreatedAt, r.ID)); err != nil || !t.Equal(r.CreatedAt) {
		// The position would not give it back.
		sr.CreatedAt = &r.CreatedAt
	}
	return marshal(sr)
}

// recordAttr returns the document attribute that holds the record of run
// item it, and whether it holds the compact form. data (or data_ref), the
// whole runs.Run, wins over rec: this package's writers remove data when
// they write rec, so an item holding both was last written by a writer
// from before the compact form (a rolling deploy), whose data is the
// newer record.
func recordAttr(it map[string]types.AttributeValue) (name string, compact bool) {
	if _, ok := it[attrData]; ok {
		return attrData, false
	}
	if _, ok := it[attrData+refSuffix]; ok {
		return attrData, false
	}
	return attrRecord, true
}

// decodeRun decodes the record raw of run item it into r: of the compact
// form (storedRun), the fields its attributes hold come from them; of the
// earlier form, the whole run is in raw. Either way the version and
// CreatedAt are the item's (UpdateRun never changes the position); the
// compact record holds CreatedAt only when the position cannot.
func decodeRun(it map[string]types.AttributeValue, raw []byte, compact bool, r *runs.Run) error {
	// The events of either form read as storedEvents (see there).
	var evs []storedEvent
	if err := json.Unmarshal(raw, &struct {
		*runs.Run
		Events *[]storedEvent `json:"events"`
	}{r, &evs}); err != nil {
		return err
	}
	var err error
	if r.Events, err = loadEvents(evs); err != nil {
		return err
	}
	if compact {
		pk, _ := getS(it, attrPK)
		r.ID = strings.TrimPrefix(pk, runPK(""))
		r.Graph, _ = getS(it, attrGraph)
		r.ContextID, _ = getS(it, attrContext)
		r.Status = ""
		if st, _ := getS(it, attrStatus); st != noStatus {
			r.Status = pregel.RunStatus(st)
		}
	}
	if v, ok := getN(it, attrVersion); ok {
		r.Version = v
	}
	if pos, ok := getS(it, attrPos); ok {
		if t, _, err := parsePos(pos); err == nil {
			r.CreatedAt = t
		}
	}
	return nil
}
