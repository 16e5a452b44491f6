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
// [dynamo.Store.PurgeRun]. Other records are ignored: the event source
// mapping's filter passes only deletions of run records by TTL.
//
// A purge that fails is reported in BatchItemFailures with the record's
// sequence number, and the records after it are not processed: Lambda
// retries the batch from that record, and after its retries sends the
// batch's description to the on-failure destination.
func (a *App) HandleStream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var resp events.DynamoDBEventResponse
	for _, r := range ev.Records {
		log := a.Logger.With("handler", "sweep", "event_id", r.EventID)
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
	if r.EventName != "REMOVE" {
		return "", false
	}
	pk, okPK := r.Change.Keys["pk"]
	sk, okSK := r.Change.Keys["sk"]
	if !okPK || !okSK || pk.DataType() != events.DataTypeString || sk.DataType() != events.DataTypeString {
		return "", false
	}
	return dynamo.RunRecordKey(pk.String(), sk.String())
}
