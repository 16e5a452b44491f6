package infra

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// The account and region of the ARNs moto gives its resources, and so
// of the expanded template.
const (
	testAccount = "123456789012"
	testRegion  = "us-east-1"
)

// awsCall is one request a function's code sent to AWS: its IAM action
// ("dynamodb:GetItem") and the ARN of the resource it acts on.
type awsCall struct {
	Function, Action, Resource string
}

// callRecorder is a reverse proxy in front of moto that records, for
// every request, which function sent it (the access key id: each
// function's clients sign with its logical id), its action and its
// resources. Requests signed with another key (the test's own set-up and
// checks) pass through unrecorded. The functions' code is not changed:
// only their aws.Config (endpoint and credentials) differs from
// production's.
type callRecorder struct {
	proxy *httputil.ReverseProxy
	// lambda, when set, serves the Lambda requests (moto runs no
	// function: a lambdatest stand-in does).
	lambda http.Handler
	known  map[string]bool // access key ids recorded

	mu    sync.Mutex
	calls map[awsCall]int
	bad   []string // requests the recorder could not attribute
}

func newCallRecorder(t *testing.T, target string, functions []string) *callRecorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	r := &callRecorder{proxy: httputil.NewSingleHostReverseProxy(u), known: map[string]bool{}, calls: map[awsCall]int{}}
	// Requests cancelled when the test stops its pollers are not errors.
	r.proxy.ErrorLog = log.New(io.Discard, "", 0)
	for _, fn := range functions {
		r.known[fn] = true
	}
	return r
}

// credential matches a SigV4 Authorization header's key id and service.
var credential = regexp.MustCompile(`Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/aws4_request`)

func (r *callRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	if m := credential.FindStringSubmatch(req.Header.Get("Authorization")); m != nil && r.known[m[1]] {
		calls, err := parseCall(m[1], m[2], req, body)
		r.mu.Lock()
		if err != nil {
			r.bad = append(r.bad, fmt.Sprintf("%s: %v", m[1], err))
		}
		for _, c := range calls {
			r.calls[c]++
		}
		r.mu.Unlock()
	}
	if m := credential.FindStringSubmatch(req.Header.Get("Authorization")); m != nil && m[2] == "lambda" && r.lambda != nil {
		r.lambda.ServeHTTP(w, req)
		return
	}
	r.proxy.ServeHTTP(w, req)
}

// snapshot returns the calls recorded so far, sorted.
func (r *callRecorder) snapshot() []awsCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]awsCall, 0, len(r.calls))
	for c := range r.calls {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b awsCall) int {
		return strings.Compare(a.Function+a.Action+a.Resource, b.Function+b.Action+b.Resource)
	})
	return out
}

// parseCall reads the action and resources of a DynamoDB, SQS or
// EventBridge Scheduler request (the JSON protocols of aws-sdk-go-v2, SQS's
// query protocol, the scheduler's REST JSON).
func parseCall(fn, service string, req *http.Request, body []byte) ([]awsCall, error) {
	op := ""
	if target := req.Header.Get("X-Amz-Target"); target != "" {
		_, op, _ = strings.Cut(target, ".")
	}
	var in map[string]json.RawMessage
	if len(body) > 0 && op != "" {
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, fmt.Errorf("%s %s: body: %w", service, op, err)
		}
	}
	str := func(k string) string {
		var s string
		_ = json.Unmarshal(in[k], &s)
		return s
	}
	if service == "lambda" { // REST JSON: Invoke is the only call made
		const prefix, suffix = "/2015-03-31/functions/", "/invocations"
		p := req.URL.EscapedPath()
		if req.Method != http.MethodPost || !strings.HasPrefix(p, prefix) || !strings.HasSuffix(p, suffix) {
			return nil, fmt.Errorf("lambda %s %s: not Invoke", req.Method, p)
		}
		target, err := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(p, prefix), suffix))
		if err != nil || !strings.HasPrefix(target, "arn:") {
			return nil, fmt.Errorf("lambda Invoke of %q: the functions invoke by ARN", target)
		}
		if q := req.URL.Query().Get("Qualifier"); q != "" {
			target += ":" + q
		}
		return []awsCall{{fn, "lambda:InvokeFunction", target}}, nil
	}
	if service == "scheduler" { // REST JSON: the operation is the method and path
		if len(body) > 0 {
			if err := json.Unmarshal(body, &in); err != nil {
				return nil, fmt.Errorf("scheduler %s %s: body: %w", req.Method, req.URL.Path, err)
			}
		}
		return schedulerCall(fn, req, in)
	}
	if op == "" { // SQS query protocol
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, fmt.Errorf("%s: form: %w", service, err)
		}
		op = form.Get("Action")
		in = map[string]json.RawMessage{}
		if q := form.Get("QueueUrl"); q != "" {
			b, _ := json.Marshal(q)
			in["QueueUrl"] = b
		}
	}
	if op == "" {
		return nil, fmt.Errorf("%s: no operation in the request", service)
	}
	tableARN := func(name string) string {
		return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", testRegion, testAccount, name)
	}
	call := func(action, res string) awsCall { return awsCall{fn, action, res} }
	switch service {
	case "dynamodb":
		switch op {
		case "BatchGetItem", "BatchWriteItem":
			var items map[string]json.RawMessage
			if err := json.Unmarshal(in["RequestItems"], &items); err != nil || len(items) == 0 {
				return nil, fmt.Errorf("dynamodb %s: no RequestItems", op)
			}
			var out []awsCall
			for name := range items {
				out = append(out, call("dynamodb:"+op, tableARN(name)))
			}
			return out, nil
		case "TransactWriteItems", "TransactGetItems":
			// IAM authorizes each item's own action.
			var items []map[string]struct{ TableName string }
			if err := json.Unmarshal(in["TransactItems"], &items); err != nil || len(items) == 0 {
				return nil, fmt.Errorf("dynamodb %s: no TransactItems", op)
			}
			kinds := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
			var out []awsCall
			for _, it := range items {
				for k, v := range it {
					out = append(out, call("dynamodb:"+kinds[k], tableARN(v.TableName)))
				}
			}
			return out, nil
		}
		name := str("TableName")
		if name == "" {
			return nil, fmt.Errorf("dynamodb %s: no TableName", op)
		}
		res := tableARN(name)
		if idx := str("IndexName"); idx != "" {
			res += "/index/" + idx
		}
		return []awsCall{call("dynamodb:"+op, res)}, nil
	case "sqs":
		q := str("QueueUrl")
		if q == "" {
			return nil, fmt.Errorf("sqs %s: no QueueUrl", op)
		}
		return []awsCall{call("sqs:"+op, fmt.Sprintf("arn:aws:sqs:%s:%s:%s", testRegion, testAccount, path.Base(q)))}, nil
	}
	return nil, fmt.Errorf("service %s (%s) is not one this check knows", service, op)
}

// functionConfig is base for function fn's clients: through the recorder,
// signed with fn as the access key id.
func functionConfig(base aws.Config, recorderURL, fn string) aws.Config {
	c := base.Copy()
	c.BaseEndpoint = aws.String(recorderURL)
	c.Credentials = credentials.NewStaticCredentialsProvider(fn, "secret", "")
	return c
}

// startRecorder serves r on a local listener and returns its URL.
func startRecorder(t *testing.T, r *callRecorder) string {
	t.Helper()
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}

// schedulerCall reads the action and resource of an EventBridge Scheduler
// request (REST JSON: the method and path say the operation). Creating or
// updating a schedule also passes its target's role (iam:PassRole, which
// IAM checks on the caller).
func schedulerCall(fn string, req *http.Request, in map[string]json.RawMessage) ([]awsCall, error) {
	name, hasName := strings.CutPrefix(req.URL.Path, "/schedules/")
	if !hasName && req.URL.Path != "/schedules" {
		return nil, fmt.Errorf("scheduler %s %s: not a schedule request this check knows", req.Method, req.URL.Path)
	}
	if !hasName {
		if req.Method != http.MethodGet {
			return nil, fmt.Errorf("scheduler %s /schedules: not ListSchedules", req.Method)
		}
		return []awsCall{{fn, "scheduler:ListSchedules", "*"}}, nil
	}
	var group string
	_ = json.Unmarshal(in["GroupName"], &group)
	if group == "" {
		group = req.URL.Query().Get("groupName")
	}
	if group == "" {
		group = "default"
	}
	ops := map[string]string{http.MethodPost: "CreateSchedule", http.MethodGet: "GetSchedule", http.MethodPut: "UpdateSchedule", http.MethodDelete: "DeleteSchedule"}
	op, ok := ops[req.Method]
	if !ok {
		return nil, fmt.Errorf("scheduler %s %s: unknown operation", req.Method, req.URL.Path)
	}
	out := []awsCall{{fn, "scheduler:" + op, fmt.Sprintf("arn:aws:scheduler:%s:%s:schedule/%s/%s", testRegion, testAccount, group, name)}}
	var target struct{ RoleArn string }
	if err := json.Unmarshal(in["Target"], &target); err == nil && target.RoleArn != "" {
		out = append(out, awsCall{fn, "iam:PassRole", target.RoleArn})
	}
	return out, nil
}
