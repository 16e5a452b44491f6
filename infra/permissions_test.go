package infra

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The packages whose AWS calls the deployed functions make, and their
// files that run only in `superstep dev --aws` (creating the table and
// queues, and polling in place of the event source mappings).
var (
	awsCallers = []string{"../pkg/store/dynamo", "../pkg/sqsqueue", "../pkg/serverless", "../pkg/tick", "../pkg/runs"}
	localOnly  = []string{"../pkg/store/dynamo/schema.go", "../pkg/sqsqueue/create.go", "../pkg/sqsqueue/poller.go", "../pkg/serverless/local.go"}
)

// eventSourceNeeds are the actions Lambda's event source mappings take
// with the function's role (the Lambda developer guide's execution role
// permissions for SQS and DynamoDB Streams), not the function's code.
var eventSourceNeeds = []string{
	"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
	"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams",
}

// sdkOperations maps each operation name of the DynamoDB and SQS clients
// to its IAM action ("dynamodb:GetItem").
func sdkOperations() map[string]string {
	ops := map[string]string{}
	for prefix, client := range map[string]any{"dynamodb": &dynamodb.Client{}, "sqs": &sqs.Client{}} {
		typ := reflect.TypeOf(client)
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			// An operation takes (ctx, *XInput, ...optFns).
			if m.Type.NumIn() == 4 && m.Type.In(2).String() == "*"+prefix+"."+m.Name+"Input" {
				ops[m.Name] = prefix + ":" + m.Name
			}
		}
	}
	return ops
}

// calledActions scans the non-test Go files of awsCallers (but localOnly)
// for calls of DynamoDB and SQS client operations and returns their IAM
// actions, with where each is called.
func calledActions(t *testing.T) map[string][]string {
	t.Helper()
	ops := sdkOperations()
	if ops["GetItem"] != "dynamodb:GetItem" || ops["SendMessage"] != "sqs:SendMessage" {
		t.Fatalf("reading the SDK's operations failed: %v", ops)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, dir := range awsCallers {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") || slices.Contains(localOnly, f) {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			file, err := parser.ParseFile(fset, f, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) < 2 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				// The second argument is the operation's input:
				// &dynamodb.GetItemInput{...} or a variable of that type.
				if action, ok := ops[sel.Sel.Name]; ok {
					out[action] = append(out[action], fset.Position(call.Pos()).String())
				}
				return true
			})
		}
	}
	for _, f := range localOnly {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("localOnly names %s: %v", f, err)
		}
	}
	return out
}

// TestPermissionsMatchCalls: the roles grant exactly the DynamoDB and SQS
// actions the functions' code calls plus those their event source
// mappings need: nothing left over (least privilege), nothing missing (an
// AccessDenied in AWS that no emulator shows).
func TestPermissionsMatchCalls(t *testing.T) {
	called := calledActions(t)
	want := slices.Concat(eventSourceNeeds, slices.Collect(func(yield func(string) bool) {
		for a := range called {
			if !yield(a) {
				return
			}
		}
	}))
	slices.Sort(want)
	want = slices.Compact(want)

	tp := loadTemplate(t)
	var granted []string
	for _, fn := range functions {
		for _, s := range roleStatements(t, tp, fn) {
			for _, a := range strs(s["Action"]) {
				if strings.HasPrefix(a, "dynamodb:") || strings.HasPrefix(a, "sqs:") {
					granted = append(granted, a)
				}
			}
		}
	}
	slices.Sort(granted)
	granted = slices.Compact(granted)
	for _, a := range granted {
		if !slices.Contains(want, a) {
			t.Errorf("the roles grant %s, which no code calls and no event source mapping needs: remove it", a)
		}
	}
	for _, a := range want {
		if !slices.Contains(granted, a) {
			t.Errorf("%s is called (%v) but no role grants it", a, called[a])
		}
	}
	if t.Failed() {
		t.Logf("code calls %v", called)
	}
}

// TestConcurrencyParameters: tick and node have a reserved-concurrency
// parameter (empty by default: reserving takes from the account's pool)
// and their queues' event source mappings a maximum concurrency with a
// default, so that a burst of runs leaves the api function room.
func TestConcurrencyParameters(t *testing.T) {
	tp := loadTemplate(t)
	params := asMap(tp["Parameters"])
	for _, tc := range []struct {
		fn, event, reserved, maximum string
		wantMax                      int
	}{
		{"TickFunction", "Ticks", "TickReservedConcurrency", "TickMaximumConcurrency", 20},
		{"NodeFunction", "Tasks", "NodeReservedConcurrency", "NodeMaximumConcurrency", 50},
	} {
		fn := tp.resource(t, tc.fn, "AWS::Serverless::Function")
		rp := asMap(params[tc.reserved])
		if rp == nil || rp["Default"] != "" {
			t.Errorf("parameter %s: %v, want one defaulting to empty (no reservation)", tc.reserved, rp)
		}
		rce := fn.Properties["ReservedConcurrentExecutions"]
		if s := strings.Join(strs(rce), " "); !strings.Contains(s, tc.reserved) {
			t.Errorf("%s.ReservedConcurrentExecutions = %v, want it from %s", tc.fn, rce, tc.reserved)
		}
		mp := asMap(params[tc.maximum])
		if d, ok := asInt(mp["Default"]); !ok || d != tc.wantMax {
			t.Errorf("parameter %s default %v, want %d", tc.maximum, mp["Default"], tc.wantMax)
		}
		if lo, _ := asInt(mp["MinValue"]); lo != 2 {
			t.Errorf("parameter %s MinValue %v, want 2 (Lambda's lowest maximum concurrency)", tc.maximum, mp["MinValue"])
		}
		ev := asMap(asMap(asMap(fn.Properties["Events"])[tc.event])["Properties"])
		mc := asMap(ev["ScalingConfig"])["MaximumConcurrency"]
		if id, _, ok := refTarget(mc); !ok || id != tc.maximum {
			t.Errorf("%s event %s ScalingConfig.MaximumConcurrency = %v, want !Ref %s", tc.fn, tc.event, mc, tc.maximum)
		}
	}
}
