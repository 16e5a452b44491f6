package tracing

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/propagation"
)

// MessageAttributes returns the SQS message attributes that carry ctx's
// trace context (traceparent, tracestate, baggage as String attributes),
// or nil when ctx holds none. The queue that sends ticks and node tasks
// calls it (sqsqueue.WithMessageAttributes).
func (t *Tracer) MessageAttributes(ctx context.Context) map[string]types.MessageAttributeValue {
	if t == nil {
		return nil
	}
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	out := make(map[string]types.MessageAttributeValue, len(carrier))
	for k, v := range carrier {
		out[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return out
}

// FromMessage returns ctx holding the trace context an SQS record's
// message attributes carry (see [Tracer.MessageAttributes]), as the
// remote parent of the spans its handler starts; ctx as is when they
// carry none.
func (t *Tracer) FromMessage(ctx context.Context, m events.SQSMessage) context.Context {
	if t == nil || len(m.MessageAttributes) == 0 {
		return ctx
	}
	carrier := propagation.MapCarrier{}
	for _, k := range t.prop.Fields() {
		if a, ok := m.MessageAttributes[k]; ok && a.StringValue != nil {
			carrier[k] = *a.StringValue
		}
	}
	return t.prop.Extract(ctx, carrier)
}
