package infra

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/serverless"
)

// The functions of the deployment, sorted.
var functions = []string{"ApiFunction", "NodeFunction", "StreamFunction", "SweepFunction", "TickFunction"}

// The queue each function fed by SQS consumes. SweepFunction reads the
// table's stream instead (TestSweepStream).
var consumers = map[string]string{
	"ApiFunction":  "StartQueue",
	"TickFunction": "TickQueue",
	"NodeFunction": "NodeQueue",
}

// visibilityFactor: a queue's visibility timeout is at least this many
// times the timeout of the function that consumes it (DESIGN.md section 4).
const visibilityFactor = 6

func TestFunctionsAreArm64ProvidedAL2023(t *testing.T) {
	tp := loadTemplate(t)
	fns := tp.resources("AWS::Serverless::Function")
	var ids []string
	for _, fn := range fns {
		ids = append(ids, fn.ID)
		if got := tp.functionProp(fn, "Runtime"); got != "provided.al2023" {
			t.Errorf("%s: Runtime %v, want provided.al2023", fn.ID, got)
		}
		if got := asList(tp.functionProp(fn, "Architectures")); !reflect.DeepEqual(got, []any{"arm64"}) {
			t.Errorf("%s: Architectures %v, want [arm64]", fn.ID, got)
		}
		if got := tp.functionProp(fn, "Handler"); got != "bootstrap" {
			t.Errorf("%s: Handler %v, want bootstrap", fn.ID, got)
		}
		if _, ok := asInt(tp.functionProp(fn, "Timeout")); !ok {
			t.Errorf("%s: Timeout %v is not a number of seconds", fn.ID, tp.functionProp(fn, "Timeout"))
		}
	}
	if !slices.Equal(ids, functions) {
		t.Errorf("serverless functions %v, want %v", ids, functions)
	}
}

// TestFunctionsBuildWithMakefile: `sam build` runs `make build-<LogicalId>`
// in the function's CodeUri, resolved against the template's directory; it
// must be the directory of the Makefile that has the target.
func TestFunctionsBuildWithMakefile(t *testing.T) {
	tp := loadTemplate(t)
	for _, fn := range tp.resources("AWS::Serverless::Function") {
		if got := fn.Metadata["BuildMethod"]; got != "makefile" {
			t.Errorf("%s: Metadata.BuildMethod %v, want makefile", fn.ID, got)
		}
		dir, err := codeDir(tp, fn)
		if err != nil {
			t.Error(err)
			continue
		}
		mk, err := os.ReadFile(filepath.Join(dir, "Makefile"))
		if err != nil {
			t.Errorf("%s: CodeUri %s has no Makefile: %v", fn.ID, dir, err)
			continue
		}
		if !strings.Contains("\n"+string(mk), "\nbuild-"+fn.ID+":") {
			t.Errorf("%s: %s has no target build-%s", fn.ID, filepath.Join(dir, "Makefile"), fn.ID)
		}
	}
}

// codeDir returns the directory of a function's CodeUri, relative to this
// package, as SAM resolves it (relative to the template).
func codeDir(tp template, fn resource) (string, error) {
	uri, ok := tp.functionProp(fn, "CodeUri").(string)
	if !ok || uri == "" || strings.Contains(uri, "://") {
		return "", fmt.Errorf("%s: CodeUri %v is not a local directory", fn.ID, tp.functionProp(fn, "CodeUri"))
	}
	return filepath.Join(filepath.Dir(templateFile), uri), nil
}

// TestFunctionEnvironment: the variables pkg/serverless reads are set, and
// the task claim lease fits the functions' timeouts and the queues'
// visibility timeouts.
func TestFunctionEnvironment(t *testing.T) {
	tp := loadTemplate(t)
	env := asMap(asMap(asMap(asMap(tp["Globals"])["Function"])["Environment"])["Variables"])
	for name, target := range map[string]string{
		serverless.EnvTable:      "Table",
		serverless.EnvTickQueue:  "TickQueue",
		serverless.EnvNodeQueue:  "NodeQueue",
		serverless.EnvStartQueue: "StartQueue",
	} {
		if id, attr, ok := refTarget(env[name]); !ok || id != target || attr != "" {
			t.Errorf("Globals.Function.Environment %s = %v, want !Ref %s", name, env[name], target)
		}
	}
	// SAM merges a function's Environment.Variables into the global ones:
	// a function may add variables, not remove these.
	for _, fn := range tp.resources("AWS::Serverless::Function") {
		own := asMap(asMap(fn.Properties["Environment"])["Variables"])
		for _, name := range []string{serverless.EnvTable, serverless.EnvTickQueue, serverless.EnvNodeQueue, serverless.EnvTaskLease} {
			if v, ok := own[name]; ok && fmt.Sprint(v) != fmt.Sprint(env[name]) {
				t.Errorf("%s: Environment %s = %v overrides the global %v", fn.ID, name, v, env[name])
			}
		}
	}
	lease, _ := env[serverless.EnvTaskLease].(string)
	cfg, err := serverless.ConfigFromEnv(func(k string) string {
		return map[string]string{
			serverless.EnvTable: "t", serverless.EnvTickQueue: "q.fifo", serverless.EnvNodeQueue: "n",
			serverless.EnvTaskLease: lease,
		}[k]
	})
	if err != nil {
		t.Fatalf("%s=%v: %v", serverless.EnvTaskLease, env[serverless.EnvTaskLease], err)
	}
	if cfg.Lease == 0 {
		t.Fatalf("set %s: the lease must be checked against the timeouts below", serverless.EnvTaskLease)
	}
	// A claim lease outlasts any task, and a redelivered message finds the
	// lease of a crashed holder expired. Tasks run in the tick function
	// (inline) and the node function.
	for _, fnID := range []string{"TickFunction", "NodeFunction"} {
		qID := consumers[fnID]
		fn := tp.resource(t, fnID, "AWS::Serverless::Function")
		timeout, _ := asInt(tp.functionProp(fn, "Timeout"))
		if cfg.Lease < time.Duration(timeout)*time.Second {
			t.Errorf("%s=%v is shorter than %s's Timeout %d s", serverless.EnvTaskLease, cfg.Lease, fnID, timeout)
		}
		q := tp.resource(t, qID, "AWS::SQS::Queue")
		vis, _ := asInt(q.Properties["VisibilityTimeout"])
		if cfg.Lease >= time.Duration(vis)*time.Second {
			t.Errorf("%s=%v is not under %s's VisibilityTimeout %d s", serverless.EnvTaskLease, cfg.Lease, qID, vis)
		}
	}
}

// TestSQSEventSources checks every queue a function consumes: batch size
// 1, ReportBatchItemFailures, a visibility timeout of at least 6x the
// function's timeout, and a redrive policy to a dead-letter queue.
func TestSQSEventSources(t *testing.T) {
	tp := loadTemplate(t)
	if esm := tp.resources("AWS::Lambda::EventSourceMapping"); len(esm) > 0 {
		t.Errorf("explicit event source mappings %v: declare them as SQS events of their function so that this test checks them", esm)
	}
	consumed := map[string]string{} // queue -> function
	for _, fn := range tp.resources("AWS::Serverless::Function") {
		timeout, _ := asInt(tp.functionProp(fn, "Timeout"))
		for name, ev := range asMap(fn.Properties["Events"]) {
			ev := asMap(ev)
			if ev["Type"] != "SQS" {
				continue
			}
			where := fn.ID + ".Events." + name
			p := asMap(ev["Properties"])
			if n, ok := asInt(p["BatchSize"]); !ok || n != 1 {
				t.Errorf("%s: BatchSize %v, want 1", where, p["BatchSize"])
			}
			if !slices.Contains(asList(p["FunctionResponseTypes"]), any("ReportBatchItemFailures")) {
				t.Errorf("%s: FunctionResponseTypes %v, want [ReportBatchItemFailures]", where, p["FunctionResponseTypes"])
			}
			qid, attr, ok := refTarget(p["Queue"])
			if !ok || attr != "Arn" {
				t.Errorf("%s: Queue %v, want !GetAtt <queue>.Arn of a queue of this template", where, p["Queue"])
				continue
			}
			if other, dup := consumed[qid]; dup {
				t.Errorf("%s: %s is consumed by %s too", where, qid, other)
			}
			consumed[qid] = fn.ID
			q := tp.resource(t, qid, "AWS::SQS::Queue")
			vis, ok := asInt(q.Properties["VisibilityTimeout"])
			if !ok {
				t.Errorf("%s: VisibilityTimeout not set (the default 30 s is under %dx %s's timeout)", qid, visibilityFactor, fn.ID)
			} else if vis < visibilityFactor*timeout {
				t.Errorf("%s: VisibilityTimeout %d s < %d x %s's Timeout %d s", qid, vis, visibilityFactor, fn.ID, timeout)
			}
			checkRedrive(t, tp, q)
		}
	}
	want := map[string]string{}
	for fn, q := range consumers {
		want[q] = fn
	}
	if !maps.Equal(consumed, want) {
		t.Errorf("queues consumed (queue: function) %v, want %v", consumed, want)
	}
}

// checkRedrive checks that q sends what fails repeatedly to a dead-letter
// queue of the same kind, kept longer than q keeps messages.
func checkRedrive(t *testing.T, tp template, q resource) {
	t.Helper()
	rp := asMap(q.Properties["RedrivePolicy"])
	dlqID, attr, ok := refTarget(rp["deadLetterTargetArn"])
	if !ok || attr != "Arn" {
		t.Errorf("%s: RedrivePolicy.deadLetterTargetArn %v, want !GetAtt <dead-letter queue>.Arn", q.ID, rp["deadLetterTargetArn"])
		return
	}
	if n, ok := asInt(rp["maxReceiveCount"]); !ok || n < 1 || n > 10 {
		t.Errorf("%s: RedrivePolicy.maxReceiveCount %v, want 1..10", q.ID, rp["maxReceiveCount"])
	}
	dlq := tp.resource(t, dlqID, "AWS::SQS::Queue")
	fifo, _ := asBool(q.Properties["FifoQueue"])
	dlqFIFO, _ := asBool(dlq.Properties["FifoQueue"])
	if fifo != dlqFIFO {
		t.Errorf("%s (FIFO %t) redrives to %s (FIFO %t): SQS wants both of one kind", q.ID, fifo, dlqID, dlqFIFO)
	}
	keep := func(r resource) int {
		if n, ok := asInt(r.Properties["MessageRetentionPeriod"]); ok {
			return n
		}
		return 345600 // SQS default, 4 days
	}
	if keep(dlq) <= keep(q) {
		t.Errorf("%s keeps messages %d s, not longer than its source %s (%d s)", dlqID, keep(dlq), q.ID, keep(q))
	}
}

// TestTickQueue: ticks go through a FIFO queue with explicit deduplication
// ids (no content-based deduplication) and a FIFO dead-letter queue.
func TestTickQueue(t *testing.T) {
	tp := loadTemplate(t)
	q := tp.resource(t, "TickQueue", "AWS::SQS::Queue")
	if b, ok := asBool(q.Properties["FifoQueue"]); !ok || !b {
		t.Errorf("TickQueue: FifoQueue %v, want true", q.Properties["FifoQueue"])
	}
	if b, ok := asBool(q.Properties["ContentBasedDeduplication"]); !ok || b {
		t.Errorf("TickQueue: ContentBasedDeduplication %v, want false (senders set deduplication ids)", q.Properties["ContentBasedDeduplication"])
	}
	tick := tp.resource(t, "TickFunction", "AWS::Serverless::Function")
	timeout, _ := asInt(tp.functionProp(tick, "Timeout"))
	vis, _ := asInt(q.Properties["VisibilityTimeout"])
	if timeout <= 0 || vis < visibilityFactor*timeout {
		t.Errorf("TickQueue: VisibilityTimeout %d s, TickFunction Timeout %d s: want visibility >= %dx timeout", vis, timeout, visibilityFactor)
	}
	if _, ok := q.Properties["RedrivePolicy"]; !ok {
		t.Error("TickQueue has no RedrivePolicy (dead-letter queue)")
	}
	checkRedrive(t, tp, q)
}

func TestTableSettings(t *testing.T) {
	tp := loadTemplate(t)
	tables := tp.resources("AWS::DynamoDB::Table")
	if len(tables) != 1 || tables[0].ID != "Table" {
		t.Fatalf("DynamoDB tables %v, want one, Table", tables)
	}
	p := tables[0].Properties
	if p["BillingMode"] != "PAY_PER_REQUEST" {
		t.Errorf("BillingMode %v, want PAY_PER_REQUEST", p["BillingMode"])
	}
	ttl := asMap(p["TimeToLiveSpecification"])
	if on, _ := asBool(ttl["Enabled"]); ttl["AttributeName"] != "expires_at" || !on {
		t.Errorf("TimeToLiveSpecification %v, want expires_at enabled", ttl)
	}
	if on, _ := asBool(asMap(p["PointInTimeRecoverySpecification"])["PointInTimeRecoveryEnabled"]); !on {
		t.Errorf("PointInTimeRecoverySpecification %v, want enabled", p["PointInTimeRecoverySpecification"])
	}
	if on, _ := asBool(asMap(p["SSESpecification"])["SSEEnabled"]); !on {
		t.Errorf("SSESpecification %v, want SSEEnabled", p["SSESpecification"])
	}
	r := asMap(asMap(tp["Resources"])["Table"])
	if r["DeletionPolicy"] != "Retain" || r["UpdateReplacePolicy"] != "Retain" {
		t.Errorf("Table: DeletionPolicy %v, UpdateReplacePolicy %v: want Retain (the runs' history)", r["DeletionPolicy"], r["UpdateReplacePolicy"])
	}
}

// deadLetterQueues returns the queues that receive what failed: redrive
// targets, EventBridge target dead-letter queues and on-failure
// destinations (of asynchronous invocations and of stream event sources).
func deadLetterQueues(tp template) []string {
	set := map[string]bool{}
	for _, q := range tp.resources("AWS::SQS::Queue") {
		if id, _, ok := refTarget(asMap(q.Properties["RedrivePolicy"])["deadLetterTargetArn"]); ok {
			set[id] = true
		}
	}
	for _, fn := range tp.resources("AWS::Serverless::Function") {
		for _, ev := range asMap(fn.Properties["Events"]) {
			p := asMap(asMap(ev)["Properties"])
			if id, _, ok := refTarget(asMap(p["DeadLetterConfig"])["Arn"]); ok {
				set[id] = true
			}
			if id, _, ok := refTarget(asMap(asMap(p["DestinationConfig"])["OnFailure"])["Destination"]); ok {
				if r := asMap(asMap(tp["Resources"])[id]); r["Type"] == "AWS::SQS::Queue" {
					set[id] = true
				}
			}
		}
		of := asMap(asMap(asMap(fn.Properties["EventInvokeConfig"])["DestinationConfig"])["OnFailure"])
		if of["Type"] == "SQS" {
			if id, _, ok := refTarget(of["Destination"]); ok {
				set[id] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// TestDeadLetterQueueAlarms: every dead-letter queue has an alarm that
// fires on its first message and notifies the optional SNS topic.
func TestDeadLetterQueueAlarms(t *testing.T) {
	tp := loadTemplate(t)
	dlqs := deadLetterQueues(tp)
	for _, want := range []string{"TickDeadLetterQueue", "NodeDeadLetterQueue", "StartDeadLetterQueue", "EventsDeadLetterQueue", "SweepDeadLetterQueue"} {
		if !slices.Contains(dlqs, want) {
			t.Errorf("dead-letter queues %v lack %s", dlqs, want)
		}
	}
	if _, ok := asMap(tp["Parameters"])["AlarmTopicArn"]; !ok {
		t.Error("no AlarmTopicArn parameter")
	}
	alarmed := map[string]bool{}
	for _, a := range tp.resources("AWS::CloudWatch::Alarm") {
		p := a.Properties
		dims := asList(p["Dimensions"])
		if p["Namespace"] != "AWS/SQS" || p["MetricName"] != "ApproximateNumberOfMessagesVisible" || len(dims) != 1 {
			continue
		}
		d := asMap(dims[0])
		qid, attr, ok := refTarget(d["Value"])
		if d["Name"] != "QueueName" || !ok || attr != "QueueName" {
			t.Errorf("%s: dimension %v, want QueueName = !GetAtt <queue>.QueueName", a.ID, d)
			continue
		}
		if th, ok := asInt(p["Threshold"]); !ok || th != 0 || p["ComparisonOperator"] != "GreaterThanThreshold" {
			t.Errorf("%s: %v %v, want GreaterThanThreshold 0", a.ID, p["ComparisonOperator"], p["Threshold"])
		}
		if n, ok := asInt(p["EvaluationPeriods"]); !ok || n != 1 {
			t.Errorf("%s: EvaluationPeriods %v, want 1", a.ID, p["EvaluationPeriods"])
		}
		if !strings.Contains(fmt.Sprint(p["AlarmActions"]), "AlarmTopicArn") {
			t.Errorf("%s: AlarmActions %v do not notify AlarmTopicArn", a.ID, p["AlarmActions"])
		}
		alarmed[qid] = true
	}
	for _, q := range dlqs {
		if !alarmed[q] {
			t.Errorf("dead-letter queue %s has no ApproximateNumberOfMessagesVisible > 0 alarm", q)
		}
	}
}

// statement is one IAM policy statement and where it is.
type statement struct {
	where string
	s     map[string]any
}

// policyStatements returns every statement of every policy document in
// the template (identity and resource policies; not trust policies).
func policyStatements(tp template) []statement {
	var out []statement
	add := func(where string, doc any) {
		for i, s := range asList(asMap(doc)["Statement"]) {
			out = append(out, statement{where: fmt.Sprintf("%s.Statement[%d]", where, i), s: asMap(s)})
		}
	}
	for id, v := range asMap(tp["Resources"]) {
		r := asMap(v)
		p := asMap(r["Properties"])
		switch r["Type"] {
		case "AWS::IAM::Role", "AWS::IAM::User", "AWS::IAM::Group":
			for i, pol := range asList(p["Policies"]) {
				add(fmt.Sprintf("%s.Policies[%d]", id, i), asMap(pol)["PolicyDocument"])
			}
		case "AWS::IAM::ManagedPolicy", "AWS::IAM::Policy", "AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy":
			add(id, p["PolicyDocument"])
		case "AWS::Serverless::Function":
			for i, pol := range asList(p["Policies"]) {
				add(fmt.Sprintf("%s.Policies[%d]", id, i), pol)
			}
		}
	}
	slices.SortFunc(out, func(a, b statement) int { return strings.Compare(a.where, b.where) })
	return out
}

// strs returns every string inside v (through intrinsic functions).
func strs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, strs(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = append(out, strs(v[k])...)
		}
		return out
	}
	return nil
}

// wildcardResources are the statements allowed a wildcard resource, by
// role and Sid, with why.
var wildcardResources = map[string]string{
	"ApiFunctionRole ManageSchedules": "schedules are created at run time with their users' names; the resource is still limited to this deployment's schedule group",
	"ApiFunctionRole ListSchedules":   "scheduler:ListSchedules has no resource-level permission: IAM takes only \"*\" for it",
}

// TestIAMNoWildcards: no policy statement grants an action or a resource
// by wildcard (but wildcardResources), and every function has a role of its own from this
// template (SAM's generated roles attach AWS managed policies whose SQS and
// Logs statements have Resource "*").
func TestIAMNoWildcards(t *testing.T) {
	tp := loadTemplate(t)
	sts := policyStatements(tp)
	if len(sts) == 0 {
		t.Fatal("no policy statements found")
	}
	for _, st := range sts {
		for _, k := range []string{"NotAction", "NotResource", "NotPrincipal"} {
			if _, ok := st.s[k]; ok {
				t.Errorf("%s: uses %s", st.where, k)
			}
		}
		res := strs(st.s["Resource"])
		if len(res) == 0 {
			t.Errorf("%s: no Resource", st.where)
		}
		for _, r := range res {
			role, _, _ := strings.Cut(st.where, ".")
			if _, ok := wildcardResources[role+" "+fmt.Sprint(st.s["Sid"])]; ok {
				continue
			}
			if strings.Contains(r, "*") {
				t.Errorf("%s: wildcard resource %q", st.where, r)
			}
		}
		for _, a := range strs(st.s["Action"]) {
			if strings.Contains(a, "*") {
				t.Errorf("%s: wildcard action %q", st.where, a)
			}
		}
	}
	managed := map[string]bool{}
	for _, mp := range tp.resources("AWS::IAM::ManagedPolicy") {
		managed[mp.ID] = true
	}
	for _, fn := range tp.resources("AWS::Serverless::Function") {
		if _, ok := fn.Properties["Policies"]; ok {
			t.Errorf("%s: Policies makes SAM generate a role with AWS managed policies; give it a Role of this template", fn.ID)
		}
		id, attr, ok := refTarget(fn.Properties["Role"])
		if !ok || attr != "Arn" {
			t.Errorf("%s: Role %v, want !GetAtt <role>.Arn", fn.ID, fn.Properties["Role"])
			continue
		}
		role := tp.resource(t, id, "AWS::IAM::Role")
		for _, arn := range asList(role.Properties["ManagedPolicyArns"]) {
			if mid, _, ok := refTarget(arn); ok && managed[mid] {
				continue
			}
			// One of this template's, attached under a condition.
			if f := asList(asMap(arn)["Fn::If"]); len(f) == 3 {
				mid, _, ok := refTarget(f[1])
				none, _, _ := refTarget(f[2])
				if ok && managed[mid] && none == "AWS::NoValue" {
					continue
				}
			}
			// The one exception: X-Ray has no resource-level permissions.
			if s := fmt.Sprint(arn); strings.Contains(s, "TracingActive") && strings.Contains(s, "AWSXrayWriteOnlyAccess") {
				continue
			}
			t.Errorf("%s: managed policy %v is not one of this template", id, arn)
		}
	}
}

// roleStatements returns the statements of the inline and managed
// policies (of this template) of function fn's role.
func roleStatements(t *testing.T, tp template, fn string) []map[string]any {
	t.Helper()
	f := tp.resource(t, fn, "AWS::Serverless::Function")
	roleID, _, _ := refTarget(f.Properties["Role"])
	role := tp.resource(t, roleID, "AWS::IAM::Role")
	var docs []any
	for _, p := range asList(role.Properties["Policies"]) {
		docs = append(docs, asMap(p)["PolicyDocument"])
	}
	for _, arn := range asList(role.Properties["ManagedPolicyArns"]) {
		if id, _, ok := refTarget(arn); ok {
			docs = append(docs, asMap(asMap(asMap(asMap(tp["Resources"])[id])["Properties"]))["PolicyDocument"])
		}
	}
	var out []map[string]any
	for _, doc := range docs {
		for _, s := range asList(asMap(doc)["Statement"]) {
			out = append(out, asMap(s))
		}
	}
	return out
}

// roleGrants returns, for the role of function fn, the logical ids of the
// resources its inline and managed policies grant action on.
func roleGrants(t *testing.T, tp template, fn, action string) []string {
	t.Helper()
	set := map[string]bool{}
	for _, s := range roleStatements(t, tp, fn) {
		if !slices.Contains(strs(s["Action"]), action) {
			continue
		}
		for _, r := range asList(s["Resource"]) {
			if id, _, ok := refTarget(r); ok {
				set[id] = true
			} else {
				set[fmt.Sprint(r)] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// roleActions returns, for the role of function fn, the actions with
// prefix (such as "dynamodb:") its policies grant, by resource: "Id.Attr"
// for !GetAtt, "Id" for !Ref, the value itself otherwise.
func roleActions(t *testing.T, tp template, fn, prefix string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, s := range roleStatements(t, tp, fn) {
		for _, r := range asList(s["Resource"]) {
			res := fmt.Sprint(r)
			if id, attr, ok := refTarget(r); ok {
				res = id
				if attr != "" {
					res += "." + attr
				}
			}
			for _, a := range strs(s["Action"]) {
				if strings.HasPrefix(a, prefix) && !slices.Contains(out[res], a) {
					out[res] = append(out[res], a)
				}
			}
		}
	}
	for res := range out {
		slices.Sort(out[res])
	}
	return out
}

// TestFunctionPermissions: each function may send to the queues it sends
// to and consume the queue it consumes, and nothing else.
func TestFunctionPermissions(t *testing.T) {
	tp := loadTemplate(t)
	for _, tt := range []struct {
		fn      string
		send    []string
		receive []string
	}{
		{"ApiFunction", []string{"EventsDeadLetterQueue", "TickQueue"}, []string{"StartQueue"}},
		{"TickFunction", []string{"NodeQueue", "TickQueue"}, []string{"TickQueue"}},
		// NodeDeadLetterQueue: the on-failure destination of the node
		// function's asynchronous invocations (NodeDispatch invoke),
		// which Lambda writes with the function's own role.
		{"NodeFunction", []string{"NodeDeadLetterQueue", "NodeQueue", "TickQueue"}, []string{"NodeQueue"}},
		{"SweepFunction", []string{"SweepDeadLetterQueue"}, nil},
	} {
		if got := roleGrants(t, tp, tt.fn, "sqs:SendMessage"); !slices.Equal(got, tt.send) {
			t.Errorf("%s may send to %v, want %v", tt.fn, got, tt.send)
		}
		for _, a := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage"} {
			if got := roleGrants(t, tp, tt.fn, a); !slices.Equal(got, tt.receive) {
				t.Errorf("%s has %s on %v, want %v", tt.fn, a, got, tt.receive)
			}
		}
		if got := roleGrants(t, tp, tt.fn, "dynamodb:TransactWriteItems"); len(got) > 0 {
			t.Errorf("%s: dynamodb:TransactWriteItems is not an IAM action", tt.fn)
		}
		ddb := roleActions(t, tp, tt.fn, "dynamodb:")
		if tt.fn == "SweepFunction" {
			continue // TestSweepPermissions
		}
		for _, a := range []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"} {
			if !slices.Contains(ddb["Table.Arn"], a) {
				t.Errorf("%s has dynamodb actions %v, want %s on the table", tt.fn, ddb, a)
			}
		}
		if got := ddb["Table.StreamArn"]; len(got) > 0 {
			t.Errorf("%s has %v on the table's stream; only the sweep reads it", tt.fn, got)
		}
	}
}

// TestSweepPermissions: the sweep reads the table's stream, reads a run
// record and a partition's keys and deletes items (dynamo.Store.PurgeRun),
// reads a run and its push configs and moves their delivery cursors
// (a2a.Server.DeliverPush: BatchGetItem of a chunked record, UpdateItem),
// and sends failed batches to its dead-letter queue; it does not share
// TableDataPolicy, which puts items.
func TestSweepPermissions(t *testing.T) {
	tp := loadTemplate(t)
	got := roleActions(t, tp, "SweepFunction", "dynamodb:")
	want := map[string][]string{
		"Table.Arn":       {"dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"},
		"Table.StreamArn": {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"},
		// The runs of an expired thread are listed through by_status.
		fmt.Sprint(map[string]any{"Fn::Sub": "${Table.Arn}/index/by_status"}): {"dynamodb:Query"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SweepFunction's dynamodb actions by resource:\n got %v\nwant %v", got, want)
	}
	fn := tp.resource(t, "SweepFunction", "AWS::Serverless::Function")
	roleID, _, _ := refTarget(fn.Properties["Role"])
	role := tp.resource(t, roleID, "AWS::IAM::Role")
	for _, arn := range asList(role.Properties["ManagedPolicyArns"]) {
		if id, _, ok := refTarget(arn); ok {
			t.Errorf("%s: managed policy %s; the sweep's statements are its own", roleID, id)
		}
	}
	if got := roleActions(t, tp, "SweepFunction", "logs:"); len(got) != 1 || len(got["SweepLogGroup.Arn"]) == 0 {
		t.Errorf("SweepFunction's logs actions by resource %v, want only its log group", got)
	}
}

// TestHTTPAPIAuth: AuthMode picks IAM or JWT authorization for every route
// of the HTTP API, and every route is integrated with ApiFunction.
func TestHTTPAPIAuth(t *testing.T) {
	tp := loadTemplate(t)
	param := asMap(asMap(tp["Parameters"])["AuthMode"])
	if !reflect.DeepEqual(param["AllowedValues"], []any{"IAM", "JWT"}) || param["Default"] != "IAM" {
		t.Errorf("parameter AuthMode %v, want AllowedValues [IAM JWT], Default IAM", param)
	}
	cond := fmt.Sprint(asMap(tp["Conditions"])["UseJWT"])
	if cond != fmt.Sprint(map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "AuthMode"}, "JWT"}}) {
		t.Errorf("condition UseJWT %s, want !Equals [!Ref AuthMode, JWT]", cond)
	}
	api := tp.resource(t, "HttpApi", "AWS::Serverless::HttpApi")
	if _, ok := api.Properties["Auth"]; ok {
		t.Error("HttpApi: Auth is set; authorization is in DefinitionBody, by AuthMode")
	}
	body := asMap(api.Properties["DefinitionBody"])
	wantSecurity := fmt.Sprint(map[string]any{"Fn::If": []any{"UseJWT",
		[]any{map[string]any{"JwtAuthorizer": []any{}}},
		[]any{map[string]any{"AWS_IAM": []any{}}}}})
	paths := asMap(body["paths"])
	for path, item := range paths {
		for method, op := range asMap(item) {
			if got := fmt.Sprint(asMap(op)["security"]); got != wantSecurity {
				t.Errorf("route %s %s: security %s, want %s", method, path, got, wantSecurity)
			}
		}
	}
	schemes := asList(asMap(asMap(body["components"])["securitySchemes"])["Fn::If"])
	if len(schemes) != 3 || schemes[0] != "UseJWT" {
		t.Fatalf("securitySchemes %v, want !If [UseJWT, {JwtAuthorizer}, {AWS_IAM}]", asMap(body["components"])["securitySchemes"])
	}
	jwt := asMap(asMap(asMap(schemes[1])["JwtAuthorizer"])["x-amazon-apigateway-authorizer"])
	cfg := asMap(jwt["jwtConfiguration"])
	if jwt["type"] != "jwt" || fmt.Sprint(cfg["issuer"]) != "map[Ref:JwtIssuer]" || fmt.Sprint(cfg["audience"]) != "map[Ref:JwtAudience]" {
		t.Errorf("JwtAuthorizer %v, want a jwt authorizer on JwtIssuer and JwtAudience", jwt)
	}
	if got := asMap(asMap(schemes[2])["AWS_IAM"])["x-amazon-apigateway-authtype"]; got != "awsSigv4" {
		t.Errorf("AWS_IAM scheme authtype %v, want awsSigv4", got)
	}

	// SAM adds the Lambda integration of ApiFunction's HttpApi events to
	// the routes of the body: each route needs its event.
	fn := tp.resource(t, "ApiFunction", "AWS::Serverless::Function")
	routes := map[string]bool{}
	for name, ev := range asMap(fn.Properties["Events"]) {
		ev := asMap(ev)
		if ev["Type"] != "HttpApi" {
			continue
		}
		p := asMap(ev["Properties"])
		if id, _, ok := refTarget(p["ApiId"]); !ok || id != "HttpApi" {
			t.Errorf("ApiFunction.Events.%s: ApiId %v, want !Ref HttpApi", name, p["ApiId"])
		}
		if p["Method"] != "ANY" {
			t.Errorf("ApiFunction.Events.%s: Method %v, want ANY", name, p["Method"])
		}
		routes[fmt.Sprint(p["Path"])] = true
	}
	want := map[string]bool{"/": true, "/{proxy+}": true}
	if !maps.Equal(routes, want) {
		t.Errorf("ApiFunction HttpApi event paths %v, want %v", slices.Sorted(maps.Keys(routes)), slices.Sorted(maps.Keys(want)))
	}
	for path, item := range paths {
		if _, ok := asMap(item)["x-amazon-apigateway-any-method"]; !ok || !routes[path] {
			t.Errorf("route %s: want x-amazon-apigateway-any-method and an ApiFunction HttpApi event for it", path)
		}
	}
}

// TestStartRunEvents: EventBridge events of the detail-type pkg/serverless
// handles reach ApiFunction, and what cannot be delivered or fails lands in
// EventsDeadLetterQueue, which EventBridge may write to.
func TestStartRunEvents(t *testing.T) {
	tp := loadTemplate(t)
	fn := tp.resource(t, "ApiFunction", "AWS::Serverless::Function")
	var rules []string
	for name, ev := range asMap(fn.Properties["Events"]) {
		ev := asMap(ev)
		if ev["Type"] != "EventBridgeRule" {
			continue
		}
		rules = append(rules, "ApiFunction"+name) // SAM's id of the generated rule
		p := asMap(ev["Properties"])
		if got := asList(asMap(p["Pattern"])["detail-type"]); !reflect.DeepEqual(got, []any{serverless.DetailTypeStartRun}) {
			t.Errorf("ApiFunction.Events.%s: detail-type %v, want [%s]", name, got, serverless.DetailTypeStartRun)
		}
		if id, _, ok := refTarget(asMap(p["DeadLetterConfig"])["Arn"]); !ok || id != "EventsDeadLetterQueue" {
			t.Errorf("ApiFunction.Events.%s: DeadLetterConfig %v, want EventsDeadLetterQueue", name, p["DeadLetterConfig"])
		}
	}
	if len(rules) != 1 {
		t.Fatalf("ApiFunction EventBridge rules %v, want one", rules)
	}
	pol := tp.resource(t, "EventsDeadLetterQueuePolicy", "AWS::SQS::QueuePolicy")
	s := fmt.Sprint(pol.Properties)
	for _, want := range []string{"events.amazonaws.com", "sqs:SendMessage", "EventsDeadLetterQueue", rules[0]} {
		if !strings.Contains(s, want) {
			t.Errorf("EventsDeadLetterQueuePolicy does not mention %s: %s", want, s)
		}
	}
}

func TestOutputs(t *testing.T) {
	tp := loadTemplate(t)
	out := asMap(tp["Outputs"])
	for _, k := range []string{"ApiUrl", "TableName", "TickQueueUrl", "NodeQueueUrl", "StartQueueUrl"} {
		if _, ok := out[k]; !ok {
			t.Errorf("output %s is missing", k)
		}
	}
	// Every dead-letter queue's URL is an output <queue>Url.
	for _, q := range deadLetterQueues(tp) {
		if id, attr, ok := refTarget(asMap(out[q+"Url"])["Value"]); !ok || id != q || attr != "" {
			t.Errorf("output %sUrl = %v, want !Ref %s", q, out[q+"Url"], q)
		}
	}
}

// TestAutoPublishAlias: every function publishes a version per deploy
// behind the alias "live", and what invokes a function invokes the
// alias: SAM puts the event source mappings, the EventBridge target and
// the HTTP API's integration on it (AutoPublishAlias); the stream
// function's URL is the alias's (Qualifier), created after it.
func TestAutoPublishAlias(t *testing.T) {
	tp := loadTemplate(t)
	for _, id := range functions {
		fn := tp.resource(t, id, "AWS::Serverless::Function")
		if got := tp.functionProp(fn, "AutoPublishAlias"); got != "live" {
			t.Errorf("%s: AutoPublishAlias %v, want live", id, got)
		}
		for name, ev := range asMap(fn.Properties["Events"]) {
			// An event with its own FunctionName or target would bypass
			// the alias.
			if p := asMap(asMap(ev)["Properties"]); p["FunctionName"] != nil {
				t.Errorf("%s event %s names a function", id, name)
			}
		}
	}
	url := tp.resource(t, "StreamFunctionUrl", "AWS::Lambda::Url")
	if url.Properties["Qualifier"] != "live" {
		t.Errorf("StreamFunctionUrl.Qualifier = %v, want live (the alias)", url.Properties["Qualifier"])
	}
	if dep := fmt.Sprint(asMap(asMap(tp["Resources"])["StreamFunctionUrl"])["DependsOn"]); dep != "StreamFunctionAliaslive" {
		t.Errorf("StreamFunctionUrl.DependsOn = %s, want StreamFunctionAliaslive (SAM's alias resource)", dep)
	}
	for _, p := range tp.resources("AWS::Lambda::Permission") {
		if id, _, _ := refTarget(p.Properties["FunctionName"]); !strings.HasSuffix(id, ".Alias") {
			t.Errorf("%s: FunctionName %v, want !Ref <Function>.Alias", p.ID, p.Properties["FunctionName"])
		}
	}
	for _, r := range tp.resources("AWS::Lambda::EventSourceMapping") {
		t.Errorf("%s: an event source mapping outside a function's Events is not put on the alias by SAM", r.ID)
	}
}
