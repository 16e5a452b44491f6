package dynamo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Sharded task results (see README.md, "Partition key limits").
//
// DynamoDB serves at most about 1,000 write units and 3,000 read units a
// second to one partition key value. A step of n remote tasks writes
// about 4 units per task (lease, result, settled count, deletion): with
// every item under RUN#<id>, a 10,000-way step is at least 40 s of writes
// to that one value, whatever the concurrency. So the items of a wide
// step's tasks are spread over S partition key values, RUN#<id>#T<k>
// (k = fnv32a(task id) mod S; "#" cannot occur in a run id, so these never
// collide with a run's own partition):
//
//   - a marker item TASK#<step># (empty task id) in the run's partition,
//     written once before the step's node tasks are sent (ShardTasks), holds
//     S and each shard's number of tasks. It sorts with the step's task
//     results, so every reader that looks for results (LoadRun, LoadRunTask,
//     PendingTasks) finds it where it found results before;
//   - the task results TASK#<step>#<id>, their blobs and the leases
//     CLAIM#<step>#<id> live in the task's shard;
//   - each shard counts its settled results (SETTLED#<step>, attribute n);
//     the handler whose shard count reaches the shard's number of tasks adds
//     one to the step's count of settled shards (SETTLED#<step> in the
//     run's partition, attribute shards_done), and the handler whose
//     addition brings that to S reads every shard (one Query per shard, in
//     pages, in parallel) and commits.
//
// A step without a marker keeps every item in the run's partition, as
// before sharding: steps dispatched before it, and steps of fewer than
// tick.CountSettledFrom remote tasks, for which the marker would cost more
// than it saves.

// Marker attributes.
const (
	// attrShards is the number of shards of a step (marker item).
	attrShards = "task_shards"
	// attrShardTasks lists the number of tasks of each shard (marker item).
	attrShardTasks = "shard_tasks"
	// attrShardsDone counts a step's shards whose count of settled results
	// reached their number of tasks (SETTLED# item in the run's partition).
	attrShardsDone = "shards_done"
)

// DefaultTasksPerShard is how many remote tasks of a step share a
// partition key value, by default (WithTasksPerShard). At 4 write units a
// task, a shard of 500 tasks takes 2,000 units: 2 s at 1,000 WCU/s if all
// came at once, and a 10,000-way step's 20 shards share the load.
const DefaultTasksPerShard = 500

// maxShards bounds the shards of a step: the reads of the commit are one
// Query per shard.
const maxShards = 64

// WithTasksPerShard sets how many remote tasks of a step share a partition
// key value (at least 1; the default is DefaultTasksPerShard). Every Store
// that dispatches steps of a deployment should use the same; the readers
// and writers of a step follow the step's marker, whatever theirs is.
func WithTasksPerShard(n int) Option {
	return func(s *Store) { s.tasksPerShard = max(n, 1) }
}

// shardInfo is what a Store knows of a step's layout: tasks[k] is the
// number of tasks of shard k; none means the step is not sharded.
type shardInfo struct {
	tasks []int
}

func (i shardInfo) sharded() bool { return len(i.tasks) > 0 }

func shardPK(runID string, k int) string { return runPK(runID) + "#T" + strconv.Itoa(k) }

// shardOf returns the shard of a task among n.
func shardOf(taskID string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(taskID))
	return int(h.Sum32() % uint32(n))
}

// taskPKOf returns the partition key of the items of task taskID.
func (i shardInfo) taskPKOf(runID, taskID string) string {
	if !i.sharded() {
		return runPK(runID)
	}
	return shardPK(runID, shardOf(taskID, len(i.tasks)))
}

// markerSK is the sort key of a step's shard marker.
func markerSK(step int) string { return taskSK(step, "") }

// isMarker reports whether an item is a step's shard marker, and returns
// what it says.
func isMarker(it map[string]types.AttributeValue) (shardInfo, bool) {
	n, ok := getN(it, attrShards)
	if !ok {
		return shardInfo{}, false
	}
	info := shardInfo{tasks: make([]int, n)}
	if l, ok := it[attrShardTasks].(*types.AttributeValueMemberL); ok && len(l.Value) == int(n) {
		for k, v := range l.Value {
			if nv, ok := v.(*types.AttributeValueMemberN); ok {
				c, _ := strconv.Atoi(nv.Value)
				info.tasks[k] = c
			}
		}
	}
	return info, true
}

// ShardTasks marks step of a run as sharded before its node tasks are
// sent, with the ids of all of its remote tasks: one conditional PutItem
// of the marker (1 WRU), which does nothing if the step has one. It
// implements tick.TaskSharder. The tick handler calls it only for a step
// with no result recorded yet, so that no result of a step is stored
// under the other layout.
func (s *Store) ShardTasks(ctx context.Context, runID string, step int, taskIDs []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n := min(max((len(taskIDs)+s.tasksPerShard-1)/s.tasksPerShard, 1), maxShards)
	info := shardInfo{tasks: make([]int, n)}
	for _, id := range taskIDs {
		info.tasks[shardOf(id, n)]++
	}
	counts := make([]types.AttributeValue, n)
	for k, c := range info.tasks {
		counts[k] = num(int64(c))
	}
	item := key(runPK(runID), markerSK(step))
	item[attrShards] = num(int64(n))
	item[attrShardTasks] = &types.AttributeValueMemberL{Value: counts}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(#sk)"),
		ExpressionAttributeNames:            map[string]string{"#sk": attrSK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if ccf, failed := isConditionFailed(err); failed {
		// Marked already (a tick delivered again): its layout holds.
		if old, ok := isMarker(ccf.Item); ok {
			s.shards.put(stepKey{runID, step}, old, 1)
			return nil
		}
		s.shards.take(stepKey{runID, step})
		return nil
	}
	if err != nil {
		return fmt.Errorf("dynamo: shard the tasks of run %q step %d: %w", runID, step, err)
	}
	s.shards.put(stepKey{runID, step}, info, 1)
	return nil
}

// shardsOf returns the layout of a step's task items: from the Store's
// notes when it read or wrote the step's marker or results, else with a
// GetItem of the marker.
func (s *Store) shardsOf(ctx context.Context, runID string, step int) (shardInfo, error) {
	if info, ok := s.shards.get(stepKey{runID, step}); ok {
		return info, nil
	}
	it, err := s.getItem(ctx, runPK(runID), markerSK(step))
	switch {
	case errors.Is(err, errItemNotFound):
		s.shards.put(stepKey{runID, step}, shardInfo{}, 1)
		return shardInfo{}, nil
	case err != nil:
		return shardInfo{}, fmt.Errorf("read the task layout of step %d: %w", step, err)
	}
	info, _ := isMarker(it)
	s.shards.put(stepKey{runID, step}, info, 1)
	return info, nil
}

// NoteUnsharded records that step's task items are not sharded (a step
// the tick handler chains: one remote task, which it never shards), so that
// its lease writes without reading the step's layout (tick.UnshardedNoter).
func (s *Store) NoteUnsharded(runID string, step int) {
	s.shards.put(stepKey{runID, step}, shardInfo{}, 1)
}

// noteShards remembers the layout of a step read from its items.
func (s *Store) noteShards(runID string, step int, info shardInfo) {
	s.shards.put(stepKey{runID, step}, info, 1)
}

// SettledAll counts the settled result of task taskID of step and reports
// whether every one of the step's remote tasks, remote of them, may have
// settled, so that this handler reads the results and commits if so. It
// implements tick.TaskSettleCounter. A step without a marker counts on one
// item (CountSettled). A sharded step counts in the task's shard, 1 WRU;
// the handler whose shard count reaches the shard's tasks counts the shard
// done in the run's partition, one more WRU per shard and step.
//
// As CountSettled's, the counts are hints at least the number of results
// settled (a delivery again may count twice): of the handlers of a shard,
// the one whose addition comes last sees at least the shard's tasks, and
// counts the shard after all of its results were recorded; of those, the
// one whose addition to the step's count comes last sees S, and reads
// after every result was recorded. So some handler reads them all.
func (s *Store) SettledAll(ctx context.Context, runID string, step int, taskID string, remote int) (bool, error) {
	info, err := s.shardsOf(ctx, runID, step)
	if err != nil {
		return false, fmt.Errorf("dynamo: count settled results of run %q step %d: %w", runID, step, err)
	}
	if !info.sharded() {
		n, err := s.CountSettled(ctx, runID, step)
		return n >= remote, err
	}
	k := shardOf(taskID, len(info.tasks))
	n, err := s.add(ctx, shardPK(runID, k), settledSK(step), attrCount)
	if err != nil {
		return false, fmt.Errorf("dynamo: count settled results of run %q step %d shard %d: %w", runID, step, k, err)
	}
	s.noteTasks(runID, step, map[string]*blobRef{counterNote: nil})
	if n < info.tasks[k] {
		return false, nil
	}
	done, err := s.add(ctx, runPK(runID), settledSK(step), attrShardsDone)
	if err != nil {
		return false, fmt.Errorf("dynamo: count settled shards of run %q step %d: %w", runID, step, err)
	}
	return done >= len(info.tasks), nil
}

// add adds one to a counter attribute and returns the count after: one
// UpdateItem (ADD), 1 WRU.
func (s *Store) add(ctx context.Context, pk, sk, attr string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(pk, sk),
		UpdateExpression:          aws.String("ADD #n :one"),
		ExpressionAttributeNames:  map[string]string{"#n": attr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, err
	}
	n, ok := getN(out.Attributes, attr)
	if !ok {
		return 0, errors.New("no count returned")
	}
	return int(n), nil
}

// shardPageLimit bounds a page of a shard's results read by the commit.
const shardPageLimit = 500

// readShards reads the task results of a sharded step, one Query per
// shard in pages, the shards in parallel (strongly consistent).
func (s *Store) readShards(ctx context.Context, runID string, step int, info shardInfo) ([]map[string]types.AttributeValue, error) {
	n := len(info.tasks)
	got := make([][]map[string]types.AttributeValue, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			in := &dynamodb.QueryInput{
				TableName:              aws.String(s.table),
				KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":pk": str(shardPK(runID, k)), ":p": str(taskPrefix(step)),
				},
				Limit:          aws.Int32(shardPageLimit),
				ConsistentRead: aws.Bool(true),
			}
			p := dynamodb.NewQueryPaginator(s.client, in)
			for p.HasMorePages() {
				out, err := p.NextPage(ctx)
				if err != nil {
					errs[k] = fmt.Errorf("query shard %d: %w", k, err)
					return
				}
				got[k] = append(got[k], out.Items...)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var all []map[string]types.AttributeValue
	for _, items := range got {
		all = append(all, items...)
	}
	return all, nil
}

// deleteParallel deletes items with BatchWriteItem, up to 8 requests at a
// time (a sharded step's results are spread over several partition key
// values, which DynamoDB serves apart).
func (s *Store) deleteParallel(ctx context.Context, keys []map[string]types.AttributeValue) error {
	if len(keys) <= maxBatchWrite {
		return s.batchWrite(ctx, nil, keys)
	}
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for len(keys) > 0 {
		n := min(len(keys), maxBatchWrite)
		batch := keys[:n]
		keys = keys[n:]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := s.batchWrite(ctx, nil, batch); err != nil {
				mu.Lock()
				first = errors.Join(first, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// shardKeysOf lists the keys of a sharded step's items in the run's
// partition and shards that its commit deletes besides the results: the
// marker, the step's counter (of shards) and each shard's counter.
func shardKeysOf(runID string, step int, info shardInfo) []map[string]types.AttributeValue {
	keys := []map[string]types.AttributeValue{key(runPK(runID), markerSK(step)), key(runPK(runID), settledSK(step))}
	for k := range info.tasks {
		keys = append(keys, key(shardPK(runID, k), settledSK(step)))
	}
	return keys
}
