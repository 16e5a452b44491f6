package infra

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// deployment is what the template's intrinsic functions resolve to for
// the resources a test made on moto: !GetAtt X.Arn, !Ref X and the
// pseudo parameters, so that the roles' statements name the ARNs the
// recorded calls act on.
type deployment struct {
	attrs      map[string]string // "Table.Arn" -> ARN
	refs       map[string]string // "TickQueue" -> URL, "AWS::Region" -> ...
	conditions map[string]bool   // TracingActive -> false, ...
}

// testQueues names, for each queue of the template, the queue
// serverless.Provision makes for it (after its prefix and "-"); queues
// Provision does not make (sweep and events dead letters) are named here
// all the same: no code calls them.
var testQueues = map[string]string{
	"TickQueue":             "ticks.fifo",
	"TickDeadLetterQueue":   "ticks-dlq.fifo",
	"NodeQueue":             "nodes",
	"NodeDeadLetterQueue":   "nodes-dlq",
	"StartQueue":            "starts",
	"StartDeadLetterQueue":  "starts-dlq",
	"SweepDeadLetterQueue":  "sweep-dlq",
	"EventsDeadLetterQueue": "events-dlq",
}

// newDeployment resolves the template's resources to those Provision
// made with prefix on moto (table <prefix>, queues <prefix>-<name>).
func newDeployment(t *testing.T, tp template, prefix, endpoint string) *deployment {
	t.Helper()
	d := &deployment{
		attrs: map[string]string{},
		refs: map[string]string{
			"AWS::Partition": "aws", "AWS::Region": testRegion, "AWS::AccountId": testAccount,
			"AWS::StackName": prefix, "AWS::URLSuffix": "amazonaws.com",
		},
		// The defaults: AuthMode IAM, TracingMode PassThrough, no alarm
		// topic, no reserved concurrency.
		conditions: map[string]bool{},
	}
	for id := range asMap(tp["Conditions"]) {
		d.conditions[id] = false
	}
	arn := func(service, rest string) string {
		return fmt.Sprintf("arn:aws:%s:%s:%s:%s", service, testRegion, testAccount, rest)
	}
	for _, r := range tp.resources("AWS::DynamoDB::Table") {
		d.attrs[r.ID+".Arn"] = arn("dynamodb", "table/"+prefix)
		d.attrs[r.ID+".StreamArn"] = arn("dynamodb", "table/"+prefix+"/stream/2026-01-01T00:00:00.000")
		d.refs[r.ID] = prefix
	}
	for _, r := range tp.resources("AWS::SQS::Queue") {
		name, ok := testQueues[r.ID]
		if !ok {
			t.Fatalf("queue %s of the template has no test queue: add it to testQueues", r.ID)
		}
		name = prefix + "-" + name
		d.attrs[r.ID+".Arn"] = arn("sqs", name)
		d.attrs[r.ID+".QueueName"] = name
		d.refs[r.ID] = endpoint + "/" + testAccount + "/" + name
	}
	// serverless.Provision's schedule group and scheduler role.
	for _, r := range tp.resources("AWS::Scheduler::ScheduleGroup") {
		d.refs[r.ID] = prefix
		d.attrs[r.ID+".Arn"] = arn("scheduler", "schedule-group/"+prefix)
	}
	d.attrs["SchedulerRole.Arn"] = "arn:aws:iam::" + testAccount + ":role/" + prefix + "-scheduler"
	for _, r := range tp.resources("AWS::Logs::LogGroup") {
		d.attrs[r.ID+".Arn"] = arn("logs", "log-group:"+prefix+"-"+r.ID+":*")
	}
	for _, r := range tp.resources("AWS::IAM::ManagedPolicy") {
		d.refs[r.ID] = "arn:aws:iam::" + testAccount + ":policy/" + prefix + "-" + r.ID
	}
	// !Ref X.Alias: the alias SAM makes for AutoPublishAlias (live).
	for _, r := range tp.resources("AWS::Serverless::Function") {
		d.refs[r.ID+".Alias"] = FunctionAliasARN(prefix, r.ID)
	}
	return d
}

// FunctionAliasARN is the ARN of function fn's alias live in the test
// deployment with prefix (the function named <prefix>-<fn>).
func FunctionAliasARN(prefix, fn string) string {
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s-%s:live", testRegion, testAccount, prefix, fn)
}

// noValue is what AWS::NoValue expands to: the entry is dropped.
type noValue struct{}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

// expand resolves the intrinsic functions of v.
func (d *deployment) expand(v any) (any, error) {
	switch v := v.(type) {
	case []any:
		out := make([]any, 0, len(v))
		for _, e := range v {
			x, err := d.expand(e)
			if err != nil {
				return nil, err
			}
			if _, drop := x.(noValue); !drop {
				out = append(out, x)
			}
		}
		return out, nil
	case map[string]any:
		if len(v) == 1 {
			for k, arg := range v {
				switch k {
				case "Ref":
					name, _ := arg.(string)
					if name == "AWS::NoValue" {
						return noValue{}, nil
					}
					if r, ok := d.refs[name]; ok {
						return r, nil
					}
					return nil, fmt.Errorf("!Ref %s: not resolved for the test deployment", name)
				case "Fn::GetAtt":
					id, attr, _ := refTarget(v)
					if r, ok := d.attrs[id+"."+attr]; ok {
						return r, nil
					}
					return nil, fmt.Errorf("!GetAtt %s.%s: not resolved for the test deployment", id, attr)
				case "Fn::Sub":
					s, ok := arg.(string)
					if !ok {
						return nil, fmt.Errorf("!Sub %v: only the string form is expanded", arg)
					}
					var err error
					out := subVar.ReplaceAllStringFunc(s, func(m string) string {
						name := m[2 : len(m)-1]
						if r, ok := d.attrs[name]; ok {
							return r
						}
						if r, ok := d.refs[name]; ok {
							return r
						}
						err = fmt.Errorf("!Sub %q: ${%s} not resolved", s, name)
						return m
					})
					return out, err
				case "Fn::If":
					a := asList(arg)
					if len(a) != 3 {
						return nil, fmt.Errorf("!If %v: want 3 arguments", arg)
					}
					cond, _ := a[0].(string)
					val, ok := d.conditions[cond]
					if !ok {
						return nil, fmt.Errorf("!If: condition %s unknown", cond)
					}
					if val {
						return d.expand(a[1])
					}
					return d.expand(a[2])
				case "Fn::Join":
					a := asList(arg)
					if len(a) != 2 {
						return nil, fmt.Errorf("!Join %v: want 2 arguments", arg)
					}
					parts, err := d.expand(a[1])
					if err != nil {
						return nil, err
					}
					sep, _ := a[0].(string)
					return strings.Join(strs(parts), sep), nil
				}
			}
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			x, err := d.expand(e)
			if err != nil {
				return nil, err
			}
			if _, drop := x.(noValue); !drop {
				out[k] = x
			}
		}
		return out, nil
	}
	return v, nil
}

// grant is one expanded policy statement of a role.
type grant struct {
	Policy    string // "NodeFunctionRole/node" or the managed policy's id
	Sid       string
	Deny      bool
	Actions   []string
	Resources []string
}

// roleGrantsOf returns the expanded statements of function fn's role:
// its inline policies and the managed policies of this template it
// attaches (AWS managed ones, attached only under a condition that is
// false in the default deployment, expand to nothing).
func roleGrantsOf(t *testing.T, tp template, d *deployment, fn string) []grant {
	t.Helper()
	f := tp.resource(t, fn, "AWS::Serverless::Function")
	roleID, _, _ := refTarget(f.Properties["Role"])
	return grantsOfRole(t, tp, d, roleID)
}

// grantsOfRole returns the expanded statements of the role roleID.
func grantsOfRole(t *testing.T, tp template, d *deployment, roleID string) []grant {
	t.Helper()
	role := tp.resource(t, roleID, "AWS::IAM::Role")
	type doc struct {
		name string
		doc  any
	}
	var docs []doc
	for _, p := range asList(role.Properties["Policies"]) {
		docs = append(docs, doc{fmt.Sprintf("%s/%v", roleID, asMap(p)["PolicyName"]), asMap(p)["PolicyDocument"]})
	}
	for _, arn := range asList(role.Properties["ManagedPolicyArns"]) {
		if id, _, ok := refTarget(arn); ok {
			docs = append(docs, doc{id, asMap(tp.resource(t, id, "AWS::IAM::ManagedPolicy").Properties)["PolicyDocument"]})
			continue
		}
		x, err := d.expand(arn)
		if err != nil {
			t.Fatalf("%s: managed policy %v: %v", roleID, arn, err)
		}
		if id := d.managedPolicy(tp, x); id != "" { // attached under a condition that holds
			docs = append(docs, doc{id, asMap(tp.resource(t, id, "AWS::IAM::ManagedPolicy").Properties)["PolicyDocument"]})
			continue
		}
		if _, none := x.(noValue); !none {
			t.Fatalf("%s: managed policy %v is attached in the default deployment; this check cannot read it", roleID, x)
		}
	}
	// Policies of their own that attach themselves to the role (Roles),
	// when their condition holds.
	for _, r := range tp.resources("AWS::IAM::Policy") {
		if cond, ok := asMap(asMap(tp["Resources"])[r.ID])["Condition"].(string); ok && !d.conditions[cond] {
			continue
		}
		for _, role := range asList(r.Properties["Roles"]) {
			if id, _, ok := refTarget(role); ok && id == roleID {
				docs = append(docs, doc{fmt.Sprintf("%s/%v", roleID, r.Properties["PolicyName"]), r.Properties["PolicyDocument"]})
			}
		}
	}
	var out []grant
	for _, dc := range docs {
		for i, s := range asList(asMap(dc.doc)["Statement"]) {
			x, err := d.expand(s)
			if err != nil {
				t.Fatalf("%s statement %d: %v", dc.name, i, err)
			}
			st := asMap(x)
			g := grant{Policy: dc.name, Sid: fmt.Sprint(st["Sid"]), Deny: st["Effect"] == "Deny", Actions: strs(st["Action"]), Resources: strs(st["Resource"])}
			if st["Effect"] != "Allow" && st["Effect"] != "Deny" {
				t.Fatalf("%s statement %d: Effect %v", dc.name, i, st["Effect"])
			}
			if _, ok := st["Condition"]; ok {
				t.Fatalf("%s statement %d: has a Condition, which this check does not evaluate", dc.name, i)
			}
			out = append(out, g)
		}
	}
	return out
}

// managedPolicy returns the id of the template's managed policy whose
// ARN x is (an expanded !Ref), or "".
func (d *deployment) managedPolicy(tp template, x any) string {
	arn, ok := x.(string)
	if !ok {
		return ""
	}
	for _, r := range tp.resources("AWS::IAM::ManagedPolicy") {
		if d.refs[r.ID] == arn {
			return r.ID
		}
	}
	return ""
}

// wildcardMatch reports whether s matches IAM pattern p (* any run of
// characters, ? one character); fold compares case-insensitively, as IAM
// compares actions.
func wildcardMatch(p, s string, fold bool) bool {
	if fold {
		p, s = strings.ToLower(p), strings.ToLower(s)
	}
	// Iterative matching with backtracking to the last *.
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matches reports whether statement g covers action on resource.
func (g grant) matches(action, resource string) bool {
	actionOK, resOK := false, false
	for _, a := range g.Actions {
		actionOK = actionOK || wildcardMatch(a, action, true)
	}
	for _, r := range g.Resources {
		resOK = resOK || wildcardMatch(r, resource, false)
	}
	return actionOK && resOK
}

// allowed evaluates a call against a role's statements as IAM does for
// identity policies alone: an explicit Deny wins, else an Allow is
// needed.
func allowed(grants []grant, action, resource string) bool {
	ok := false
	for _, g := range grants {
		if g.matches(action, resource) {
			if g.Deny {
				return false
			}
			ok = true
		}
	}
	return ok
}

func TestWildcardMatch(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		fold bool
		want bool
	}{
		{"sqs:SendMessage", "sqs:SendMessage", true, true},
		{"sqs:sendmessage", "sqs:SendMessage", true, true},
		{"sqs:Send*", "sqs:SendMessageBatch", true, true},
		{"sqs:*", "dynamodb:GetItem", true, false},
		{"arn:aws:dynamodb:r:1:table/t", "arn:aws:dynamodb:r:1:table/t/index/by_graph", false, false},
		{"arn:aws:dynamodb:r:1:table/t/index/*", "arn:aws:dynamodb:r:1:table/t/index/by_graph", false, true},
		{"arn:aws:dynamodb:r:1:table/T", "arn:aws:dynamodb:r:1:table/t", false, false},
		{"arn:aws:sqs:r:1:q-?", "arn:aws:sqs:r:1:q-1", false, true},
		{"a*b*c", "aXXbYYc", false, true},
		{"a*b*c", "aXXbYY", false, false},
		{"*", "", false, true},
	} {
		if got := wildcardMatch(tc.p, tc.s, tc.fold); got != tc.want {
			t.Errorf("wildcardMatch(%q, %q) = %v, want %v", tc.p, tc.s, got, tc.want)
		}
	}
}
