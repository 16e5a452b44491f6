package dynamo

import "testing"

func TestLRU(t *testing.T) {
	c := newLRU[string, int](10)
	c.put("a", 1, 4)
	c.put("b", 2, 4)
	if v, ok := c.get("a"); !ok || v != 1 {
		t.Fatalf("get(a) = %d, %t", v, ok)
	}
	c.put("c", 3, 4) // over the limit: b, the least recently used, goes
	if _, ok := c.get("b"); ok {
		t.Error("b is still cached")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.get(k); !ok {
			t.Errorf("%s was dropped", k)
		}
	}
	c.put("big", 4, 11) // costs more than the limit: not kept
	if _, ok := c.get("big"); ok || c.used != 8 {
		t.Errorf("a value over the limit is cached (used %d)", c.used)
	}
	c.update("a", func(old int, ok bool) (int, int64) {
		if !ok || old != 1 {
			t.Errorf("update(a) saw %d, %t", old, ok)
		}
		return 10, 2
	})
	if v, ok := c.take("a"); !ok || v != 10 || c.used != 4 {
		t.Errorf("take(a) = %d, %t (used %d)", v, ok, c.used)
	}
	if _, ok := c.take("a"); ok {
		t.Error("a taken twice")
	}

	off := newLRU[string, int](0)
	off.put("a", 1, 1)
	if _, ok := off.get("a"); ok {
		t.Error("a cache of size 0 keeps values")
	}
}
