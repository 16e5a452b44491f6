package serverless

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/superstep/superstep/pkg/internal/sqsqueue"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// Resources says what [Provision] creates.
type Resources struct {
	// Prefix names everything (default "superstep"): the table <prefix>,
	// the queues <prefix>-ticks.fifo, <prefix>-nodes and <prefix>-starts,
	// each with a dead-letter queue (<name>-dlq).
	Prefix string
	// VisibilityTimeout of the queues (default 60 s). The Config's Lease
	// is set to half of it.
	VisibilityTimeout time.Duration
	// MaxReceiveCount is how many times a message is received before it
	// goes to its dead-letter queue (default 5).
	MaxReceiveCount int
	// Schedules creates the EventBridge Scheduler schedule group <prefix>
	// and turns schedules on (Config.ScheduleGroup), firing into the start
	// queue with the role <prefix>-scheduler (which an emulator does not
	// check).
	Schedules bool
}

// Provision creates the table and queues of a deployment, for tests and
// local development against an emulator (deployments declare them in
// infra/template.yaml), and returns the Config that uses them. It is
// idempotent: what exists is reused.
func Provision(ctx context.Context, awsCfg aws.Config, r Resources) (Config, error) {
	if r.Prefix == "" {
		r.Prefix = "superstep"
	}
	if r.VisibilityTimeout <= 0 {
		r.VisibilityTimeout = time.Minute
	}
	if r.MaxReceiveCount <= 0 {
		r.MaxReceiveCount = 5
	}
	if err := dynamo.CreateTable(ctx, dynamodb.NewFromConfig(awsCfg), r.Prefix); err != nil {
		return Config{}, fmt.Errorf("serverless: %w", err)
	}
	client := sqs.NewFromConfig(awsCfg)
	queue := func(name string, fifo bool) (string, error) {
		q, err := sqsqueue.CreateQueue(ctx, client, sqsqueue.Spec{Name: r.Prefix + "-" + name, FIFO: fifo, VisibilityTimeout: r.VisibilityTimeout, MaxReceiveCount: r.MaxReceiveCount})
		if err != nil {
			return "", fmt.Errorf("serverless: %w", err)
		}
		return q.URL, nil
	}
	var c Config
	var err error
	c.Table = r.Prefix
	if c.TickQueueURL, err = queue("ticks", true); err != nil {
		return Config{}, err
	}
	if c.NodeQueueURL, err = queue("nodes", false); err != nil {
		return Config{}, err
	}
	if c.StartQueueURL, err = queue("starts", false); err != nil {
		return Config{}, err
	}
	c.Lease = r.VisibilityTimeout / 2
	if r.Schedules {
		attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(c.StartQueueURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return Config{}, fmt.Errorf("serverless: start queue's ARN: %w", err)
		}
		c.StartQueueARN = attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
		parts := strings.Split(c.StartQueueARN, ":") // arn:aws:sqs:region:account:name
		if len(parts) != 6 {
			return Config{}, fmt.Errorf("serverless: start queue's ARN %q", c.StartQueueARN)
		}
		_, err = scheduler.NewFromConfig(awsCfg).CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(r.Prefix)})
		var conflict *schedtypes.ConflictException
		if err != nil && !errors.As(err, &conflict) {
			return Config{}, fmt.Errorf("serverless: schedule group: %w", err)
		}
		c.ScheduleGroup = r.Prefix
		c.SchedulerRoleARN = "arn:" + parts[1] + ":iam::" + parts[4] + ":role/" + r.Prefix + "-scheduler"
	}
	return c, nil
}

// PollOptions tunes the pollers of [App.Pollers].
type PollOptions struct {
	// WaitTime is the long-poll wait of each receive (at most 20 s);
	// zero short-polls, pausing IdleDelay after an empty receive.
	WaitTime time.Duration
	// IdleDelay: see [sqsqueue.Poller.IdleDelay].
	IdleDelay time.Duration
	// Concurrency of the tick, node and start pollers (default 4, 4, 1).
	TickConcurrency, NodeConcurrency, StartConcurrency int
	// StopGrace: see [sqsqueue.Poller.StopGrace].
	StopGrace time.Duration
	// Timeout bounds each handler call, like a function's timeout (zero:
	// none).
	Timeout time.Duration
}

// Pollers stand in for the event source mappings of the three functions:
// each calls the function's own handler.
type Pollers struct {
	// Tick polls the tick queue for HandleTick, Node the node queue for
	// HandleNode, Start (nil without a start queue) the start queue for
	// HandleAPI.
	Tick, Node, Start *sqsqueue.Poller
}

// Pollers returns pollers of the App's queues that call its handlers. The
// start queue's messages go through [App.HandleAPI], as JSON, the way the
// api function receives them.
func (a *App) Pollers(o PollOptions) *Pollers {
	mk := func(url string, conc int, h sqsqueue.Handler) *sqsqueue.Poller {
		return &sqsqueue.Poller{
			Client:      a.SQS,
			QueueURL:    url,
			Handler:     h,
			Concurrency: conc,
			WaitTime:    o.WaitTime,
			IdleDelay:   o.IdleDelay,
			Timeout:     o.Timeout,
			StopGrace:   o.StopGrace,
			Logger:      a.Logger,
		}
	}
	p := &Pollers{
		Tick: mk(a.Config.TickQueueURL, defaultInt(o.TickConcurrency, 4), a.HandleTick),
		Node: mk(a.Config.NodeQueueURL, defaultInt(o.NodeConcurrency, 4), a.HandleNode),
	}
	if a.Config.StartQueueURL != "" {
		p.Start = mk(a.Config.StartQueueURL, defaultInt(o.StartConcurrency, 1), a.startViaAPI)
	}
	return p
}

func defaultInt(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// startViaAPI hands an SQS event to HandleAPI as the JSON Lambda would
// send the api function.
func (a *App) startViaAPI(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	raw, err := json.Marshal(ev)
	if err != nil {
		return events.SQSEventResponse{}, err
	}
	out, err := a.HandleAPI(ctx, raw)
	if err != nil {
		return events.SQSEventResponse{}, err
	}
	resp, ok := out.(events.SQSEventResponse)
	if !ok {
		return events.SQSEventResponse{}, fmt.Errorf("serverless: HandleAPI answered an SQS event with %T", out)
	}
	return resp, nil
}

// Run runs the pollers until ctx is done. If one cannot start (its queue
// is missing, say), the others are stopped and its error returned.
func (p *Pollers) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, poller := range []*sqsqueue.Poller{p.Tick, p.Node, p.Start} {
		if poller == nil {
			continue
		}
		wg.Go(func() {
			if err := poller.Run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
