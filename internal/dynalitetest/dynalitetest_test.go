package dynalitetest

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

func TestStartAndStop(t *testing.T) {
	srv := Start(t)
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if aws.ToString(srv.Config.BaseEndpoint) != srv.URL || srv.Config.Region != Region {
		t.Errorf("Config: endpoint %q region %q, want %q %q", aws.ToString(srv.Config.BaseEndpoint), srv.Config.Region, srv.URL, Region)
	}
	pid := srv.cmd.Process.Pid
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d after Stop: kill(0) = %v, want ESRCH", pid, err)
	}
	if _, err := http.Get(srv.URL); err == nil {
		t.Error("server still answers after Stop")
	}
}

func TestShared(t *testing.T) {
	var sh Shared
	a := sh.Start(t)
	b := sh.Start(t)
	if a != b {
		t.Error("Shared.Start started a second server")
	}
	pid := a.cmd.Process.Pid
	if err := sh.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d after Close: kill(0) = %v, want ESRCH", pid, err)
	}
	ft := run(func(tb testing.TB) { sh.Start(tb) })
	if !ft.failed {
		t.Error("Start after Close did not fail the test")
	}
}

// createTable makes a table with a string hash and range key.
func createTable(t *testing.T, client *dynamodb.Client, name string) {
	t.Helper()
	_, err := client.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRoute checks that a routed configuration sends DynamoDB's requests
// to dynalite and another service's to the base endpoint.
func TestRoute(t *testing.T) {
	srv := Start(t)
	var other atomic.Int32
	base := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		fmt.Fprint(w, `{"QueueUrls": []}`)
	}))
	defer base.Close()
	baseCfg := srv.Config.Copy()
	baseCfg.BaseEndpoint = aws.String(base.URL)

	cfg := srv.Route(baseCfg)
	if len(baseCfg.ConfigSources) != 0 {
		t.Error("Route changed its argument's configuration sources")
	}
	createTable(t, dynamodb.NewFromConfig(cfg), "routed")
	if n := other.Load(); n != 0 {
		t.Errorf("the base endpoint got %d requests of DynamoDB's, want 0", n)
	}
	out, err := dynamodb.NewFromConfig(srv.Config).ListTables(t.Context(), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.TableNames) != 1 || out.TableNames[0] != "routed" {
		t.Errorf("dynalite has tables %v, want [routed]", out.TableNames)
	}
	if _, err := sqs.NewFromConfig(cfg).ListQueues(t.Context(), &sqs.ListQueuesInput{}); err != nil {
		t.Fatal(err)
	}
	if n := other.Load(); n != 1 {
		t.Errorf("the base endpoint got %d SQS requests, want 1", n)
	}
}

// TestTimeToLive checks serve.js's UpdateTimeToLive and
// DescribeTimeToLive, which dynalite lacks, against DynamoDB's documented
// answers.
func TestTimeToLive(t *testing.T) {
	srv := Start(t)
	ctx := t.Context()
	client := dynamodb.NewFromConfig(srv.Config)
	createTable(t, client, "ttl")
	describe := func() *types.TimeToLiveDescription {
		t.Helper()
		out, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("ttl")})
		if err != nil {
			t.Fatal(err)
		}
		return out.TimeToLiveDescription
	}
	update := func(table string, enabled bool) error {
		out, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(table),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(enabled)},
		})
		if err == nil && (aws.ToString(out.TimeToLiveSpecification.AttributeName) != "exp" || aws.ToBool(out.TimeToLiveSpecification.Enabled) != enabled) {
			t.Errorf("UpdateTimeToLive answered %+v", out.TimeToLiveSpecification)
		}
		return err
	}
	if d := describe(); d.TimeToLiveStatus != types.TimeToLiveStatusDisabled {
		t.Errorf("a new table's TTL is %s, want DISABLED", d.TimeToLiveStatus)
	}
	if err := update("ttl", true); err != nil {
		t.Fatal(err)
	}
	if d := describe(); d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "exp" {
		t.Errorf("after enabling, TTL is %s on %q, want ENABLED on exp", d.TimeToLiveStatus, aws.ToString(d.AttributeName))
	}
	var invalid interface{ ErrorCode() string }
	if err := update("ttl", true); !errors.As(err, &invalid) || invalid.ErrorCode() != "ValidationException" {
		t.Errorf("enabling TTL twice: %v, want a ValidationException", err)
	}
	if err := update("ttl", false); err != nil {
		t.Fatal(err)
	}
	if d := describe(); d.TimeToLiveStatus != types.TimeToLiveStatusDisabled {
		t.Errorf("after disabling, TTL is %s, want DISABLED", d.TimeToLiveStatus)
	}
	var missing *types.ResourceNotFoundException
	if err := update("no-such-table", true); !errors.As(err, &missing) {
		t.Errorf("UpdateTimeToLive on a missing table: %v, want ResourceNotFoundException", err)
	}
}

// TestReturnValuesOnConditionCheckFailure checks serve.js's addition: a
// write whose condition fails returns the item it found with ALL_OLD, as
// DynamoDB does, and nothing otherwise.
func TestReturnValuesOnConditionCheckFailure(t *testing.T) {
	srv := Start(t)
	ctx := t.Context()
	client := dynamodb.NewFromConfig(srv.Config)
	createTable(t, client, "cond")
	key := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "a"},
		"sk": &types.AttributeValueMemberS{Value: "b"},
	}
	stored := map[string]types.AttributeValue{"pk": key["pk"], "sk": key["sk"], "v": &types.AttributeValueMemberN{Value: "1"}}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cond"), Item: stored}); err != nil {
		t.Fatal(err)
	}
	cond := aws.String("v = :want")
	values := map[string]types.AttributeValue{":want": &types.AttributeValueMemberN{Value: "2"}}
	writes := map[string]func(types.ReturnValuesOnConditionCheckFailure) error{
		"PutItem": func(rv types.ReturnValuesOnConditionCheckFailure) error {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cond"), Item: key,
				ConditionExpression: cond, ExpressionAttributeValues: values, ReturnValuesOnConditionCheckFailure: rv})
			return err
		},
		"UpdateItem": func(rv types.ReturnValuesOnConditionCheckFailure) error {
			_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("cond"), Key: key,
				UpdateExpression: aws.String("SET w = :want"), ConditionExpression: cond, ExpressionAttributeValues: values,
				ReturnValuesOnConditionCheckFailure: rv})
			return err
		},
		"DeleteItem": func(rv types.ReturnValuesOnConditionCheckFailure) error {
			_, err := client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("cond"), Key: key,
				ConditionExpression: cond, ExpressionAttributeValues: values, ReturnValuesOnConditionCheckFailure: rv})
			return err
		},
	}
	for op, write := range writes {
		for _, rv := range []types.ReturnValuesOnConditionCheckFailure{types.ReturnValuesOnConditionCheckFailureAllOld, types.ReturnValuesOnConditionCheckFailureNone, ""} {
			var ccf *types.ConditionalCheckFailedException
			if err := write(rv); !errors.As(err, &ccf) {
				t.Fatalf("%s with a failing condition (%q): %v, want ConditionalCheckFailedException", op, rv, err)
			}
			want := 0
			if rv == types.ReturnValuesOnConditionCheckFailureAllOld {
				want = len(stored)
			}
			if len(ccf.Item) != want {
				t.Errorf("%s (%q): the exception's item has %d attributes, want %d", op, rv, len(ccf.Item), want)
			}
			if want > 0 {
				if v, ok := ccf.Item["v"].(*types.AttributeValueMemberN); !ok || v.Value != "1" {
					t.Errorf("%s (%q): the exception's item is %v, want the stored one", op, rv, ccf.Item)
				}
			}
		}
	}
	// No item, nothing to return.
	var ccf *types.ConditionalCheckFailedException
	_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cond"),
		Item:                                map[string]types.AttributeValue{"pk": key["pk"], "sk": &types.AttributeValueMemberS{Value: "none"}},
		ConditionExpression:                 aws.String("attribute_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	if !errors.As(err, &ccf) || ccf.Item != nil {
		t.Errorf("PutItem on no item with attribute_exists: %v (item %v), want ConditionalCheckFailedException without an item", err, ccf)
	}
	// An unknown value is refused, as DynamoDB refuses it.
	var invalid interface{ ErrorCode() string }
	if err := writes["PutItem"]("SOME_OLD"); !errors.As(err, &invalid) || invalid.ErrorCode() != "ValidationException" {
		t.Errorf("ReturnValuesOnConditionCheckFailure SOME_OLD: %v, want a ValidationException", err)
	}
}

func TestMissing(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  func(t *testing.T)
	}{
		{"no node", func(t *testing.T) { t.Setenv("PATH", t.TempDir()) }},
		{"no dynalite", func(t *testing.T) { t.Setenv(EnvPath, filepath.Join(t.TempDir(), "cli.js")) }},
	} {
		for _, c := range []struct {
			ci                 string
			wantSkip, wantFail bool
		}{
			{"", true, false},
			{"false", true, false},
			{"true", false, true},
			{"1", false, true},
		} {
			t.Run(fmt.Sprintf("%s/CI=%q", tt.name, c.ci), func(t *testing.T) {
				tt.env(t)
				t.Setenv("CI", c.ci)
				if Available() == nil {
					t.Fatal("Available() = nil")
				}
				for name, start := range map[string]func(testing.TB){
					"Start":        func(tb testing.TB) { Start(tb) },
					"Shared.Start": func(tb testing.TB) { new(Shared).Start(tb) },
				} {
					ft := run(start)
					if ft.skipped != c.wantSkip || ft.failed != c.wantFail {
						t.Errorf("%s: skipped %t, failed %t; want %t, %t (%s)", name, ft.skipped, ft.failed, c.wantSkip, c.wantFail, ft.msg)
					}
					if want := "make dynalite"; !strings.Contains(ft.msg, want) {
						t.Errorf("%s: message %q does not say %s", name, ft.msg, want)
					}
				}
			})
		}
	}
}

// fakeTB records how a function ended its test.
type fakeTB struct {
	testing.TB
	failed, skipped bool
	msg             string
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Cleanup(func())        {}
func (f *fakeTB) Fatal(a ...any)        { f.failed, f.msg = true, fmt.Sprint(a...); panic(f) }
func (f *fakeTB) Skip(a ...any)         { f.skipped, f.msg = true, fmt.Sprint(a...); panic(f) }
func (f *fakeTB) Errorf(string, ...any) { f.failed = true }
func (f *fakeTB) Fatalf(format string, a ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, a...)
	panic(f)
}

// run calls fn with a fakeTB and returns it once fn returns or ends the
// test.
func run(fn func(testing.TB)) (ft *fakeTB) {
	ft = &fakeTB{}
	defer func() {
		if r := recover(); r != nil && r != any(ft) {
			panic(r)
		}
	}()
	fn(ft)
	return ft
}
