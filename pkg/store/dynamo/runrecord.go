package dynamo

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// storedRun is the compact form of a run record, the data document of a
// run item: the JSON of the runs.Run without the fields the item's own
// attributes hold (the id in its key, graph, status, context id, version,
// and created_at in run_pos when the position gives it back), without
// step 0 and with zero counters left out. The outer fields shadow the
// Run's of the same JSON name; nil or zero, they are left out.
//
// Items written before hold the whole JSON of the runs.Run; a record with
// a run_id is of that form (see decodeRun), and reads as before.
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
}

// encodeRun returns the compact record of r (storedRun).
func encodeRun(r *runs.Run) ([]byte, error) {
	sr := storedRun{Run: r, Step: r.Step, Counters: storedCounters(r.Counters)}
	if t, _, err := parsePos(runPos(r.CreatedAt, r.ID)); err != nil || !t.Equal(r.CreatedAt) {
		// The position would not give it back.
		sr.CreatedAt = &r.CreatedAt
	}
	return marshal(sr)
}

// decodeRun decodes the record raw of run item it into r: of the compact
// form (storedRun), the fields its attributes hold come from them; of the
// earlier form, the whole run is in raw. Either way the version and
// CreatedAt are the item's (UpdateRun never changes the position); the
// record holds CreatedAt only when the position cannot.
func decodeRun(it map[string]types.AttributeValue, raw []byte, r *runs.Run) error {
	if err := json.Unmarshal(raw, r); err != nil {
		return err
	}
	if r.ID == "" {
		// The compact form.
		pk, _ := getS(it, attrPK)
		r.ID = strings.TrimPrefix(pk, runPK(""))
		r.Graph, _ = getS(it, attrGraph)
		r.ContextID, _ = getS(it, attrContext)
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
