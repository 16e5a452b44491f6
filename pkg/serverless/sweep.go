package serverless

import (
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/superstep/superstep/pkg/store/dynamo"
)

// pushConcurrency bounds the runs whose push notifications one stream
// batch delivers at a time: a slow receiver holds up its run only.
const pushConcurrency = 8

// HandleStream is the sweep function's handler, fed by the table's
// stream. It does three things:
//
//   - A finished run's record carries a TTL; when DynamoDB deletes it, the
//     record's REMOVE reaches this handler, which deletes what is left of
//     the run (steps, task results, claims, blobs, push configs) with
//     [dynamo.Store.PurgeRun].
//   - An idle thread's record carries one too when THREAD_RETENTION is
//     set ([dynamo.WithThreadRetention]); its REMOVE makes the handler
//     delete the thread's runs with [dynamo.Store.PurgeThread].
//   - An insertion or change of a run record, or the insertion of a push
//     config, delivers the run's A2A push notifications
//     ([a2a.Server.DeliverPush]): each change of the task's state since
//     each config's cursor, once, retried with backoff. The event source
//     mappings' filters pass only TTL removals of run and thread records, changes of
//     run records whose status is not running before or after (a step
//     of a running run changes nothing a client is told), and insertions
//     of push configs; other records are ignored here too.
//
// A purge that fails, or a delivery that cannot read or write the table,
// is reported in BatchItemFailures with the record's sequence number
// (the earliest such record), and the records after a failed purge are
// not processed: Lambda retries the batch from that record (deliveries
// already made are not repeated: the cursors moved), and after its
// retries sends the batch's description to the on-failure destination.
// A receiver that refuses a notification is not a failure of the batch:
// it is retried with backoff, then logged.
func (a *App) HandleStream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	if a.Agents == nil {
		return events.DynamoDBEventResponse{}, a.unwired("the table's stream", FunctionSweep)
	}
	var resp events.DynamoDBEventResponse
	failed := -1 // index of the earliest failed record
	type delivery struct {
		at  int
		run string
	}
	var pushes []delivery
	queued := map[string]bool{}
	for i, r := range ev.Records {
		log := a.Logger.With("handler", "sweep", "event_id", r.EventID)
		if id, ok := expiredThread(r); ok {
			log = log.With("thread_id", id)
			n, err := a.Store.PurgeThread(ctx, id)
			if err != nil {
				log.WarnContext(ctx, "thread purge failed; the batch is retried from this record", "reason", err.Error(), "deleted_runs", n)
				failed = i
				break
			}
			log.InfoContext(ctx, "expired thread purged", "deleted_runs", n)
			continue
		}
		if id, ok := changedRun(r); ok {
			if !queued[id] {
				queued[id] = true
				pushes = append(pushes, delivery{i, id})
			}
			continue
		}
		id, ok := expiredRun(r)
		if !ok {
			log.DebugContext(ctx, "stream record is neither the deletion of a run record nor a change to notify; ignored", "event_name", r.EventName)
			continue
		}
		log = log.With("run_id", id)
		n, err := a.Store.PurgeRun(ctx, id)
		switch {
		case errors.Is(err, dynamo.ErrRunExists):
			log.WarnContext(ctx, "the run record exists again; its items are kept")
		case err != nil:
			log.WarnContext(ctx, "purge failed; the batch is retried from this record", "reason", err.Error(), "deleted", n)
			failed = i
		default:
			log.InfoContext(ctx, "expired run purged", "deleted", n)
		}
		if failed >= 0 {
			break
		}
	}

	// Deliveries, a few runs at a time; those of one run in order.
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, pushConcurrency)
	for _, d := range pushes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := a.Agents.DeliverPush(ctx, d.run); err != nil {
				a.Logger.WarnContext(ctx, "push notifications not delivered; the batch is retried from this record", "handler", "sweep", "run_id", d.run, "reason", err.Error())
				mu.Lock()
				if failed < 0 || d.at < failed {
					failed = d.at
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed >= 0 {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: ev.Records[failed].Change.SequenceNumber})
	}
	return resp, nil
}

// expiredRun returns the run whose record a stream record deletes.
func expiredRun(r events.DynamoDBEventRecord) (string, bool) {
	if r.EventName != "REMOVE" {
		return "", false
	}
	pk, sk, ok := streamKey(r)
	if !ok {
		return "", false
	}
	return dynamo.RunRecordKey(pk, sk)
}

// expiredThread returns the thread whose record a stream record deletes.
func expiredThread(r events.DynamoDBEventRecord) (string, bool) {
	if r.EventName != "REMOVE" {
		return "", false
	}
	pk, sk, ok := streamKey(r)
	if !ok {
		return "", false
	}
	return dynamo.ThreadRecordKey(pk, sk)
}

// changedRun returns the run whose push notifications a stream record
// may call for: the insertion or change of its record, or the insertion
// of one of its push configs.
func changedRun(r events.DynamoDBEventRecord) (string, bool) {
	if r.EventName != "INSERT" && r.EventName != "MODIFY" {
		return "", false
	}
	pk, sk, ok := streamKey(r)
	if !ok {
		return "", false
	}
	if id, ok := dynamo.RunRecordKey(pk, sk); ok {
		return id, true
	}
	if r.EventName == "INSERT" {
		return dynamo.PushConfigKey(pk, sk)
	}
	return "", false
}

// streamKey returns the table key of a stream record.
func streamKey(r events.DynamoDBEventRecord) (pk, sk string, ok bool) {
	p, okPK := r.Change.Keys["pk"]
	s, okSK := r.Change.Keys["sk"]
	if !okPK || !okSK || p.DataType() != events.DataTypeString || s.DataType() != events.DataTypeString {
		return "", "", false
	}
	return p.String(), s.String(), true
}
