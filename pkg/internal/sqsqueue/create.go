package sqsqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Spec describes a queue for [CreateQueue].
type Spec struct {
	// Name of the queue. A FIFO queue's name ends in ".fifo"; CreateQueue
	// adds it when FIFO is set and it is missing.
	Name string
	// FIFO makes a FIFO queue (without content-based deduplication: the
	// sender gives deduplication ids).
	FIFO bool
	// VisibilityTimeout of the queue (whole seconds; default 30 s).
	VisibilityTimeout time.Duration
	// MaxReceiveCount, when positive, gives the queue a dead-letter queue
	// (named after it, "-dlq" before any ".fifo") that takes a message
	// received this many times without being deleted.
	MaxReceiveCount int
}

// Created is what [CreateQueue] made.
type Created struct {
	// URL and ARN identify the queue.
	URL, ARN string
	// DLQURL and DLQARN are empty without a dead-letter queue.
	DLQURL, DLQARN string
}

// CreateQueue creates the queue of spec (and its dead-letter queue), for
// tests and local development; deployments declare their queues in
// infra/template.yaml. Creating a queue that exists with the same
// attributes returns it.
func CreateQueue(ctx context.Context, client *sqs.Client, spec Spec) (Created, error) {
	name := spec.Name
	if spec.FIFO && !strings.HasSuffix(name, ".fifo") {
		name += ".fifo"
	}
	vis := spec.VisibilityTimeout
	if vis <= 0 {
		vis = 30 * time.Second
	}
	attrs := map[string]string{
		string(types.QueueAttributeNameVisibilityTimeout): strconv.Itoa(int(max(vis/time.Second, 1))),
	}
	if spec.FIFO {
		attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
	}
	var out Created
	if spec.MaxReceiveCount > 0 {
		dlqName := strings.TrimSuffix(name, ".fifo") + "-dlq"
		dlqAttrs := map[string]string{
			// Keep dead letters for the longest SQS allows: 14 days.
			string(types.QueueAttributeNameMessageRetentionPeriod): "1209600",
		}
		if spec.FIFO {
			dlqName += ".fifo"
			dlqAttrs[string(types.QueueAttributeNameFifoQueue)] = "true"
		}
		dlq, err := create(ctx, client, dlqName, dlqAttrs)
		if err != nil {
			return Created{}, err
		}
		out.DLQURL, out.DLQARN = dlq.URL, dlq.ARN
		policy, err := json.Marshal(map[string]any{"deadLetterTargetArn": dlq.ARN, "maxReceiveCount": spec.MaxReceiveCount})
		if err != nil {
			return Created{}, err
		}
		attrs[string(types.QueueAttributeNameRedrivePolicy)] = string(policy)
	}
	q, err := create(ctx, client, name, attrs)
	if err != nil {
		return Created{}, err
	}
	out.URL, out.ARN = q.URL, q.ARN
	return out, nil
}

func create(ctx context.Context, client *sqs.Client, name string, attrs map[string]string) (Created, error) {
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return Created{}, fmt.Errorf("sqsqueue: create queue %s: %w", name, err)
	}
	url := aws.ToString(out.QueueUrl)
	got, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       out.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return Created{}, fmt.Errorf("sqsqueue: read queue %s: %w", name, err)
	}
	return Created{URL: url, ARN: got.Attributes[string(types.QueueAttributeNameQueueArn)]}, nil
}
