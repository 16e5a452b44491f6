package runstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/runs"
)

// PushStores runs the conformance suite of push-config stores. newStore
// makes a store; purge, if set, deletes everything of a run the way the
// store's own run deletion does (the suite then checks the configs go
// with it).
//
// The suite holds stores to: a config comes back byte for byte (Config,
// secrets included), with its cursor and CreatedAt (millisecond
// precision); Put replaces a config of the same ID and keeps its
// CreatedAt; List returns a run's configs by ID and only that run's;
// Get and Advance of an unknown config wrap runs.ErrNotFound; Delete is
// idempotent; Advance only moves the cursor forward, also under
// concurrent calls; a store that lists the runs with configs
// (PushRuns) lists exactly them.
func PushStores(t *testing.T, newStore func(t *testing.T) runs.PushStore, purge func(t *testing.T, s runs.PushStore, runID string)) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 11, 26, 14, 0, 0, 123_000_000, time.UTC)
	secret := []byte(`{"url":"https://hooks.example.com/a","token":"tok-secret","authentication":{"scheme":"Bearer","credentials":"cred-secret"}}`)

	t.Run("RoundTrip", func(t *testing.T) {
		s := newStore(t)
		run := uniq(t)
		want := runs.PushConfig{RunID: run, ID: "b", Config: secret, Seen: 3, Last: "working", CreatedAt: at}
		if err := s.PutPushConfig(ctx, want); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetPushConfig(ctx, run, "b")
		if err != nil {
			t.Fatal(err)
		}
		checkPush(t, got, want)
		got.Config[0] = 'X' // a copy
		if again, _ := s.GetPushConfig(ctx, run, "b"); !bytes.Equal(again.Config, secret) {
			t.Errorf("changing a returned config changed the store: %s", again.Config)
		}
		// Replacing keeps CreatedAt and takes the rest.
		repl := runs.PushConfig{RunID: run, ID: "b", Config: []byte(`{"url":"https://hooks.example.com/b"}`), CreatedAt: at.Add(time.Hour)}
		if err := s.PutPushConfig(ctx, repl); err != nil {
			t.Fatal(err)
		}
		got, err = s.GetPushConfig(ctx, run, "b")
		if err != nil {
			t.Fatal(err)
		}
		repl.CreatedAt = at
		checkPush(t, got, repl)
	})

	t.Run("ListAndDelete", func(t *testing.T) {
		s := newStore(t)
		run, other := uniq(t), uniq(t)
		for _, id := range []string{"c", "a", "b"} {
			if err := s.PutPushConfig(ctx, runs.PushConfig{RunID: run, ID: id, Config: []byte(`{"id":"` + id + `"}`), CreatedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PutPushConfig(ctx, runs.PushConfig{RunID: other, ID: "z", Config: secret, CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
		if ids := pushIDs(t, s, run); !slices.Equal(ids, []string{"a", "b", "c"}) {
			t.Errorf("ListPushConfigs: %v, want [a b c]", ids)
		}
		if err := s.DeletePushConfig(ctx, run, "b"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeletePushConfig(ctx, run, "b"); err != nil {
			t.Errorf("deleting again: %v, want nil (idempotent)", err)
		}
		if ids := pushIDs(t, s, run); !slices.Equal(ids, []string{"a", "c"}) {
			t.Errorf("after delete: %v, want [a c]", ids)
		}
		if _, err := s.GetPushConfig(ctx, run, "b"); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("GetPushConfig of a deleted config: %v, want ErrNotFound", err)
		}
		if ids := pushIDs(t, s, uniq(t)); len(ids) != 0 {
			t.Errorf("configs of a run without any: %v", ids)
		}
		if l, ok := s.(interface {
			PushRuns(context.Context) ([]string, error)
		}); ok {
			got, err := l.PushRuns(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(got, run) || !slices.Contains(got, other) {
				t.Errorf("PushRuns %v, want %s and %s in it", got, run, other)
			}
			for _, id := range []string{"a", "c"} {
				if err := s.DeletePushConfig(ctx, run, id); err != nil {
					t.Fatal(err)
				}
			}
			if got, _ = l.PushRuns(ctx); slices.Contains(got, run) {
				t.Errorf("PushRuns %v lists %s, whose configs were all deleted", got, run)
			}
		}
	})

	t.Run("Advance", func(t *testing.T) {
		s := newStore(t)
		run := uniq(t)
		if err := s.AdvancePushConfig(ctx, run, "nope", 1, "working"); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("AdvancePushConfig of an unknown config: %v, want ErrNotFound", err)
		}
		if err := s.PutPushConfig(ctx, runs.PushConfig{RunID: run, ID: "a", Config: secret, Seen: 1, CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
		for _, step := range []struct {
			seen     int
			last     string
			wantSeen int
			wantLast string
		}{
			{4, "input-required", 4, "input-required"},
			{2, "working", 4, "input-required"}, // backwards: ignored
			{4, "completed", 4, "input-required"},
			{7, "completed", 7, "completed"},
		} {
			if err := s.AdvancePushConfig(ctx, run, "a", step.seen, step.last); err != nil {
				t.Fatal(err)
			}
			got, err := s.GetPushConfig(ctx, run, "a")
			if err != nil {
				t.Fatal(err)
			}
			if got.Seen != step.wantSeen || got.Last != step.wantLast {
				t.Errorf("after Advance(%d, %s): cursor (%d, %s), want (%d, %s)", step.seen, step.last, got.Seen, got.Last, step.wantSeen, step.wantLast)
			}
			if !bytes.Equal(got.Config, secret) {
				t.Errorf("Advance changed the config: %s", got.Config)
			}
		}
		var wg sync.WaitGroup
		for i := 8; i <= 27; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.AdvancePushConfig(ctx, run, "a", i, fmt.Sprint(i)); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if got, _ := s.GetPushConfig(ctx, run, "a"); got.Seen != 27 || got.Last != "27" {
			t.Errorf("after concurrent advances to 8..27: cursor (%d, %s), want (27, 27)", got.Seen, got.Last)
		}
	})

	if purge != nil {
		t.Run("PurgedWithRun", func(t *testing.T) {
			s := newStore(t)
			run, other := uniq(t), uniq(t)
			for _, r := range []string{run, other} {
				if err := s.PutPushConfig(ctx, runs.PushConfig{RunID: r, ID: "a", Config: secret, CreatedAt: at}); err != nil {
					t.Fatal(err)
				}
			}
			purge(t, s, run)
			if ids := pushIDs(t, s, run); len(ids) != 0 {
				t.Errorf("configs %v left after the run was deleted", ids)
			}
			if ids := pushIDs(t, s, other); len(ids) != 1 {
				t.Errorf("another run's configs %v after the run was deleted, want [a]", ids)
			}
		})
	}
}

func pushIDs(t *testing.T, s runs.PushStore, runID string) []string {
	t.Helper()
	cs, err := s.ListPushConfigs(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cs {
		if c.RunID != runID {
			t.Errorf("ListPushConfigs(%s) returned a config of run %s", runID, c.RunID)
		}
		ids = append(ids, c.ID)
	}
	return ids
}

func checkPush(t *testing.T, got, want runs.PushConfig) {
	t.Helper()
	if got.RunID != want.RunID || got.ID != want.ID || !bytes.Equal(got.Config, want.Config) || got.Seen != want.Seen || got.Last != want.Last {
		t.Errorf("config %+v (config %s), want %+v (config %s)", got, got.Config, want, want.Config)
	}
	if d := got.CreatedAt.Sub(want.CreatedAt); d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("CreatedAt %v, want %v", got.CreatedAt, want.CreatedAt)
	}
}
