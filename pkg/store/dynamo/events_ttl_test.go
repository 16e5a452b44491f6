package dynamo_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/internal/awsmeter"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs/runstest"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// TestEventMaxAge: with WithEventMaxAge, every event item of a run, and
// every chunk of a batch too large for its item, carries expires_at =
// append time + the age, for DynamoDB's TTL; once past it, readers no
// longer return those events while the newer stay and ids go on; a run's
// events go with it (DeleteRun) and no other run's.
func TestEventMaxAge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	t0 := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	now := t0
	s := e.store(dynamo.WithEventMaxAge(time.Hour), dynamo.WithClock(func() time.Time { return now }))
	ctx := t.Context()
	big := pregel.Event{Type: pregel.EventCustom, RunID: "r1", Name: "blob", Payload: json.RawMessage(strconv.Quote(strings.Repeat("x", 500_000)))}
	if _, err := s.AppendEvents(ctx, "r1", customEvents("r1", "w", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvents(ctx, "r1", []pregel.Event{big}); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(30 * time.Minute)
	if _, err := s.AppendEvents(ctx, "r1", customEvents("r1", "w", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvents(ctx, "r2", customEvents("r2", "w", 1)); err != nil {
		t.Fatal(err)
	}

	items := partitionItems(t, e, "r1")
	if len(items) < 4 {
		t.Fatalf("run r1 has %d items; want 3 event items and the blob's chunks", len(items))
	}
	for _, it := range items {
		sk := it["sk"].(*types.AttributeValueMemberS).Value
		want := t0.Add(time.Hour).Unix()
		if sk == "EVT#000000000004" {
			want = t0.Add(90 * time.Minute).Unix()
		}
		exp, ok := it["expires_at"].(*types.AttributeValueMemberN)
		if !ok || exp.Value != strconv.FormatInt(want, 10) {
			t.Errorf("item %s: expires_at %v; want %d", sk, it["expires_at"], want)
		}
	}

	now = t0.Add(time.Hour + time.Second)
	page, err := s.EventsSince(ctx, "r1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if page.First != 4 || page.Last != 4 || len(page.Events) != 1 || page.Events[0].ID != 4 {
		t.Fatalf("r1 past the first items' age: First %d, Last %d, %d events; want event 4 alone", page.First, page.Last, len(page.Events))
	}
	got, err := s.AppendEvents(ctx, "r1", customEvents("r1", "w", 1))
	if err != nil || got[0].ID != 5 {
		t.Fatalf("an append after expiry = %+v, %v; want id 5", got, err)
	}

	if err := s.DeleteRun(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if left := partitionItems(t, e, "r1"); len(left) != 0 {
		t.Errorf("DeleteRun left %d items of r1", len(left))
	}
	if page, err := s.EventsSince(ctx, "r2", 0, 0); err != nil || len(page.Events) != 1 {
		t.Errorf("r2 after r1's deletion: %+v, %v; want its event", page, err)
	}
}

// TestFlatBytesPerTurn: a conversation on one thread stores as much per
// turn late as early on DynamoDB, everything counted, and at most 2 KB a
// superstep plus the values written (see runstest.FlatBytesPerTurn;
// SUPERSTEP_FLAT_TURNS=100 for the figure). The embedded
// Scheduler executes the runs; what is stored is the DynamoDB layout's.
// It takes 15-60 s against moto on a shared machine, over make test's
// budget, so it runs only when SUPERSTEP_FLAT_TURNS is set. Step items
// hold their manifests by difference (manifest.go): 6,211 bytes a turn
// for a limit of 6,361 at 30 turns (7,183 when every step item carried
// every open segment's entry); with compact run items counted as stored,
// 6,260 for 6,363 at 100 turns (bench/README.md).
func TestFlatBytesPerTurn(t *testing.T) {
	if os.Getenv(runstest.FlatTurnsEnv) == "" {
		t.Skipf("15-60 s against moto: set %s=30 (or 100) to run it", runstest.FlatTurnsEnv)
	}
	t.Parallel()
	e := newEnv(t)
	s := e.store()
	turns := runstest.FlatTurns(t)
	// The requests and bytes of the first and last 10 turns' runs.
	var (
		before      awsmeter.Stats
		first, last = awsmeter.Stats{Ops: map[string]awsmeter.Op{}}, awsmeter.Stats{Ops: map[string]awsmeter.Op{}}
	)
	turn := func(turn int, finished bool) {
		if !finished {
			before = e.meter.Snapshot()
			return
		}
		into := first
		if turn > turns-10 {
			into = last
		} else if turn > 10 {
			return
		}
		for name, op := range e.meter.Snapshot().Sub(before).Ops {
			o := into.Ops[name]
			o.Requests, o.RequestBytes, o.ResponseBytes = o.Requests+op.Requests, o.RequestBytes+op.RequestBytes, o.ResponseBytes+op.ResponseBytes
			into.Ops[name] = o
		}
		if turn == turns {
			logTurns(t, "turns 1-10", first)
			logTurns(t, fmt.Sprintf("turns %d-%d", turns-9, turns), last)
		}
	}
	runstest.FlatBytesPerTurn(t, turns, embedded.EventsWatched, runstest.FlatStores{Runs: s, Threads: s, Checkpoints: s, Events: s, Turn: turn})
}

// logTurns logs what 10 turns' runs asked of DynamoDB (their measuring
// aside).
func logTurns(t *testing.T, what string, st awsmeter.Stats) {
	t.Helper()
	tot := st.Total()
	var ops []string
	for _, name := range st.Names() {
		ops = append(ops, fmt.Sprintf("%s %d", name, st.Op(name).Requests/10))
	}
	t.Logf("%s, a turn: %d requests (%s), %d bytes sent, %d received", what, tot.Requests/10, strings.Join(ops, ", "), tot.RequestBytes/10, tot.ResponseBytes/10)
}
