package pregel_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

type emitState struct {
	Out string `json:"out"`
}

func TestEmitReachesObserverBetweenStartAndFinish(t *testing.T) {
	g := pregel.NewGraph[emitState]("emit")
	g.AddFunc("work", func(ctx context.Context, s emitState) (emitState, error) {
		for i := 1; i <= 3; i++ {
			if err := pregel.Emit(ctx, "progress", map[string]int{"done": i}); err != nil {
				return s, err
			}
		}
		return emitState{Out: "ok"}, nil
	})
	g.AddEdge(pregel.Start, "work").AddEdge("work", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []pregel.Event
	res, err := graph.Run(context.Background(), emitState{}, pregel.WithObserver(func(ev pregel.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Node == "work" {
			seen = append(seen, ev)
		}
	}))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("run: %v %v", res.Status, err)
	}
	var kinds []pregel.EventType
	for _, ev := range seen {
		kinds = append(kinds, ev.Type)
	}
	want := []pregel.EventType{pregel.EventNodeStarted, pregel.EventCustom, pregel.EventCustom, pregel.EventCustom, pregel.EventNodeFinished}
	if len(kinds) != len(want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events %v, want %v", kinds, want)
		}
	}
	ev := seen[3]
	if ev.Name != "progress" || string(ev.Payload) != `{"done":3}` || ev.RunID != res.RunID || ev.TaskID == "" || ev.Step != 1 {
		t.Fatalf("custom event = %+v", ev)
	}
}

func TestEmitThroughExecuteSink(t *testing.T) {
	g := pregel.NewGraph[emitState]("emit-exec")
	g.AddFunc("work", func(ctx context.Context, s emitState) (emitState, error) {
		return emitState{Out: "ok"}, pregel.Emit(ctx, "token", "hel")
	})
	g.AddEdge(pregel.Start, "work").AddEdge("work", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := graph.Start(context.Background(), "r1", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	tasks := graph.Plan(cp)
	if len(tasks) != 1 {
		t.Fatalf("plan: %v", tasks)
	}
	// Without a sink Emit is a no-op that succeeds.
	if res := graph.Execute(context.Background(), tasks[0], cp.Values, nil); res.Status != pregel.NodeCompleted {
		t.Fatalf("execute without sink: %+v", res)
	}
	var got []pregel.Event
	ctx := pregel.WithEventSink(context.Background(), func(ev pregel.Event) { got = append(got, ev) })
	if res := graph.Execute(ctx, tasks[0], cp.Values, nil); res.Status != pregel.NodeCompleted {
		t.Fatalf("execute: %+v", res)
	}
	if len(got) != 1 || got[0].Name != "token" || string(got[0].Payload) != `"hel"` || got[0].RunID != "r1" || got[0].Node != "work" {
		t.Fatalf("sink got %+v", got)
	}
}

func TestEmitErrors(t *testing.T) {
	if err := pregel.Emit(context.Background(), "x", 1); err == nil {
		t.Fatal("Emit outside a node succeeded")
	}
	g := pregel.NewGraph[emitState]("emit-bad")
	g.AddFunc("work", func(ctx context.Context, s emitState) (emitState, error) {
		if err := pregel.Emit(ctx, "", 1); err == nil {
			return s, errBadEmit("empty name accepted")
		}
		if err := pregel.Emit(ctx, "x", func() {}); err == nil {
			return s, errBadEmit("unencodable payload accepted")
		}
		return emitState{Out: "ok"}, nil
	})
	g.AddEdge(pregel.Start, "work").AddEdge("work", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	res, err := graph.Run(context.Background(), emitState{}, pregel.WithObserver(func(pregel.Event) {}))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("run: %v %v", res.Status, err)
	}
}

type errBadEmit string

func (e errBadEmit) Error() string { return string(e) }
