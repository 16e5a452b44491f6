package triage

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// wantReply is the reply to the sample ticket in input.json.
const wantReply = "Hi Ana,\n\n" +
	"Thank you for contacting us about your billing question. " +
	"I am sorry you were charged twice: the duplicate payment has been flagged and will be refunded to your card within 5 business days. " +
	"As a pro customer, you can also reach us by phone at any time.\n\n" +
	"Best regards,\nThe support team"

func compiled(t *testing.T) *pregel.Graph {
	t.Helper()
	g, err := Graph()
	if err != nil {
		t.Fatalf("Graph: %v", err)
	}
	return g
}

func sampleInput(t *testing.T) json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile("input.json")
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func decode(t *testing.T, res *pregel.Result) State {
	t.Helper()
	var s State
	if err := res.Decode(&s); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return s
}

// history returns node -> the statuses of its tasks over the run's
// committed steps.
func history(t *testing.T, store pregel.Checkpointer, runID string) map[string][]pregel.NodeStatus {
	t.Helper()
	steps, err := store.History(context.Background(), runID)
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	out := map[string][]pregel.NodeStatus{}
	for _, st := range steps {
		for _, task := range st.Tasks {
			out[task.Node] = append(out[task.Node], task.Status)
		}
	}
	return out
}

// recorder is an Observer that keeps the status of every finished task.
type recorder struct {
	mu       sync.Mutex
	finished map[string][]pregel.NodeStatus
}

func (r *recorder) observe(ev pregel.Event) {
	if ev.Type != pregel.EventNodeFinished {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished == nil {
		r.finished = map[string][]pregel.NodeStatus{}
	}
	r.finished[ev.Node] = append(r.finished[ev.Node], ev.Status)
}

func (r *recorder) statuses() map[string][]pregel.NodeStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.finished)
}

func repeat(s pregel.NodeStatus, n int) []pregel.NodeStatus {
	out := make([]pregel.NodeStatus, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// The sample ticket from input.json, end to end: the run pauses for review
// with the draft visible, then completes when the reviewer approves.
func TestSampleTicketApproved(t *testing.T) {
	ctx := context.Background()
	g := compiled(t)
	store := pregel.NewMemoryStore()
	rec := &recorder{}

	res, err := g.Run(ctx, sampleInput(t), pregel.WithStore(store), pregel.WithRunID("t1"), pregel.WithObserver(rec.observe))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status != pregel.RunInterrupted || len(res.Interrupts) != 1 {
		t.Fatalf("Run: status %s with %d interrupt(s), want interrupted with 1", res.Status, len(res.Interrupts))
	}
	in := res.Interrupts[0]
	if in.Node != "review" {
		t.Errorf("interrupted node = %q, want review", in.Node)
	}
	var ask ApprovalRequest
	if err := json.Unmarshal(in.Value, &ask); err != nil {
		t.Fatalf("interrupt payload %s: %v", in.Value, err)
	}
	if ask.TicketID != "T-1042" || ask.Category != "billing" || ask.Draft != wantReply || !strings.Contains(ask.Question, "approve") {
		t.Errorf("interrupt payload = %+v", ask)
	}
	if s := decode(t, res); s.Outcome != "" || s.Reply != "" {
		t.Errorf("before review: outcome %q, reply %q; want neither", s.Outcome, s.Reply)
	}

	// Statuses while paused, from the store and from the observer.
	want := map[string][]pregel.NodeStatus{
		"detect_language": {pregel.NodeCompleted},
		"translate":       {pregel.NodeSkipped}, // the ticket is in English
		"classify":        {pregel.NodeCompleted},
		"research":        {pregel.NodeCompleted},
		"search_kb":       repeat(pregel.NodeCompleted, 3), // one task per billing section
		"lookup_customer": {pregel.NodeCompleted},
		"draft_reply":     {pregel.NodeCompleted},
	}
	if got := history(t, store, "t1"); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("history while paused = %v, want %v", got, want)
	}
	want["review"] = []pregel.NodeStatus{pregel.NodeInterrupted} // not committed, but observed
	if got := rec.statuses(); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("observed while paused = %v, want %v", got, want)
	}

	res, err = g.Resume(ctx, "t1", pregel.WithStore(store), pregel.WithResume("approve"))
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if res.Status != pregel.RunCompleted {
		t.Fatalf("Resume: status %s, want completed", res.Status)
	}
	s := decode(t, res)
	if s.Outcome != "sent" || s.Reply != wantReply || !s.Review.Approved {
		t.Errorf("final state: outcome %q, review %+v, reply\n%s\nwant sent, approved, reply\n%s", s.Outcome, s.Review, s.Reply, wantReply)
	}
	if wantLabels := map[string]string{"language": "en", "category": "billing", "priority": "normal", "plan": "pro"}; !maps.Equal(s.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", s.Labels, wantLabels)
	}
	// The fan-out searched every section research chose, in parallel.
	var searched []string
	for _, f := range s.Findings {
		if !slices.Contains(searched, f.Section) {
			searched = append(searched, f.Section)
		}
	}
	if !slices.Equal(searched, s.Sections) {
		t.Errorf("findings come from sections %v, want all of %v", searched, s.Sections)
	}
	if want := (pregel.Counters{Completed: 10, Skipped: 1}); res.Counters != want {
		t.Errorf("counters = %+v, want %+v", res.Counters, want)
	}

	want["review"] = []pregel.NodeStatus{pregel.NodeCompleted}
	want["send_reply"] = []pregel.NodeStatus{pregel.NodeCompleted}
	if got := history(t, store, "t1"); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("history after approval = %v, want %v (nothing before review runs again)", got, want)
	}
}

// The reviewer's answer decides the route after review.
func TestReviewAnswers(t *testing.T) {
	tests := []struct {
		name           string
		answer         any
		wantOutcome    string
		wantEscalation string
	}{
		{"word approve", "approve", "sent", ""},
		{"object approved", map[string]any{"approved": true}, "sent", ""},
		{"bool true", true, "sent", ""},
		{"word reject", "reject", "escalated", "the reviewer rejected the drafted reply"},
		{"object rejected with note", map[string]any{"approved": false, "note": "wrong article"}, "escalated", "the reviewer rejected the drafted reply: wrong article"},
		{"bool false", false, "escalated", "the reviewer rejected the drafted reply"},
		{"free text is feedback", "Mention the invoice number", "escalated", "the reviewer rejected the drafted reply: Mention the invoice number"},
	}
	g := compiled(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := pregel.NewMemoryStore()
			res, err := g.Run(ctx, sampleInput(t), pregel.WithStore(store), pregel.WithRunID("r"))
			if err != nil || res.Status != pregel.RunInterrupted {
				t.Fatalf("Run = %s, %v; want interrupted", res.Status, err)
			}
			res, err = g.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume(tt.answer))
			if err != nil || res.Status != pregel.RunCompleted {
				t.Fatalf("Resume = %+v, %v; want completed", res, err)
			}
			s := decode(t, res)
			if s.Outcome != tt.wantOutcome || s.Escalation != tt.wantEscalation {
				t.Errorf("outcome %q, escalation %q; want %q, %q", s.Outcome, s.Escalation, tt.wantOutcome, tt.wantEscalation)
			}
			if (s.Reply != "") != (tt.wantOutcome == "sent") {
				t.Errorf("reply %q with outcome %q", s.Reply, s.Outcome)
			}
			ran := history(t, store, "r")
			wantNext, notNext := "send_reply", "escalate"
			if tt.wantOutcome == "escalated" {
				wantNext, notNext = notNext, wantNext
			}
			if !slices.Equal(ran[wantNext], []pregel.NodeStatus{pregel.NodeCompleted}) || ran[notNext] != nil {
				t.Errorf("after review: %s ran %v, %s ran %v; want only %s", wantNext, ran[wantNext], notNext, ran[notNext], wantNext)
			}
		})
	}
}

// Different tickets take different paths through the graph.
func TestTickets(t *testing.T) {
	tests := []struct {
		name          string
		ticket        Ticket
		message       string // a chat message instead of (or besides) the ticket
		wantStatus    pregel.RunStatus
		wantLanguage  string
		wantTranslate pregel.NodeStatus
		wantCategory  string
		wantPriority  string
		wantSections  []string
		wantDraft     string // a part of the draft; "" when none is drafted
		wantOutcome   string
	}{
		{
			name:   "English billing ticket (the sample)",
			ticket: Ticket{ID: "T-1042", From: "ana@example.com", Subject: "Charged twice this month", Body: "I was charged twice for my subscription. Can you refund the duplicate payment?"},
			// Waits for review; TestSampleTicketApproved continues it.
			wantStatus: pregel.RunInterrupted, wantLanguage: "en", wantTranslate: pregel.NodeSkipped,
			wantCategory: "billing", wantPriority: "normal",
			wantSections: []string{"billing/refunds", "billing/invoices", "billing/plans"},
			wantDraft:    "Hi Ana,\n\nThank you for contacting us about your billing question. I am sorry you were charged twice",
		},
		{
			name:       "Spanish billing ticket is translated first",
			ticket:     Ticket{ID: "T-2001", From: "bruno@example.com", Subject: "Factura", Body: "Me han cobrado dos veces mi suscripción. Por favor, quiero un reembolso de la factura."},
			wantStatus: pregel.RunInterrupted, wantLanguage: "es", wantTranslate: pregel.NodeCompleted,
			wantCategory: "billing", wantPriority: "normal",
			wantSections: []string{"billing/refunds", "billing/invoices", "billing/plans"},
			wantDraft:    "Hi Bruno,\n\nThank you for contacting us about your billing question. I am sorry you were charged twice",
		},
		{
			name:       "urgent French account ticket",
			ticket:     Ticket{ID: "T-2002", From: "chen@example.com", Body: "Je ne peux pas me connecter à mon compte, le mot de passe est refusé. C'est urgent !"},
			wantStatus: pregel.RunInterrupted, wantLanguage: "fr", wantTranslate: pregel.NodeCompleted,
			wantCategory: "account", wantPriority: "urgent",
			wantSections: []string{"account/access", "account/settings"},
			wantDraft:    "Hi Chen,\n\nThank you for contacting us about your account question. You can reset your password",
		},
		{
			name:       "technical ticket from an unknown sender",
			ticket:     Ticket{ID: "T-2003", From: "someone@elsewhere.org", Subject: "Error 500", Body: "The app crashes with error 500 when saving."},
			wantStatus: pregel.RunInterrupted, wantLanguage: "en", wantTranslate: pregel.NodeSkipped,
			wantCategory: "technical", wantPriority: "normal",
			wantSections: []string{"technical/errors", "technical/performance", "general/status"},
			wantDraft:    "Hi there,\n\nThank you for contacting us about your technical question. Error 500 on save is a known issue",
		},
		{
			name:       "a chat message without a ticket is the ticket's body",
			message:    "I was charged twice for my subscription. Can you refund the duplicate payment?",
			wantStatus: pregel.RunInterrupted, wantLanguage: "en", wantTranslate: pregel.NodeSkipped,
			wantCategory: "billing", wantPriority: "normal",
			wantSections: []string{"billing/refunds", "billing/invoices", "billing/plans"},
			wantDraft:    "Hi there,\n\nThank you for contacting us about your billing question. I am sorry you were charged twice",
		},
		{
			name:       "a general message that matches no article",
			message:    "Hello from a chat client!",
			wantStatus: pregel.RunInterrupted, wantLanguage: "en", wantTranslate: pregel.NodeSkipped,
			wantCategory: "general", wantPriority: "normal",
			wantSections: []string{"general/faq"},
			wantDraft:    "Hi there,",
		},
		{
			name:       "legal ticket is escalated without review",
			ticket:     Ticket{ID: "T-2004", From: "ana@example.com", Subject: "GDPR request", Body: "My lawyer asks for all the data you hold about me."},
			wantStatus: pregel.RunCompleted, wantLanguage: "en", wantTranslate: pregel.NodeSkipped,
			wantCategory: "legal", wantPriority: "normal",
			wantOutcome: "escalated",
		},
	}
	g := compiled(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := pregel.NewMemoryStore()
			res, err := g.Run(context.Background(), State{Ticket: tt.ticket, Message: tt.message}, pregel.WithStore(store), pregel.WithRunID("r"))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Status != tt.wantStatus {
				t.Fatalf("status %s, want %s", res.Status, tt.wantStatus)
			}
			s := decode(t, res)
			if s.Language != tt.wantLanguage || s.Classification.Category != tt.wantCategory || s.Classification.Priority != tt.wantPriority {
				t.Errorf("language %q, classification %+v; want %q, %s/%s", s.Language, s.Classification, tt.wantLanguage, tt.wantCategory, tt.wantPriority)
			}
			if (s.Translation != "") != (tt.wantTranslate == pregel.NodeCompleted) {
				t.Errorf("translation %q with translate %s", s.Translation, tt.wantTranslate)
			}
			if !slices.Equal(s.Sections, tt.wantSections) {
				t.Errorf("sections %v, want %v", s.Sections, tt.wantSections)
			}
			if !strings.HasPrefix(s.Draft, tt.wantDraft) || (tt.wantDraft == "") != (s.Draft == "") {
				t.Errorf("draft\n%s\nwant it to start with\n%s", s.Draft, tt.wantDraft)
			}
			if s.Outcome != tt.wantOutcome {
				t.Errorf("outcome %q, want %q", s.Outcome, tt.wantOutcome)
			}
			ran := history(t, store, "r")
			if got := ran["translate"]; !slices.Equal(got, []pregel.NodeStatus{tt.wantTranslate}) {
				t.Errorf("translate: %v, want %s", got, tt.wantTranslate)
			}
			if got := ran["search_kb"]; !slices.Equal(got, repeat(pregel.NodeCompleted, len(tt.wantSections))) {
				t.Errorf("search_kb tasks: %v, want %d completed", got, len(tt.wantSections))
			}
		})
	}
}

func TestInvalidInput(t *testing.T) {
	_, err := compiled(t).Run(context.Background(), State{Ticket: Ticket{ID: "T-0", From: "ana@example.com"}})
	if !errors.Is(err, pregel.ErrInvalidInput) || !strings.Contains(err.Error(), "neither subject nor body") {
		t.Errorf("Run with an empty ticket: %v, want an ErrInvalidInput saying what is missing", err)
	}
}

func TestApprovalUnmarshal(t *testing.T) {
	tests := []struct {
		in      string
		want    Approval
		wantErr bool
	}{
		{in: `"approve"`, want: Approval{Approved: true}},
		{in: `" Approved "`, want: Approval{Approved: true}},
		{in: `"yes"`, want: Approval{Approved: true}},
		{in: `true`, want: Approval{Approved: true}},
		{in: `{"approved": true}`, want: Approval{Approved: true}},
		{in: `{"approved": true, "note": "nice"}`, want: Approval{Approved: true, Note: "nice"}},
		{in: `"reject"`, want: Approval{}},
		{in: `false`, want: Approval{}},
		{in: `{"approved": false, "note": "too curt"}`, want: Approval{Note: "too curt"}},
		{in: `"too curt"`, want: Approval{Note: "too curt"}},
		{in: `null`, want: Approval{}},
		{in: `42`, wantErr: true},
		{in: `{"approved": "maybe"}`, wantErr: true},
	}
	for _, tt := range tests {
		var got Approval
		err := json.Unmarshal([]byte(tt.in), &got)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// A ticket that matches no knowledge-base article: every search_kb task
// finds nothing, the draft says so and the run still reaches review and
// completes once approved.
func TestTicketWithoutFindings(t *testing.T) {
	ctx := context.Background()
	g := compiled(t)
	store := pregel.NewMemoryStore()
	input := json.RawMessage(`{"ticket":{"id":"T-1","from":"a@b.c","subject":"Hello","body":"Question"}}`)
	res, err := g.Run(ctx, input, pregel.WithStore(store), pregel.WithRunID("t"))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status != pregel.RunInterrupted || len(res.Interrupts) != 1 || res.Interrupts[0].Node != "review" {
		t.Fatalf("Run: status %s, interrupts %+v; want interrupted at review", res.Status, res.Interrupts)
	}
	s := decode(t, res)
	if len(s.Findings) != 0 || s.Draft == "" {
		t.Errorf("findings %+v, draft %q; want no findings and a draft", s.Findings, s.Draft)
	}
	if got := history(t, store, "t")["search_kb"]; len(got) == 0 || slices.ContainsFunc(got, func(st pregel.NodeStatus) bool { return st != pregel.NodeCompleted }) {
		t.Errorf("search_kb tasks: %v, want all completed", got)
	}
	res, err = g.Resume(ctx, "t", pregel.WithStore(store), pregel.WithResume("approve"))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("Resume = %s, %v; want completed", res.Status, err)
	}
	if s := decode(t, res); s.Outcome != "sent" || s.Reply == "" {
		t.Errorf("outcome %q, reply %q; want sent with a reply", s.Outcome, s.Reply)
	}
}
