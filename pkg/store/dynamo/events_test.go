package dynamo_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

func TestEventLogConformance(t *testing.T) {
	t.Parallel()
	runstest.RunEventLog(t, func(t *testing.T, retention int) runs.EventLog {
		return newEnv(t).store(dynamo.WithEventRetention(retention))
	})
}

// customEvents returns n custom events of a run from writer w.
func customEvents(run, w string, n int) []pregel.Event {
	evs := make([]pregel.Event, n)
	for i := range evs {
		evs[i] = pregel.Event{Type: pregel.EventCustom, RunID: run, Node: w, Name: "token", Payload: json.RawMessage(strconv.Itoa(i)), Time: time.Now()}
	}
	return evs
}

// readAll reads a run's whole stream, page by page.
func readAll(t *testing.T, l runs.EventReader, run string) []runs.StreamEvent {
	t.Helper()
	var all []runs.StreamEvent
	var after int64
	for {
		page, err := l.EventsSince(t.Context(), run, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) == 0 {
			return all
		}
		all = append(all, page.Events...)
		after = page.Events[len(page.Events)-1].ID
	}
}

// TestEventLogConcurrentWriters appends to one run from several Stores at
// once, as the tick and node functions of a run do: every event gets an
// id, the ids are 1..N without gaps or repeats, and each writer's events
// keep their order.
func TestEventLogConcurrentWriters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const writers, appends, per = 6, 8, 3
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			s := e.store()
			for range appends {
				if _, err := s.AppendEvents(t.Context(), "r", customEvents("r", fmt.Sprint("w", w), per)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all := readAll(t, e.store(), "r")
	if len(all) != writers*appends*per {
		t.Fatalf("%d events read; want %d", len(all), writers*appends*per)
	}
	next := map[string]int{}
	for i, ev := range all {
		if ev.ID != int64(i+1) {
			t.Fatalf("event %d has id %d", i, ev.ID)
		}
		var k int
		_ = json.Unmarshal(ev.Payload, &k)
		if want := next[ev.Node] % per; k != want {
			t.Fatalf("writer %s: event %d carries %d; want %d (out of order)", ev.Node, ev.ID, k, want)
		}
		next[ev.Node]++
	}
}

// TestEventLogStaleWriter has a writer whose idea of the next id is old:
// another wrote past the retention since, so the first batches are
// tombstones. Its append lands after the newest, never in an old slot.
func TestEventLogStaleWriter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	a := e.store(dynamo.WithEventRetention(10))
	b := e.store(dynamo.WithEventRetention(10))
	if _, err := a.AppendEvents(ctx, "r", customEvents("r", "a", 2)); err != nil {
		t.Fatal(err)
	}
	for range 15 {
		if _, err := b.AppendEvents(ctx, "r", customEvents("r", "b", 2)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := a.AppendEvents(ctx, "r", customEvents("r", "a", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].ID != 33 {
		t.Fatalf("the stale writer's event got id %d; want 33", got[0].ID)
	}
	page, err := b.EventsSince(ctx, "r", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if page.First != 24 || page.Last != 33 || len(page.Events) != 10 || page.Events[9].Node != "a" {
		t.Fatalf("page First %d Last %d with %d events; want 24, 33, 10 ending with the stale writer's", page.First, page.Last, len(page.Events))
	}
}

// TestEventLogStorageBounded appends far past the retention: the items
// still holding events stay within the retention plus a pruning step,
// and a resume from a dropped id starts at the oldest kept.
func TestEventLogStorageBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store(dynamo.WithEventRetention(20))
	for range 60 {
		if _, err := s.AppendEvents(ctx, "r", customEvents("r", "n", 3)); err != nil {
			t.Fatal(err)
		}
	}
	live := 0
	for _, it := range partitionItems(t, e, "r") {
		if _, gone := it["gone"]; !gone {
			live++
		}
	}
	// 20 events kept, pruned every 2: at most 8 items of 3 events.
	if live > 8 {
		t.Errorf("%d batch items still hold events; want at most 8", live)
	}
	page, err := s.EventsSince(ctx, "r", 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if page.First != 161 || page.Last != 180 || len(page.Events) != 20 || page.Events[0].ID != 161 {
		t.Fatalf("EventsSince(5) = First %d, Last %d, %d events; want 161, 180 and 20 from 161", page.First, page.Last, len(page.Events))
	}
	// Far beyond the stream: nothing, and the true last id.
	page, err = s.EventsSince(ctx, "r", 5000, 0)
	if err != nil || len(page.Events) != 0 || page.Last != 180 {
		t.Fatalf("EventsSince(5000) = %d events, Last %d, %v; want none and 180", len(page.Events), page.Last, err)
	}
}

// TestEventLogLargeEvents stores events over DynamoDB's item limit in
// blobs, reads them back whole, and drops their blobs once they are past
// the retention.
func TestEventLogLargeEvents(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store(dynamo.WithEventRetention(2))
	big := strings.Repeat("x", 500_000)
	evs := []pregel.Event{
		{Type: pregel.EventNodeFinished, RunID: "r", Node: "n", Writes: map[string]json.RawMessage{"out": json.RawMessage(strconv.Quote(big))}},
		{Type: pregel.EventCustom, RunID: "r", Node: "n", Name: "small", Payload: json.RawMessage(`1`)},
	}
	if _, err := s.AppendEvents(ctx, "r", evs); err != nil {
		t.Fatal(err)
	}
	page, err := e.store().EventsSince(ctx, "r", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 2 || len(page.Events[0].Writes["out"]) != len(big)+2 || page.Events[1].Name != "small" {
		t.Fatalf("read back %d events; want the large one whole and the small one", len(page.Events))
	}
	for range 3 {
		if _, err := s.AppendEvents(ctx, "r", customEvents("r", "n", 1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sk := range partitionKeys(t, e, "r") {
		if strings.HasPrefix(sk, "BLOB#") {
			t.Errorf("blob chunk %s is left after its events were pruned", sk)
		}
	}
}

// TestEventLogCost measures what the log costs in requests and request
// units: an append by a warm writer is one PutItem, by a cold one a
// Query and a PutItem; a read at the end of the stream one Query.
func TestEventLogCost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	// A superstep's engine events: step started, node started and
	// finished, state updated, step finished.
	step := func(run string, i int) []pregel.Event {
		w := map[string]json.RawMessage{"count": json.RawMessage(strconv.Itoa(i))}
		return []pregel.Event{
			{Type: pregel.EventStepStarted, RunID: run, Graph: "loop", Step: i, Tasks: 1, Time: time.Now()},
			{Type: pregel.EventNodeStarted, RunID: run, Graph: "loop", Step: i, Node: "count", TaskID: "r:1:count:0123456789abcdef", Time: time.Now()},
			{Type: pregel.EventNodeFinished, RunID: run, Graph: "loop", Step: i, Node: "count", TaskID: "r:1:count:0123456789abcdef", Status: pregel.NodeCompleted, Attempts: 1, Writes: w, Time: time.Now()},
			{Type: pregel.EventStateUpdated, RunID: run, Graph: "loop", Step: i, Values: w, Time: time.Now()},
			{Type: pregel.EventStepFinished, RunID: run, Graph: "loop", Step: i, Tasks: 1, Time: time.Now()},
		}
	}
	var warm, cold, read costRow
	for i := 1; i <= costSteps; i++ {
		u := e.measure(t, func() error { _, err := s.AppendEvents(ctx, "warm", step("warm", i)); return err })
		if i > 1 {
			warm.add(u) // the first is a cold writer's
		}
		cold.add(e.measure(t, func() error { _, err := e.store().AppendEvents(ctx, "cold", step("cold", i)); return err }))
		// A watcher that has the previous step's events, or stopped
		// inside this one's.
		after := int64(5*i - 5 + 3*(i%2))
		read.add(e.measure(t, func() error {
			page, err := e.store().EventsSince(ctx, "warm", after, 0)
			if err == nil && (len(page.Events) == 0 || page.Events[len(page.Events)-1].ID != int64(5*i)) {
				err = fmt.Errorf("read after %d: %d events, want up to %d", after, len(page.Events), 5*i)
			}
			return err
		}))
	}
	t.Logf("append a step's 5 events, warm writer: %s", &warm)
	t.Logf("append a step's 5 events, cold writer: %s", &cold)
	t.Logf("read the newest events (a watcher's poll): %s", &read)
	if n := float64(warm.n); float64(warm.requests)/n != 1 || warm.units.WRU/n > 1 {
		t.Errorf("a warm append costs %s; want 1 request and 1 WRU", &warm)
	}
	if n := float64(cold.n); float64(cold.requests)/n != 2 || cold.units.WRU/n > 1 || cold.units.RRU/n > 1 {
		t.Errorf("a cold append costs %s; want 2 requests, 1 RRU and 1 WRU", &cold)
	}
	if n := float64(read.n); float64(read.requests)/n != 1 || read.units.RRU/n > 1 {
		t.Errorf("a read at the end costs %s; want 1 request and 1 RRU", &read)
	}
}

// partitionItems returns every item of a run's partition.
func partitionItems(t *testing.T, e *env, run string) []map[string]types.AttributeValue {
	t.Helper()
	p := dynamodb.NewQueryPaginator(e.client, &dynamodb.QueryInput{
		TableName:                 aws.String(e.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "RUN#" + run}},
	})
	var items []map[string]types.AttributeValue
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, out.Items...)
	}
	return items
}

func TestEventCompaction(t *testing.T) {
	t.Parallel()
	runstest.RunEventCompaction(t, func(t *testing.T) runstest.CompactingEventLog {
		return newEnv(t).store()
	})
}

// TestEventCompactionMidway checks what readers get while a compaction
// is under way: the new item is written and some of the items it
// replaces are not deleted yet, in any pattern (BatchWriteItem deletes in
// no set order). A resume from every id gets exactly the text and events
// that followed it, once, as before the compaction.
func TestEventCompactionMidway(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.store()
	ctx := t.Context()
	const run = "mid"
	evs, _ := runstest.StreamedTurn(run, 12)
	var logged []runs.StreamEvent
	for _, ev := range evs {
		got, err := s.AppendEvents(ctx, run, []pregel.Event{ev}) // one item each
		if err != nil {
			t.Fatal(err)
		}
		logged = append(logged, got...)
	}
	scan := func() map[string]map[string]types.AttributeValue {
		t.Helper()
		out, err := e.client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(e.table), FilterExpression: aws.String("begins_with(sk, :e)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":e": &types.AttributeValueMemberS{Value: "EVT#"}}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]map[string]types.AttributeValue{}
		for _, it := range out.Items {
			m[it["sk"].(*types.AttributeValueMemberS).Value] = it
		}
		return m
	}
	check := func(what string) {
		t.Helper()
		for after := int64(0); after <= logged[len(logged)-1].ID; after++ {
			got, want := map[string]string{}, map[string]string{}
			var rest []runs.StreamEvent
			for _, ev := range logged {
				if ev.ID > after {
					rest = append(rest, ev)
				}
			}
			wantO := runstest.AssembleMessages(t, rest, want)
			gotO := runstest.AssembleMessages(t, readAfter(t, s, run, after), got)
			if fmt.Sprint(got, gotO) != fmt.Sprint(want, wantO) {
				t.Fatalf("%s: resume from %d: got %q %v; want %q %v", what, after, got, gotO, want, wantO)
			}
		}
	}
	before := scan()
	var c runs.Compactor
	for _, b := range logged {
		if comp := c.Appended([]runs.StreamEvent{b}); comp != nil {
			if err := s.CompactEvents(ctx, run, *comp); err != nil {
				t.Fatal(err)
			}
		}
	}
	if comp := c.Flush(); comp != nil {
		if err := s.CompactEvents(ctx, run, *comp); err != nil {
			t.Fatal(err)
		}
	}
	after := scan()
	var deleted []map[string]types.AttributeValue
	for sk, it := range before {
		if _, ok := after[sk]; !ok {
			deleted = append(deleted, it)
		}
	}
	slices.SortFunc(deleted, func(a, b map[string]types.AttributeValue) int {
		return strings.Compare(a["sk"].(*types.AttributeValueMemberS).Value, b["sk"].(*types.AttributeValueMemberS).Value)
	})
	if len(deleted) < 10 {
		t.Fatalf("the compactions deleted %d items of %d; want most", len(deleted), len(before))
	}
	check("compacted")
	for _, keep := range []func(i int) bool{
		func(i int) bool { return i%2 == 0 },
		func(i int) bool { return i%2 == 1 },
		func(i int) bool { return i == 0 },
		func(i int) bool { return i > len(deleted)/2 },
	} {
		var back []map[string]types.AttributeValue
		for i, it := range deleted {
			if keep(i) {
				back = append(back, it)
			}
		}
		for _, it := range back {
			if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: it}); err != nil {
				t.Fatal(err)
			}
		}
		check(fmt.Sprintf("%d of the %d items replaced still there", len(back), len(deleted)))
		for _, it := range back {
			if _, err := e.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(e.table),
				Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// readAfter reads a run's stream after an id, page by page.
func readAfter(t *testing.T, l runs.EventReader, run string, after int64) []runs.StreamEvent {
	t.Helper()
	var all []runs.StreamEvent
	for range 1000 {
		page, err := l.EventsSince(t.Context(), run, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) == 0 {
			return all
		}
		for _, ev := range page.Events {
			if ev.ID <= after {
				t.Fatalf("event %d after %d", ev.ID, after)
			}
			after = ev.ID
		}
		all = append(all, page.Events...)
	}
	t.Fatal("the stream does not end")
	return nil
}

// TestWatchedTurnBytes: a watched conversation stores its answers' text
// about once on DynamoDB too, not an event per token (see the SQLite
// test of the same name): 3 turns of 1,000 tokens here,
// SUPERSTEP_WATCHED_TURNS=100 for the 100-turn figure (≤ 5 MB).
func TestWatchedTurnBytes(t *testing.T) {
	if os.Getenv(runstest.WatchedTurnsEnv) == "" {
		t.Skipf("10-20 s against moto on a shared machine: set %s=3 (or 100) to run it; TestEventCompaction is the short check", runstest.WatchedTurnsEnv)
	}
	t.Parallel()
	s := newEnv(t).store()
	turns := runstest.WatchedTurns(t, 3)
	total, text := runstest.WatchedTurnBytes(t, turns, 1000, runstest.FlatStores{Runs: s, Threads: s, Checkpoints: s, Events: s})
	if limit := 5*text + int64(turns)*8192; total.TotalBytes > limit {
		t.Errorf("%d turns stored %d bytes; want at most %d (five times the %d bytes of text, 8 KB a turn)", turns, total.TotalBytes, limit, text)
	}
	if turns >= 100 && total.TotalBytes > 5<<20 {
		t.Errorf("%d turns stored %d bytes; want at most 5 MB", turns, total.TotalBytes)
	}
}
