package infra

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/superstep/superstep/internal/lambdatest"
	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
)

// TestPermissionsInvokeDispatch is TestPermissionsPerFunction for
// NodeDispatch=invoke: the tick function starts node tasks by invoking
// NodeFunction's alias, the node function that commits an all-remote step
// invokes itself for the next one, and Lambda sends an invocation that
// failed every attempt to the on-failure destination with the node
// function's role (a lambdatest stand-in runs the invocations). Every call
// of the api, tick and node functions is checked against its role in the
// template expanded with the InvokeNodes condition true; the statements
// only this dispatch uses must be used.
func TestPermissionsInvokeDispatch(t *testing.T) {
	srv := mototest.Start(t)
	tp := loadTemplate(t)
	fns := []string{"ApiFunction", "TickFunction", "NodeFunction"}
	rec := newCallRecorder(t, srv.URL, fns)
	recURL := startRecorder(t, rec)
	const prefix = "iam-invoke"
	cfg, err := serverless.Provision(t.Context(), srv.Config, serverless.Resources{Prefix: prefix, VisibilityTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg.NodeDispatch = serverless.DispatchInvoke
	reg, err := runs.NewRegistry(twoRemoteGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	apps := map[string]*serverless.App{}
	for _, fn := range fns {
		c := cfg
		if fn == "TickFunction" { // NODE_FUNCTION; the node function invokes itself as invoked
			c.NodeFunction = FunctionAliasARN(prefix, "NodeFunction")
		}
		app, err := serverless.New(serverless.Options{Config: c, AWS: functionConfig(srv.Config, recURL, fn), Graphs: reg,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		apps[fn] = app
	}
	// Lambda: NodeFunction's asynchronous invocations, and its on-failure
	// destination, written to with the function's role.
	asNode := sqs.NewFromConfig(functionConfig(srv.Config, recURL, "NodeFunction"))
	dlq, err := sqs.NewFromConfig(srv.Config).GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String(prefix + "-nodes-dlq")})
	if err != nil {
		t.Fatal(err)
	}
	lam := lambdatest.Start(t, map[string]*lambdatest.Function{prefix + "-NodeFunction": {
		Handler: func(ctx context.Context, payload []byte) error {
			_, err := apps["NodeFunction"].HandleNodeEvent(ctx, payload)
			return err
		},
		RetryDelay: 50 * time.Millisecond,
		OnFailure: func(ctx context.Context, record []byte) error {
			_, err := asNode.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: dlq.QueueUrl, MessageBody: aws.String(string(record))})
			return err
		},
	}}, lambdatest.Faults{})
	rec.lambda = lam
	po := serverless.PollOptions{TickConcurrency: 2, NodeConcurrency: 2, IdleDelay: 50 * time.Millisecond, Timeout: 30 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	pollDone := make(chan struct{}, 2)
	for _, p := range []interface{ Run(context.Context) error }{apps["TickFunction"].Pollers(po).Tick, apps["NodeFunction"].Pollers(po).Node} {
		go func() {
			if err := p.Run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("poller: %v", err)
			}
			pollDone <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range 2 {
			<-pollDone
		}
	})
	apiURL := serve(t, apps["ApiFunction"])
	call(t, apiURL, "POST", "/v1/graphs/two-remote/runs", map[string]any{"run_id": "pipe-1"}, 202)
	waitRun(t, apiURL, "pipe-1", pregel.RunCompleted)
	// A task event that can never run: Lambda gives up on it.
	client := lambda.NewFromConfig(srv.Config, func(o *lambda.Options) { o.BaseEndpoint = aws.String(lam.URL) })
	if _, err := client.Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String(FunctionAliasARN(prefix, "NodeFunction")),
		InvocationType: lambdatypes.InvocationTypeEvent, Payload: []byte(`{"run_id":"pipe-1","step":0,"task_id":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for lam.Stats().Failed == 0 || !lam.Idle() {
		if time.Now().After(deadline) {
			t.Fatalf("the bad event did not reach the on-failure destination within 20s: %+v", lam.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()

	d := newDeployment(t, tp, prefix, srv.URL)
	d.conditions["InvokeNodes"] = true
	calls := rec.snapshot()
	used := map[[2]string]bool{} // function, Sid
	for _, fn := range fns {
		grants := roleGrantsOf(t, tp, d, fn)
		for _, c := range calls {
			if c.Function != fn {
				continue
			}
			if !allowed(grants, c.Action, c.Resource) {
				t.Errorf("%s calls %s on %s, which its role does not allow with NodeDispatch=invoke", fn, c.Action, c.Resource)
			}
			for _, g := range grants {
				if g.matches(c.Action, c.Resource) {
					used[[2]string{fn, g.Sid}] = true
				}
			}
			if fn == "TickFunction" && c.Action == "sqs:SendMessage" && strings.HasSuffix(c.Resource, prefix+"-nodes") {
				t.Errorf("the tick function sent a node task to the node-task queue with NodeDispatch=invoke")
			}
		}
	}
	for _, u := range [][2]string{{"TickFunction", "InvokeNodeFunction"}, {"NodeFunction", "InvokeNodeFunction"}, {"NodeFunction", "FailedTaskInvocations"}} {
		if !used[u] {
			t.Errorf("%s: statement %s is not used with NodeDispatch=invoke", u[0], u[1])
		}
	}
	// Without the condition (NodeDispatch=sqs, the default), no role may
	// invoke the node function.
	d.conditions["InvokeNodes"] = false
	for _, fn := range functions {
		if allowed(roleGrantsOf(t, tp, d, fn), "lambda:InvokeFunction", FunctionAliasARN(prefix, "NodeFunction")) {
			t.Errorf("%s may invoke the node function with NodeDispatch=sqs", fn)
		}
	}
	if t.Failed() {
		for _, c := range calls {
			t.Logf("recorded: %s %s %s", c.Function, c.Action, c.Resource)
		}
	}
}
