package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Reads says which channels of a checkpoint a caller needs: given the
// checkpoint without its values (its graph and Next are set), the channels
// to read, or all. tick.Handler passes pregel.Graph.StepReads of the run's
// graph.
type Reads func(cp *pregel.Checkpoint) (channels []string, all bool)

// wanted returns the set of channels reads asks for in cp, or nil for all.
func wanted(cp *pregel.Checkpoint, reads Reads) map[string]bool {
	if reads == nil {
		return nil
	}
	chs, all := reads(cp)
	if all {
		return nil
	}
	want := make(map[string]bool, len(chs))
	for _, ch := range chs {
		want[ch] = true
	}
	// A channel stored in segments (pregel.PackSegments) is read whole,
	// with all its segments, whether the step reads it or not: its value
	// is joined from them, and the next step's segments follow from them.
	for ch := range cp.Versions {
		if base, ok := pregel.SegmentOf(ch); ok {
			want[ch], want[base] = true, true
		}
	}
	return want
}

// LoadRunReading is LoadRun reading, of the newest checkpoint's values,
// those its step item holds and those of the channels reads asks for; the
// other channels are listed in the checkpoint's Unloaded. It implements
// tick.ChannelLoader.
//
// A large value that no task of the step reads is so not fetched: a Store
// that has not seen the step (a new Lambda execution environment) reads
// the run record and the step item with LoadRun's Query, and the
// BatchGetItem of values held by earlier items or blobs only for the
// channels the step reads.
func (s *Store) LoadRunReading(ctx context.Context, runID string, reads func(cp *pregel.Checkpoint) ([]string, bool)) (runs.Run, *pregel.Checkpoint, []pregel.TaskResult, error) {
	return s.loadRun(ctx, runID, reads)
}

// LoadChannels returns cp, a checkpoint of a run that this Store loaded or
// committed, with the values of channels (which it may not have loaded)
// read too: cp itself when it has them all, or a copy; cp is not changed.
// It implements tick.ChannelLoader.
func (s *Store) LoadChannels(ctx context.Context, cp *pregel.Checkpoint, channels []string) (*pregel.Checkpoint, error) {
	return s.loadChannels(ctx, cp.RunID, cp, channels)
}

// ensure returns, of cp (a checkpoint in its stored form, as the cache
// keeps it), the checkpoint as loaded (pregel.UnpackSegments) with the
// channels reads asks for loaded (all when reads is nil).
func (s *Store) ensure(ctx context.Context, runID string, cp *pregel.Checkpoint, reads Reads) (*pregel.Checkpoint, error) {
	if len(cp.Unloaded) > 0 {
		var channels []string
		if want := wanted(cp, reads); want != nil {
			channels = slices.Collect(maps.Keys(want))
		}
		var err error
		if cp, err = s.loadChannels(ctx, runID, cp, channels); err != nil {
			return nil, err
		}
	}
	if e, ok := s.steps.get(stepKey{runID, cp.Step}); ok && e.cp == cp && e.full != nil {
		return e.full, nil
	}
	full, err := pregel.UnpackSegments(cp)
	if err != nil {
		return nil, fmt.Errorf("dynamo: run %q step %d: %w", runID, cp.Step, err)
	}
	return full, nil
}

// loadChannels returns cp with the values of channels read (nil: all its
// unloaded channels), from the cache or with one BatchGetItem of the items
// that hold them, as the manifest of its step says. The cache keeps the
// fuller checkpoint.
func (s *Store) loadChannels(ctx context.Context, runID string, cp *pregel.Checkpoint, channels []string) (*pregel.Checkpoint, error) {
	var need []string
	if channels == nil {
		need = slices.Sorted(maps.Keys(cp.Unloaded))
	}
	for _, ch := range channels {
		if cp.Unloaded[ch] {
			need = append(need, ch)
		}
	}
	if len(need) == 0 {
		return cp, nil
	}
	e, ok := s.steps.get(stepKey{runID, cp.Step})
	if !ok {
		// Evicted: read the step item's documents again.
		item, err := s.getItem(ctx, runPK(runID), stepSK(cp.Step))
		if errors.Is(err, errItemNotFound) {
			return nil, fmt.Errorf("dynamo: load run %q step %d: %w", runID, cp.Step, pregel.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("dynamo: load run %q step %d: %w", runID, cp.Step, err)
		}
		docs, err := s.decodeDocs(ctx, runID, []map[string]types.AttributeValue{item})
		if err != nil {
			return nil, err
		}
		e = docs[0].entry()
	}
	out := *cp
	out.Values = maps.Clone(cp.Values)
	if out.Values == nil {
		out.Values = map[string]json.RawMessage{}
	}
	out.Unloaded = maps.Clone(cp.Unloaded)
	if err := s.fetchValues(ctx, runID, cp.Step, e.man, out.Values, need); err != nil {
		return nil, err
	}
	for _, ch := range need {
		delete(out.Unloaded, ch)
	}
	if len(out.Unloaded) == 0 {
		out.Unloaded = nil
	}
	// The cache keeps both forms: out is in the form cp was given in,
	// stored (from the cache) or loaded (from a caller: LoadChannels);
	// channels stored in segments are always read whole (wanted), so
	// the values read here are of channels stored whole.
	packed, full := pregel.PackSegments(&out), &out
	if packed == full {
		var err error
		if full, err = pregel.UnpackSegments(packed); err != nil {
			return nil, fmt.Errorf("dynamo: run %q step %d: %w", runID, cp.Step, err)
		}
	}
	s.remember(runID, cp.Step, &stepEntry{commit: e.commit, size: e.size, man: e.man, base: e.base, cp: packed, full: full})
	return &out, nil
}
