package dynamo

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// A task recorded in both layouts of a step is applied once: its final
// result, else its first.
func TestOnePerTask(t *testing.T) {
	res := []pregel.TaskResult{
		{TaskID: "a", Status: pregel.NodeInterrupted},
		{TaskID: "b", Status: pregel.NodeCompleted, Node: "first"},
		{TaskID: "a", Status: pregel.NodeCompleted},
		{TaskID: "b", Status: pregel.NodeCompleted, Node: "second"},
		{TaskID: "c", Status: pregel.NodeFailed},
	}
	got := onePerTask(res)
	if len(got) != 3 || got[0].TaskID != "a" || got[0].Status != pregel.NodeCompleted || got[1].Node != "first" || got[2].TaskID != "c" {
		t.Fatalf("onePerTask: %+v; want a (completed), b (first), c", got)
	}
}

// Shards are spread: 10,000 task ids over 20 shards, none with more than
// 1.2 times its share (the shard counts the marker holds say exactly).
func TestShardOfSpreads(t *testing.T) {
	const n, s = 10000, 20
	counts := make([]int, s)
	for i := range n {
		sum := sha256.Sum256([]byte(strconv.Itoa(i))) // task ids are hashes (pregel.Plan)
		counts[shardOf(hex.EncodeToString(sum[:12]), s)]++
	}
	for k, c := range counts {
		if c == 0 || c > n/s*6/5 {
			t.Errorf("shard %d has %d of %d tasks", k, c, n)
		}
	}
}
