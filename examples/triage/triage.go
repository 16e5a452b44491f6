// Package triage is the "support-triage" example graph: a support ticket
// goes in, a reviewed reply (or an escalation to a person) comes out.
//
// Every node is deterministic and offline: keyword rules stand in for a
// classifier, a word list for a translation service and in-memory tables
// (see data.go) for the knowledge base and the customer database. The flow,
// one superstep per line but for the two marked:
//
//	detect_language  guess the ticket's language from common words
//	translate        turn the ticket into English; SKIPPED when it already is
//	classify         keyword rules pick a category and a priority
//	                 router: legal tickets go straight to escalate, others to research
//	research         choose the knowledge-base sections to search
//	search_kb ×N     FAN-OUT: one task per section, in parallel      } same
//	lookup_customer  fetch the customer's name and plan              } superstep
//	draft_reply      JOIN: waits for search_kb and lookup_customer
//	review           INTERRUPT: a person approves or rejects the draft
//	                 router: approved -> send_reply, rejected -> escalate
//	send_reply | escalate -> End
//
// With the CLI,
//
//	superstep run support-triage --input @examples/triage/input.json
//
// stops at review and shows the draft. Resuming with "approve" (or
// {"approved": true}) sends it; anything else, such as "reject" or
// {"approved": false, "note": "wrong article"}, escalates the ticket (see
// [Approval]). `make run` answers "approve".
package triage

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/superstep/superstep/pkg/pregel"
)

// Name is the name the graph is registered under.
const Name = "support-triage"

// State is the graph's state. Each field is a channel, named by its json
// tag. Without a `reduce` tag a write replaces the value; "append" and
// "merge" combine the writes of several nodes, which is what lets the
// parallel search_kb tasks all add their findings.
type State struct {
	// Ticket is the run's input.
	Ticket Ticket `json:"ticket"`
	// Message is a chat message (the text of an A2A message): the
	// ticket's body when the ticket has none.
	Message string `json:"message,omitempty"`

	Language       string         `json:"language,omitempty"`    // detect_language
	Translation    string         `json:"translation,omitempty"` // translate (empty when skipped)
	Classification Classification `json:"classification"`        // classify
	Sections       []string       `json:"sections,omitempty"`    // research
	Findings       []Finding      `json:"findings,omitempty" reduce:"append"`
	Customer       Customer       `json:"customer"`        // lookup_customer
	Draft          string         `json:"draft,omitempty"` // draft_reply
	Review         Approval       `json:"review"`          // review

	// Outcome is "sent" or "escalated"; Reply is the text sent to the
	// customer and Escalation says why a person must take over.
	Outcome    string `json:"outcome,omitempty"`
	Reply      string `json:"reply,omitempty"`
	Escalation string `json:"escalation,omitempty"`

	// Labels are the tags a helpdesk would attach to the ticket; several
	// nodes add to them.
	Labels map[string]string `json:"labels,omitempty" reduce:"merge"`
}

// Ticket is a customer's request.
type Ticket struct {
	ID      string `json:"id"`
	From    string `json:"from"` // the customer's email address
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// Classification is what classify decided.
type Classification struct {
	Category string   `json:"category,omitempty"` // billing, technical, account, legal or general
	Priority string   `json:"priority,omitempty"` // normal or urgent
	Keywords []string `json:"keywords,omitempty"` // the words that decided it
}

// Finding is a knowledge-base article that matches the ticket.
type Finding struct {
	Section string `json:"section"`
	Title   string `json:"title"`
	Answer  string `json:"answer"`
	Score   int    `json:"score"` // how many of the article's keywords the ticket has
}

// Customer is what the customer database knows about the sender.
type Customer struct {
	Name string `json:"name,omitempty"`
	Plan string `json:"plan,omitempty"` // free, pro or enterprise
}

// Text is the ticket in English: the translation when translate ran, the
// original otherwise. A skipped node writes nothing, so readers fall back.
func (s State) Text() string {
	if s.Translation != "" {
		return s.Translation
	}
	return s.Ticket.Subject + "\n" + s.body()
}

// body is the ticket's body, or the chat message when it has none.
func (s State) body() string {
	if s.Ticket.Body == "" {
		return s.Message
	}
	return s.Ticket.Body
}

// Graph builds and compiles the support-triage graph.
func Graph() (*pregel.Graph, error) {
	g := pregel.NewGraph[State](Name).
		Describe("Triage a support ticket: classify it, search the knowledge base, draft a reply and have a person approve it.").
		ValidateInput(validateInput)

	g.AddFunc("detect_language", detectLanguage, pregel.Writes("language", "labels"))
	g.AddNode("translate", translator{}, pregel.Writes("translation"))
	g.AddFunc("classify", classify, pregel.Writes("classification", "labels"))
	g.AddFunc("research", research, pregel.Writes("sections"))
	g.AddFunc("search_kb", searchKB, pregel.Writes("findings"))
	g.AddFunc("lookup_customer", lookupCustomer, pregel.Writes("customer", "labels"))
	g.AddFunc("draft_reply", draftReply, pregel.Writes("draft"))
	g.AddFunc("review", review, pregel.Writes("review"),
		pregel.Describe("Human review", "Pauses the run until a person approves or rejects the drafted reply."))
	g.AddFunc("send_reply", sendReply, pregel.Writes("outcome", "reply"))
	g.AddFunc("escalate", escalate, pregel.Writes("outcome", "escalation"))

	g.AddEdge(pregel.Start, "detect_language")
	g.AddEdge("detect_language", "translate")
	g.AddEdge("translate", "classify") // fires even when translate is skipped
	g.AddConditionalEdges("classify", afterClassify, "research", "escalate")
	g.AddFanOut("research", "search_kb", sectionsToSearch)
	g.AddEdge("research", "lookup_customer") // runs alongside the search_kb tasks
	g.AddJoin("draft_reply", "search_kb", "lookup_customer")
	g.AddEdge("draft_reply", "review")
	g.AddConditionalEdges("review", afterReview, "send_reply", "escalate")
	g.AddEdge("send_reply", pregel.End)
	g.AddEdge("escalate", pregel.End)
	return g.Compile()
}

// validateInput rejects a run whose ticket has nothing to triage.
func validateInput(s State) error {
	if strings.TrimSpace(s.Ticket.Subject+s.body()) == "" {
		return fmt.Errorf(`the ticket has neither subject nor body; give at least one, e.g. {"ticket": {"from": "ana@example.com", "body": "I was charged twice"}}, or a chat message {"message": "I was charged twice"}`)
	}
	return nil
}

// detectLanguage guesses the ticket's language by counting common words of
// each language it knows; English wins ties.
func detectLanguage(_ context.Context, s State) (State, error) {
	counts := map[string]int{}
	for _, w := range words(s.Ticket.Subject + " " + s.body()) {
		for lang, common := range commonWords {
			if slices.Contains(common, w) {
				counts[lang]++
			}
		}
	}
	lang := "en"
	for _, l := range slices.Sorted(maps.Keys(commonWords)) {
		if counts[l] > counts[lang] {
			lang = l
		}
	}
	return State{Language: lang, Labels: map[string]string{"language": lang}}, nil
}

// translator is the translate node. It is a type rather than a function
// because it implements pregel.Conditional: when ShouldExecute returns
// false the engine skips the node (status "skipped"). It writes nothing
// then, but its edge to classify still fires.
type translator struct{}

// ShouldExecute skips translation of a ticket that is already in English,
// as the sample ticket in input.json is.
func (translator) ShouldExecute(_ context.Context, s State) bool {
	return s.Language != "en"
}

// Execute translates word by word with a small glossary, which is enough
// for the keyword rules downstream.
func (translator) Execute(_ context.Context, s State) (State, error) {
	glossary := glossaries[s.Language]
	var out []string
	for _, w := range words(s.Ticket.Subject + " " + s.body()) {
		if en, ok := glossary[w]; ok {
			w = en
		}
		if w != "" {
			out = append(out, w)
		}
	}
	return State{Translation: strings.Join(out, " ")}, nil
}

// classify applies keyword rules: the category whose keywords the ticket
// mentions most wins (in the order of the categories table on ties).
func classify(_ context.Context, s State) (State, error) {
	text := words(s.Text())
	c := Classification{Category: "general", Priority: "normal"}
	best := 0
	for _, rule := range categories {
		var hits []string
		for _, k := range rule.keywords {
			if slices.Contains(text, k) {
				hits = append(hits, k)
			}
		}
		if len(hits) > best {
			best, c.Category, c.Keywords = len(hits), rule.name, hits
		}
	}
	for _, k := range urgentWords {
		if slices.Contains(text, k) {
			c.Priority = "urgent"
			c.Keywords = append(c.Keywords, k)
		}
	}
	return State{Classification: c, Labels: map[string]string{"category": c.Category, "priority": c.Priority}}, nil
}

// afterClassify is the router after classify: legal matters go to a person
// at once; everything else is researched.
func afterClassify(_ context.Context, s State) ([]string, error) {
	if s.Classification.Category == "legal" {
		return []string{"escalate"}, nil
	}
	return []string{"research"}, nil
}

// research chooses the knowledge-base sections worth searching.
func research(_ context.Context, s State) (State, error) {
	return State{Sections: sectionsFor(s.Classification.Category)}, nil
}

// sectionsToSearch is the fan-out after research: one search_kb task per
// section, each receiving its section name as its argument.
func sectionsToSearch(_ context.Context, s State) ([]any, error) {
	items := make([]any, len(s.Sections))
	for i, sec := range s.Sections {
		items[i] = sec
	}
	return items, nil
}

// searchKB is one fan-out task: it reads its section with pregel.Arg and
// scores that section's articles against the ticket. The findings of all
// tasks are appended together by the channel's reducer.
func searchKB(ctx context.Context, s State) (State, error) {
	section, err := pregel.Arg[string](ctx)
	if err != nil {
		return State{}, err
	}
	text := words(s.Text())
	// Not nil: a task that finds nothing writes [] (the append reducer
	// keeps a channel never written empty when the only update is null,
	// which draft_reply could not decode).
	found := []Finding{}
	for _, a := range knowledgeBase[section] {
		score := 0
		for _, k := range a.keywords {
			if slices.Contains(text, k) {
				score++
			}
		}
		if score > 0 {
			found = append(found, Finding{Section: section, Title: a.title, Answer: a.answer, Score: score})
		}
	}
	return State{Findings: found}, nil
}

// lookupCustomer finds the sender in the customer database.
func lookupCustomer(_ context.Context, s State) (State, error) {
	c, ok := customers[strings.ToLower(s.Ticket.From)]
	if !ok {
		c = Customer{Plan: "free"}
	}
	return State{Customer: c, Labels: map[string]string{"plan": c.Plan}}, nil
}

// draftReply runs once both search_kb and lookup_customer have finished
// (the join) and writes a reply from the best finding.
func draftReply(_ context.Context, s State) (State, error) {
	name := cmp.Or(s.Customer.Name, "there")
	var b strings.Builder
	fmt.Fprintf(&b, "Hi %s,\n\nThank you for contacting us about your %s question.", name, s.Classification.Category)
	if len(s.Findings) > 0 {
		best := slices.MaxFunc(s.Findings, func(x, y Finding) int {
			// Higher score wins; on a tie, the earlier section and title.
			return cmp.Or(cmp.Compare(x.Score, y.Score), cmp.Compare(y.Section, x.Section), cmp.Compare(y.Title, x.Title))
		})
		fmt.Fprintf(&b, " %s", best.Answer)
	} else {
		b.WriteString(" A specialist will look into it and get back to you.")
	}
	if s.Customer.Plan == "pro" || s.Customer.Plan == "enterprise" {
		fmt.Fprintf(&b, " As a %s customer, you can also reach us by phone at any time.", s.Customer.Plan)
	}
	b.WriteString("\n\nBest regards,\nThe support team")
	return State{Draft: b.String()}, nil
}

// ApprovalRequest is the payload of the review interrupt: what the
// reviewer sees while the run waits.
type ApprovalRequest struct {
	TicketID string `json:"ticket_id"`
	Category string `json:"category"`
	Priority string `json:"priority"`
	Draft    string `json:"draft"`
	Question string `json:"question"`
}

// review pauses the run until a person answers. The first time it runs,
// pregel.Interrupt returns an error that stops the run as "interrupted"
// with the ApprovalRequest visible; when the run is resumed with a value,
// review runs again and Interrupt returns that value as an Approval.
func review(ctx context.Context, s State) (State, error) {
	answer, err := pregel.Interrupt[Approval](ctx, ApprovalRequest{
		TicketID: s.Ticket.ID,
		Category: s.Classification.Category,
		Priority: s.Classification.Priority,
		Draft:    s.Draft,
		Question: `Send this reply? Resume with "approve" or {"approved": true}; "reject" or {"approved": false, "note": "why"} escalates the ticket.`,
	})
	if err != nil {
		return State{}, err
	}
	return State{Review: answer}, nil
}

// afterReview is the router after review.
func afterReview(_ context.Context, s State) ([]string, error) {
	if s.Review.Approved {
		return []string{"send_reply"}, nil
	}
	return []string{"escalate"}, nil
}

// sendReply sends the approved draft (here: records it as the reply).
func sendReply(_ context.Context, s State) (State, error) {
	return State{Outcome: "sent", Reply: s.Draft}, nil
}

// escalate hands the ticket to a person, saying why.
func escalate(_ context.Context, s State) (State, error) {
	reason := fmt.Sprintf("%s ticket: a specialist must answer (keywords: %s)",
		s.Classification.Category, strings.Join(s.Classification.Keywords, ", "))
	if s.Draft != "" { // reached from review: the reviewer said no
		reason = "the reviewer rejected the drafted reply"
		if s.Review.Note != "" {
			reason += ": " + s.Review.Note
		}
	}
	return State{Outcome: "escalated", Escalation: reason}, nil
}

// Approval is a reviewer's answer, as given when resuming the run, and
// the review channel's value. It
// accepts the forms a person or a client is likely to send:
//
//	"approve", "approved", "yes", "ok", true         -> approved
//	"reject", "rejected", "no", false                -> rejected
//	{"approved": true|false, "note": "..."}          -> as given
//	any other text                                   -> rejected, the text kept as the note
type Approval struct {
	Approved bool   `json:"approved"`
	Note     string `json:"note,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (a *Approval) UnmarshalJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case nil: // null leaves a as it is, like encoding/json does
	case bool:
		*a = Approval{Approved: v}
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "approve", "approved", "yes", "y", "ok", "lgtm":
			*a = Approval{Approved: true}
		case "reject", "rejected", "no", "n":
			*a = Approval{}
		default:
			*a = Approval{Note: v}
		}
	case map[string]any:
		type plain Approval // without this method, to avoid recursion
		var p plain
		if err := json.Unmarshal(data, &p); err != nil {
			return fmt.Errorf(`approval: want {"approved": true|false, "note": "..."}: %w`, err)
		}
		*a = Approval(p)
	default:
		return fmt.Errorf(`approval: want "approve", "reject", true, false or {"approved": true|false, "note": "..."}, got %s`, data)
	}
	return nil
}

// words splits text into lower-case words, dropping punctuation.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '\''
	})
}
