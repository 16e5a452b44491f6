package tracing

import (
	"context"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
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
	if t == nil {
		return ctx
	}
	ctx = context.WithValue(ctx, messageKey{}, m.MessageId+"\x00"+queueName(m.EventSourceARN))
	if len(m.MessageAttributes) == 0 {
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

// messageKey holds, in a context, the id and queue of the SQS message
// being handled (FromMessage), for the messaging attributes of the tick
// span.
type messageKey struct{}

// queueName is the queue's name: the last part of its ARN.
func queueName(arn string) string {
	if i := strings.LastIndexByte(arn, ':'); i >= 0 {
		return arn[i+1:]
	}
	return arn
}

// messagingAttrs are the messaging semantic conventions' attributes of a
// span that handles the SQS message in ctx: messaging.system=aws_sqs,
// messaging.operation.type=process, messaging.destination.name (the
// queue), messaging.message.id. None when ctx holds no message.
func messagingAttrs(ctx context.Context) []attribute.KeyValue {
	v, _ := ctx.Value(messageKey{}).(string)
	if v == "" {
		return nil
	}
	id, queue, _ := strings.Cut(v, "\x00")
	attrs := []attribute.KeyValue{semconv.MessagingSystemAWSSQS, semconv.MessagingOperationTypeProcess, semconv.MessagingOperationName("process")}
	if queue != "" {
		attrs = append(attrs, semconv.MessagingDestinationName(queue))
	}
	if id != "" {
		attrs = append(attrs, semconv.MessagingMessageID(id))
	}
	return attrs
}
