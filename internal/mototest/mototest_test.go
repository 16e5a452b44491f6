package mototest

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestStartAndStop(t *testing.T) {
	srv := Start(t)
	resp, err := http.Get(srv.URL + "/moto-api/data.json")
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
	// Nothing of the process group is left.
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

// TestSerializedRequests checks a guarantee DynamoDB gives and moto alone
// does not: of concurrent optimistic increments of one item, done with
// conditional TransactWriteItems as the stores do, none is lost. (Without
// the serialization, a cancelled transaction restores the table as it was
// when it began, erasing the increments that won meanwhile.)
func TestSerializedRequests(t *testing.T) {
	ctx := t.Context()
	srv := Start(t)
	client := dynamodb.NewFromConfig(srv.Config)
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("counter"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "c"}}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String("counter"),
		Item:      map[string]types.AttributeValue{"pk": key["pk"], "n": &types.AttributeValueMemberN{Value: "0"}},
	}); err != nil {
		t.Fatal(err)
	}
	const n = 24
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for range 500 {
				out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("counter"), Key: key, ConsistentRead: aws.Bool(true)})
				if err != nil {
					t.Error(err)
					return
				}
				cur := out.Item["n"].(*types.AttributeValueMemberN).Value
				next, _ := strconv.Atoi(cur)
				_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
					TransactItems: []types.TransactWriteItem{{Update: &types.Update{
						TableName:           aws.String("counter"),
						Key:                 key,
						UpdateExpression:    aws.String("SET n = :next"),
						ConditionExpression: aws.String("n = :cur"),
						ExpressionAttributeValues: map[string]types.AttributeValue{
							":cur":  &types.AttributeValueMemberN{Value: cur},
							":next": &types.AttributeValueMemberN{Value: strconv.Itoa(next + 1)},
						},
					}}},
				})
				var tce *types.TransactionCanceledException
				if errors.As(err, &tce) {
					continue
				}
				if err != nil {
					t.Error(err)
				}
				return
			}
			t.Error("no progress after 500 attempts")
		})
	}
	wg.Wait()
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("counter"), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Item["n"].(*types.AttributeValueMemberN).Value; got != strconv.Itoa(n) {
		t.Errorf("counter = %s after %d optimistic increments, want %d", got, n, n)
	}
}

func TestMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, tt := range []struct {
		ci                 string
		wantSkip, wantFail bool
	}{
		{"", true, false},
		{"false", true, false},
		{"true", false, true},
		{"1", false, true},
	} {
		t.Run(fmt.Sprintf("CI=%q", tt.ci), func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			for name, start := range map[string]func(testing.TB){
				"Start":        func(tb testing.TB) { Start(tb) },
				"Shared.Start": func(tb testing.TB) { new(Shared).Start(tb) },
			} {
				ft := run(start)
				if ft.skipped != tt.wantSkip || ft.failed != tt.wantFail {
					t.Errorf("%s: skipped %t, failed %t; want %t, %t (%s)", name, ft.skipped, ft.failed, tt.wantSkip, tt.wantFail, ft.msg)
				}
				if want := "pip install 'moto[server]'"; !strings.Contains(ft.msg, want) {
					t.Errorf("%s: message %q does not say %s", name, ft.msg, want)
				}
			}
		})
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
