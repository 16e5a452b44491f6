package dynamo_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/longterm/longtermtest"
)

// TestLongTermConformance runs the long-term store suite on moto, every
// sub-test on one table and one backend, as a deployment shares them.
func TestLongTermConformance(t *testing.T) {
	t.Parallel()
	b := newEnv(t).store().LongTerm()
	longtermtest.Run(t, func(*testing.T) longterm.Backend { return b })
}

// TestLongTermCost measures the requests and request units of each
// long-term store operation on items of about 1 KB (a value of 900 bytes
// and a 1024-dimension embedding would add 4 KB: see README.md), as
// README.md states them.
func TestLongTermCost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := longterm.New(e.store().LongTerm())
	ctx := t.Context()
	ns := longterm.Namespace{"users", "u-42", "prefs"}
	value := json.RawMessage(fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", 900)))
	measure := func(name string, fn func()) units {
		before := e.capacity.snapshot()
		fn()
		got := e.capacity.snapshot().sub(before)
		t.Logf("%s: %s", name, got)
		return got.total()
	}
	check := func(name string, got units, calls int, rru, wru float64) {
		t.Helper()
		if got.Calls != calls || got.RRU != rru || got.WRU != wru {
			t.Errorf("%s: %d requests, %.4g RRU, %.4g WRU; want %d, %.4g, %.4g", name, got.Calls, got.RRU, got.WRU, calls, rru, wru)
		}
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	first := measure("first put (new root)", func() { _, err := s.Put(ctx, ns, "k0", value); must(err) })
	check("first put", first, 2, 0, 2)
	check("put", measure("put", func() { _, err := s.Put(ctx, ns, "k1", value); must(err) }), 1, 0, 1)
	check("replace", measure("replace", func() { _, err := s.Put(ctx, ns, "k1", value); must(err) }), 1, 0, 1)
	check("get", measure("get", func() { _, err := s.Get(ctx, ns, "k1"); must(err) }), 1, 1, 0)
	for i := 2; i < 10; i++ {
		_, err := s.Put(ctx, ns, fmt.Sprint("k", i), value)
		must(err)
	}
	// A page of 10 items of 1 KB: one Query of 11 KB, strongly consistent.
	check("list 10", measure("list a page of 10", func() {
		p, err := s.List(ctx, longterm.Namespace{"users", "u-42"}, longterm.ListOptions{Limit: 10})
		must(err)
		if len(p.Items) != 10 {
			t.Fatalf("page of %d items, want 10", len(p.Items))
		}
	}), 1, 3, 0)
	check("delete", measure("delete", func() { must(s.Delete(ctx, ns, "k1")) }), 1, 0, 1)
}
