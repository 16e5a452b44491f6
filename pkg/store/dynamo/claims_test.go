package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/tick"
)

func TestClaims(t *testing.T) {
	t.Parallel()
	s := newEnv(t).store()
	var _ tick.Claims = s
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		name         string
		owner        string
		at           time.Time
		wantOK       bool
		wantTookOver string
	}{
		{"first claim", "a", now, true, ""},
		{"another owner while the lease holds", "b", now.Add(time.Minute), false, ""},
		{"the holder again", "a", now.Add(2 * time.Minute), true, ""},
		{"another owner after the lease expired", "b", now.Add(time.Hour), true, "a"},
		{"the old holder is now refused", "a", now.Add(time.Hour + time.Minute), false, ""},
	}
	for _, st := range steps {
		ok, took, err := s.Claim(ctx, "run", 3, "task", st.owner, st.at, st.at.Add(15*time.Minute))
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if ok != st.wantOK || took != st.wantTookOver {
			t.Errorf("%s: Claim = %v, %q; want %v, %q", st.name, ok, took, st.wantOK, st.wantTookOver)
		}
	}
	// Leases of other tasks and steps are independent.
	if ok, _, _ := s.Claim(ctx, "run", 4, "task", "c", now, now.Add(time.Minute)); !ok {
		t.Error("a lease of another step was refused")
	}
}
