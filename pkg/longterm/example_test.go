package longterm_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/superstep/superstep/pkg/longterm"
)

// A node remembers a preference under the user's namespace and lists it
// back with a filter; the runtime puts the Store in the node's context.
func Example() {
	ctx := longterm.WithStore(context.Background(), longterm.New(longterm.NewMemory()))

	// In a node:
	s, ok := longterm.From(ctx)
	if !ok {
		return // no long-term store configured
	}
	prefs := longterm.Namespace{"users", "u-42", "prefs"}
	if _, err := s.Put(ctx, prefs, "drink", json.RawMessage(`{"text": "green tea", "kind": "pref"}`)); err != nil {
		fmt.Println(err)
		return
	}
	page, err := s.List(ctx, longterm.Namespace{"users", "u-42"}, longterm.ListOptions{Filter: longterm.Filter{"kind": "pref"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range page.Items {
		fmt.Println(it.Namespace, it.Key, string(it.Value))
	}
	_, err = s.Put(ctx, longterm.Namespace{"users", ""}, "k", json.RawMessage(`{}`))
	fmt.Println(err)
	// Output:
	// users/u-42/prefs drink {"text":"green tea","kind":"pref"}
	// invalid: namespace component 2 is empty
}
