package serverless

import (
	"context"
	"errors"

	"github.com/aws/aws-lambda-go/events"

	"github.com/superstep/superstep/pkg/store/dynamo"
)

// HandleStream is the sweep function's handler, fed by the table's
// stream. A finished run's record carries a TTL; when DynamoDB deletes
// it, the record's REMOVE reaches this handler, which deletes what is left
// of the run (steps, task results, claims, blobs) with
// [dynamo.Store.PurgeRun]. An idle thread's record carries one too when
// THREAD_RETENTION is set ([dynamo.WithThreadRetention]); its REMOVE
// makes the handler delete the thread's runs with
// [dynamo.Store.PurgeThread]. Other records are ignored: the event source
// mapping's filter passes only deletions of run and thread records by
// TTL.
//
// A purge that fails is reported in BatchItemFailures with the record's
// sequence number, and the records after it are not processed: Lambda
// retries the batch from that record, and after its retries sends the
// batch's description to the on-failure destination.
func (a *App) HandleStream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var resp events.DynamoDBEventResponse
	for _, r := range ev.Records {
		log := a.Logger.With("handler", "sweep", "event_id", r.EventID)
		if id, ok := expiredThread(r); ok {
			log = log.With("thread_id", id)
			n, err := a.Store.PurgeThread(ctx, id)
			if err != nil {
				log.WarnContext(ctx, "thread purge failed; the batch is retried from this record", "reason", err.Error(), "deleted_runs", n)
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
				return resp, nil
			}
			log.InfoContext(ctx, "expired thread purged", "deleted_runs", n)
			continue
		}
		id, ok := expiredRun(r)
		if !ok {
			log.DebugContext(ctx, "stream record is not the deletion of a run record; ignored", "event_name", r.EventName)
			continue
		}
		log = log.With("run_id", id)
		n, err := a.Store.PurgeRun(ctx, id)
		switch {
		case errors.Is(err, dynamo.ErrRunExists):
			log.WarnContext(ctx, "the run record exists again; its items are kept")
		case err != nil:
			log.WarnContext(ctx, "purge failed; the batch is retried from this record", "reason", err.Error(), "deleted", n)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
			return resp, nil
		default:
			log.InfoContext(ctx, "expired run purged", "deleted", n)
		}
	}
	return resp, nil
}

// expiredRun returns the run whose record a stream record deletes.
func expiredRun(r events.DynamoDBEventRecord) (string, bool) {
	pk, sk, ok := removedKey(r)
	if !ok {
		return "", false
	}
	return dynamo.RunRecordKey(pk, sk)
}

// expiredThread returns the thread whose record a stream record deletes.
func expiredThread(r events.DynamoDBEventRecord) (string, bool) {
	pk, sk, ok := removedKey(r)
	if !ok {
		return "", false
	}
	return dynamo.ThreadRecordKey(pk, sk)
}

// removedKey returns the key of the item a REMOVE stream record deletes.
func removedKey(r events.DynamoDBEventRecord) (pk, sk string, ok bool) {
	if r.EventName != "REMOVE" {
		return "", "", false
	}
	p, okPK := r.Change.Keys["pk"]
	s, okSK := r.Change.Keys["sk"]
	if !okPK || !okSK || p.DataType() != events.DataTypeString || s.DataType() != events.DataTypeString {
		return "", "", false
	}
	return p.String(), s.String(), true
}
