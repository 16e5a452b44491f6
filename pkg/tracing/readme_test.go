package tracing_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/superstep/superstep/examples/triage"
	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// spanRow is one row of README.md's span table: the span name's first
// word and the attributes (with their value, when the row gives one).
type spanRow struct {
	name  string
	attrs map[string]string
}

var (
	tick     = regexp.MustCompile("`([^`]+)`")
	attrLike = regexp.MustCompile(`^(gen_ai|superstep|messaging|error)(\.[a-z_]+)+(=[^ ]+)?$`)
)

// readmeRows parses the table of README.md's "The spans" section, and the
// attributes its first paragraph says superstep's own spans carry.
func readmeRows(t *testing.T) (rows []spanRow, base []string) {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(b)
	i := strings.Index(sec, "## The spans")
	if i < 0 {
		t.Fatal(`README.md has no "## The spans" section`)
	}
	sec = sec[i:]
	para, _, _ := strings.Cut(sec[len("## The spans"):], "\n| span |")
	for _, m := range tick.FindAllStringSubmatch(para, -1) {
		if attrLike.MatchString(m[1]) && strings.HasPrefix(m[1], "superstep.") {
			base = append(base, m[1])
		}
	}
	for line := range strings.SplitSeq(sec, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, " | ")
		if len(cells) != 3 {
			t.Fatalf("table row with %d cells: %s", len(cells), line)
		}
		name := strings.Fields(tick.FindStringSubmatch(cells[0])[1])[0]
		row := spanRow{name: name, attrs: map[string]string{}}
		for _, m := range tick.FindAllStringSubmatch(cells[2], -1) {
			if !attrLike.MatchString(m[1]) {
				continue
			}
			k, v, _ := strings.Cut(m[1], "=")
			row.attrs[k] = v
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 || len(base) == 0 {
		t.Fatalf("README.md's span table: %d rows, base attributes %v", len(rows), base)
	}
	return rows, base
}

// TestREADMETables runs what the table describes (agent runs on the
// embedded scheduler with content capture on, a model that fails, a tool
// that fails, an approval; engine runs of the triage example, a failing
// and a draining graph; a serverless tick) and checks the spans against
// README.md: every span has a row, every attribute it carries is in its
// row (or is one of the attributes all of superstep's spans carry), with
// the row's value when it gives one, and every attribute of a row is
// carried by some span.
func TestREADMETables(t *testing.T) {
	t.Setenv(agent.CaptureContentEnv, "true")
	rows, base := readmeRows(t)
	r := newRecorder()
	ctx := context.Background()

	// Agents on the scheduler.
	temp := 0.2
	tools := []agent.Tool{
		agent.MustTool("lookup", "Looks an order up", func(_ context.Context, in struct{ Order string }) (string, error) { return "paid twice", nil }),
		agent.MustTool("refund", "Refunds an order", func(_ context.Context, in struct{ Order string }) (string, error) { return "refunded", nil }),
		agent.MustTool("broken", "Fails", func(_ context.Context, in struct{ Order string }) (string, error) {
			return "", errors.New("the backend is down")
		}),
	}
	call := func(id, name string) agent.Block {
		return agent.Block{ToolCall: &agent.ToolCall{ID: id, Name: name, Input: json.RawMessage(`{"Order": "A-1"}`)}}
	}
	good, err := agent.New(agent.Config{Name: "good-agent", System: "Be brief.", MaxTokens: 256, Temperature: &temp, Tools: tools, Approve: []string{"refund"},
		Model: bedrockModel{agent.ScriptedTurns(
			agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{call("c1", "lookup"), call("c2", "refund"), call("c3", "broken")}},
				StopReason: agent.StopToolUse, Usage: agent.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 50, CacheWriteTokens: 10}},
			agent.Response{Message: agent.AssistantText("Done."), StopReason: agent.StopEndTurn, Usage: agent.Usage{InputTokens: 150, OutputTokens: 5}},
		)}})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := agent.New(agent.Config{Name: "bad-agent", Generate: true, Model: bedrockModel{&agent.Scripted{Reply: func(context.Context, *agent.Request) (*agent.Response, error) {
		return nil, &agent.ModelError{Code: "ValidationException", Message: "no such model"}
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	svc := service(t, r, "memory", []*pregel.Graph{good, bad})
	if _, _, err := svc.CreateThread(t.Context(), runs.CreateThreadRequest{ThreadID: "readme"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateOnThread(t.Context(), "readme", runs.ThreadRunRequest{Graph: "good-agent", RunID: "good", Input: agent.TextInput("refund A-1")}); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, "good", pregel.RunInterrupted)
	if _, err := svc.Resume(t.Context(), "good", runs.ResumeRequest{Value: json.RawMessage(`"approve"`)}); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, "good", pregel.RunCompleted)
	if _, _, err := svc.Create(t.Context(), "bad-agent", runs.CreateRequest{RunID: "bad", Input: agent.TextInput("hi")}); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, "bad", pregel.RunFailed)

	// Engine runs: the triage example (skips, fan-out, interrupt), a
	// failure, a drain.
	tg, err := triage.Graph()
	if err != nil {
		t.Fatal(err)
	}
	store := pregel.NewMemoryStore()
	in := []byte(`{"ticket": {"id": "T-1", "from": "ana@example.com", "subject": "Refund", "body": "I was charged twice for my invoice"}}`)
	res, err := tg.Run(ctx, in, append(r.Options(ctx), pregel.WithStore(store))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Resume(ctx, res.RunID, append(r.Options(ctx), pregel.WithStore(store), pregel.WithResume("approve"))...); err != nil {
		t.Fatal(err)
	}
	type S struct {
		N int `json:"n"`
	}
	fb := pregel.NewGraph[S]("fails")
	fb.AddFunc("boom", func(context.Context, S) (S, error) { return S{}, errors.New("the disk is full") })
	fb.AddEdge(pregel.Start, "boom").AddEdge("boom", pregel.End)
	db := pregel.NewGraph[S]("drains")
	db.AddFunc("one", func(ctx context.Context, s S) (S, error) { pregel.RequestDrain(ctx, "deploy v2"); return S{N: 1}, nil })
	db.AddFunc("two", func(context.Context, S) (S, error) { return S{N: 2}, nil })
	db.AddEdge(pregel.Start, "one").AddEdge("one", "two").AddEdge("two", pregel.End)
	for _, b := range []*pregel.Builder[S]{fb, db} {
		g, err := b.Compile()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = g.Run(ctx, nil, r.Options(ctx)...)
	}

	// A serverless tick: its span, from the SQS record, as the tick
	// handler starts it.
	run := runs.Run{ID: "tick-run", Graph: "fails", ContextID: "readme", GraphVersion: &pregel.Stamp{Version: "v2", Fingerprint: "0123456789abcdef"}}
	_, end := r.Tracer.StartRun(ctx, &run)
	end(nil)
	msg := events.SQSMessage{MessageId: "m-1", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:app-ticks.fifo",
		MessageAttributes: map[string]events.SQSMessageAttribute{}}
	for k, v := range r.Tracer.MessageAttributes(ctx) {
		msg.MessageAttributes[k] = events.SQSMessageAttribute{DataType: "String", StringValue: aws.String(*v.StringValue)}
	}
	tctx, tend := r.Tracer.StartTick(r.Tracer.FromMessage(ctx, msg), run, 1, time.Time{})
	r.Tracer.Annotate(tctx, 1, string(pregel.RunFailed))
	run.Status, run.Step, run.Error, run.FailedNode = pregel.RunFailed, 0, "node failed", "boom"
	r.Tracer.EndRun(tctx, run)
	tend(nil)

	checkREADME(t, rows, base, r.rec.Ended())
}

func checkREADME(t *testing.T, rows []spanRow, base []string, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	seen := map[string]map[string]bool{}
	for _, s := range spans {
		word := strings.Fields(s.Name())[0]
		i := slices.IndexFunc(rows, func(r spanRow) bool { return r.name == word })
		if i < 0 {
			t.Errorf("span %q has no row in README.md's table", s.Name())
			continue
		}
		row := rows[i]
		if seen[row.name] == nil {
			seen[row.name] = map[string]bool{}
		}
		own := !strings.HasPrefix(word, "chat") && word != "execute_tool"
		for _, kv := range s.Attributes() {
			k := string(kv.Key)
			seen[row.name][k] = true
			want, ok := row.attrs[k]
			if !ok && !(own && slices.Contains(base, k)) {
				t.Errorf("span %q carries %s, which README.md's row of %s does not list", s.Name(), k, row.name)
			}
			if want != "" && kv.Value.String() != want {
				t.Errorf("span %q: %s=%s, README.md says %s", s.Name(), k, kv.Value.String(), want)
			}
		}
	}
	for _, row := range rows {
		for k := range row.attrs {
			if !seen[row.name][k] {
				t.Errorf("README.md lists %s on %s spans; no span of the test carried it", k, row.name)
			}
		}
	}
}
