package inspector_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/superstep/superstep/pkg/pregel"
)

// fill sets a form field's value and fires its input event, as typing
// does.
func (b *browser) fill(sel, v string) {
	b.t.Helper()
	read(b, "fill "+sel, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.value = %q; e.dispatchEvent(new Event('input')); return true })()`, sel, v)))
}

// text returns the text of the first element sel matches ("" if none).
func (b *browser) text(sel string) string {
	b.t.Helper()
	return read(b, "read "+sel, chromedp.Evaluate[string](fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent : '' })()`, sel)))
}

// waitText waits until the element sel matches contains want.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	read(b, fmt.Sprintf("wait for %q in %s", want, sel), chromedp.Poll[bool](fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q) })()`, sel, want)))
}

// send types a message in the chat box and sends it.
func (b *browser) send(msg string) {
	b.t.Helper()
	b.run("send "+msg, setValue(`#chat-input`, msg), chromedp.Click(chromedp.CSS(`#chat-submit`)))
}

// TestChatInBrowser holds a conversation with the assistant on a thread in
// the inspector's chat view: a first turn answered, then refunds that wait
// for approval (a refused answer with its reason, arguments edited and
// checked against the tool's schema, a rejection with a reason, an
// approval), the answers in the run's history, a fork from step 1 and an
// edit of the fork's state; the start form generated from a graph's input
// schema, plain text for an agent, and the favicon.
func TestChatInBrowser(t *testing.T) {
	srv, svc := devServer(t)
	b := newBrowser(t)
	ctx := context.Background()

	b.run("open the threads", chromedp.Navigate(srv.URL+"/#/threads"), chromedp.WaitVisible(chromedp.CSS(`#token-input`)))
	b.run("give the token", chromedp.SendKeys(chromedp.CSS(`#token-input`), token), chromedp.Click(chromedp.CSS(`#token-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#new-thread`)))
	b.run("create a thread", setValue(`#new-thread-id`, "chat-1"), chromedp.Click(chromedp.CSS(`#create-thread`)),
		chromedp.WaitVisible(chromedp.CSS(`#thread-id`)))
	if got := b.text(`#thread-id`); got != "chat-1" {
		t.Fatalf("the chat view shows thread %q, want chat-1", got)
	}
	if got := read(b, "read the graph", chromedp.Evaluate[string](`document.querySelector('#chat-graph').value`)); got != "assistant" {
		t.Errorf("the chat's graph is %q, want assistant (the graph that takes text)", got)
	}

	// Turn 1: a question answered with a tool call, folded.
	b.send("Where is my order A-1002?")
	b.waitText(`#chat`, "Here is what I found. A-1002")
	b.waitText(`#thread-status`, "idle")
	if n := read(b, "count tool calls", chromedp.Evaluate[int](`document.querySelectorAll('#chat details.tool-call[data-tool="lookup_order"]:not([open])').length`)); n != 1 {
		t.Errorf("turn 1 shows %d folded lookup_order calls, want 1", n)
	}
	b.waitText(`#thread-usage`, "total")
	b.shot("20-chat-turn1")
	b.clean("turn 1")

	// Turn 2: a refund waits for approval.
	b.send("Please refund order A-1001, it arrived broken.")
	b.run("wait for the approval", chromedp.WaitVisible(chromedp.CSS(`#approvals .approval button.approve`)))
	b.waitText(`#approvals .tool-args`, `"cents": 4500`)
	b.shot("21-chat-approval")
	thread, err := svc.GetThread(ctx, "chat-1")
	if err != nil || thread.Active == "" {
		t.Fatalf("thread chat-1: %+v, %v", thread, err)
	}
	refundRun := thread.Active

	// An answer the agent cannot use: refused, and the page says why.
	b.run("answer with an unknown decision", chromedp.Click(chromedp.CSS(`#approvals details.other-answer summary`)),
		setValue(`#approvals textarea.answer`, `{"decision": "maybe"}`), chromedp.Click(chromedp.CSS(`#approvals #answer`)))
	b.waitText(`#approvals .refused`, `the decision "maybe" is not approve, edit or reject`)
	b.shot("22-chat-refused")
	b.clean("refused answer")

	// Edited arguments that do not fit the tool's schema: nothing sent.
	before, err := svc.Get(ctx, refundRun)
	if err != nil {
		t.Fatal(err)
	}
	b.run("open the editor", chromedp.Click(chromedp.CSS(`#approvals button.edit`)), chromedp.WaitVisible(chromedp.CSS(`#approvals textarea.edit-args`)))
	if got := read(b, "read the prefilled arguments", chromedp.Evaluate[string](`document.querySelector('#approvals textarea.edit-args').value`)); !strings.Contains(got, `"order_id": "A-1001"`) || !strings.Contains(got, `"cents": 4500`) {
		t.Errorf("the editor is prefilled with %q, want the call's arguments", got)
	}
	b.run("send arguments of the wrong type", setValue(`#approvals textarea.edit-args`, `{"order_id": "A-1001", "cents": "lots", "reason": "broken", "tip": 1}`),
		chromedp.Click(chromedp.CSS(`#approvals button.send-edit`)))
	b.expectError(`"cents" must be integer, not string`)
	b.expectError(`"tip" is not an argument of this tool`)
	b.shot("23-chat-edit-invalid")
	if after, err := svc.Get(ctx, refundRun); err != nil || after.Status != pregel.RunInterrupted || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("after arguments the page refused, the run is %s (err %v), want it unchanged", after.Status, err)
	}
	b.run("send edited arguments", setValue(`#approvals textarea.edit-args`, `{"order_id": "A-1001", "cents": 2000, "reason": "broken spout"}`),
		chromedp.Click(chromedp.CSS(`#approvals button.send-edit`)))
	b.waitText(`#chat`, "Done: refunded 20.00 on order A-1001 (broken spout).")
	b.waitText(`#chat details.tool-call[data-tool="refund"]`, "done (edited)")
	b.shot("24-chat-edited")
	read(b, "clear the error", chromedp.Evaluate[bool](`(() => { document.querySelector('#error').hidden = true; return true })()`))
	b.clean("edited")

	// Turn 3: rejected with a reason; turn 4: approved.
	b.send("Refund the rest of A-1001 as well.")
	b.run("wait for the approval", chromedp.WaitVisible(chromedp.CSS(`#approvals .approval button.reject`)))
	b.waitText(`#approvals .tool-args`, `"cents": 2500`)
	b.run("reject", setValue(`#approvals input.reject-reason`, "ask a manager first"), chromedp.Click(chromedp.CSS(`#approvals button.reject`)))
	b.waitText(`#chat`, "The refund did not go through")
	b.waitText(`#chat`, "ask a manager first")
	b.send("The manager agrees: refund A-1001.")
	b.run("wait for the approval", chromedp.WaitVisible(chromedp.CSS(`#approvals .approval button.approve`)))
	b.run("approve", chromedp.Click(chromedp.CSS(`#approvals button.approve`)))
	b.waitText(`#chat`, "Done: refunded 25.00 on order A-1001 (customer request).")
	b.waitText(`#thread-status`, "idle")
	b.waitText(`#thread-storage`, " runs")
	b.shot("25-chat-four-turns")
	b.clean("four turns")

	// The answers given are in the run's history.
	b.run("open the refund run", chromedp.Navigate(srv.URL+"/#/runs/"+refundRun), chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="completed"]`)))
	b.waitText(`#events`, `answer: {"decision":"maybe"}`)
	b.waitText(`#events`, `answer: {"decision":"edit","input":{"order_id":"A-1001","cents":2000,"reason":"broken spout"}}`)
	b.shot("26-run-history-answers")
	b.clean("run history")

	// Fork from step 1 of the first run: the new thread holds the first
	// question and the model's lookup, not what came after.
	b.run("back to the thread", chromedp.Navigate(srv.URL+"/#/threads/chat-1"), chromedp.WaitVisible(chromedp.CSS(`#thread-history tr[data-step="1"]`)))
	steps := read(b, "count history rows", chromedp.Evaluate[int](`document.querySelectorAll('#thread-history tr[data-step]').length`))
	if steps < 8 {
		t.Errorf("the history shows %d steps, want every step of the four runs", steps)
	}
	read(b, "fork from step 1 of the first run", chromedp.Evaluate[bool](`(() => { const rows = document.querySelectorAll('#thread-history tr[data-step="1"]'); rows[rows.length - 1].querySelector('button.fork').click(); return true })()`))
	read(b, "wait for the fork", chromedp.Poll[bool](`(() => { const e = document.querySelector('#thread-id'); return !!e && e.textContent !== 'chat-1' && location.hash.startsWith('#/threads/') })()`))
	b.waitText(`#thread-header`, "forked from chat-1")
	b.waitText(`#chat`, "Where is my order A-1002?")
	if chat := b.text(`#chat`); strings.Contains(chat, "A-1001") || strings.Contains(chat, "Here is what I found") {
		t.Errorf("the fork from step 1 shows later messages:\n%s", chat)
	}
	b.shot("27-fork")

	// Edit the fork's state as the model: the message shows, and the
	// original thread is unchanged.
	b.run("edit state", setValue(`#edit-as-node`, "model"),
		setValue(`#edit-values`, `{"messages": [{"role": "assistant", "content": [{"text": "Edited: A-1002 ships tomorrow."}]}]}`),
		chromedp.Click(chromedp.CSS(`#edit-submit`)))
	b.waitText(`#chat`, "Edited: A-1002 ships tomorrow.")
	b.shot("28-fork-edited")
	b.clean("fork edited")
	st, err := svc.State(ctx, "chat-1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(st.Values["messages"]), "Edited:") {
		t.Errorf("editing the fork changed chat-1")
	}

	// The threads list shows both.
	b.run("open the threads list", chromedp.Navigate(srv.URL+"/#/threads"), chromedp.WaitVisible(chromedp.CSS(`#threads tr[data-thread="chat-1"]`)))
	if n := read(b, "count threads", chromedp.Evaluate[int](`document.querySelectorAll('#threads tr[data-thread]').length`)); n != 2 {
		t.Errorf("the threads list shows %d threads, want 2", n)
	}

	// The start form from the input schema: counter's fields fill the JSON.
	b.run("open counter", chromedp.Navigate(srv.URL+"/#/graphs/counter"), chromedp.WaitVisible(chromedp.CSS(`#start-form [data-field="limit"]`)))
	if typ := read(b, "read the limit field", chromedp.Evaluate[string](`document.querySelector('[data-field="limit"]').type`)); typ != "number" {
		t.Errorf("counter's limit field is a %q input, want number", typ)
	}
	b.fill(`[data-field="limit"]`, "2")
	if got := read(b, "read the JSON", chromedp.Evaluate[string](`JSON.stringify(JSON.parse(document.querySelector('#start-input').value))`)); got != `{"limit":2}` {
		t.Errorf("the fields make the input %s, want {\"limit\":2}", got)
	}
	b.shot("29-start-form")
	b.run("start counter", chromedp.Click(chromedp.CSS(`#start-run`)), chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="completed"]`)))
	b.clean("counter from the form")

	// Plain text starts the assistant.
	b.run("open assistant", chromedp.Navigate(srv.URL+"/#/graphs/assistant"), chromedp.WaitVisible(chromedp.CSS(`#start-text`)))
	b.run("start with text", setValue(`#start-text`, "Where is A-1003?"), chromedp.Click(chromedp.CSS(`#start-run`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="completed"]`)))
	id := runID(b)
	if r, err := svc.Get(ctx, id); err != nil || r.Graph != "assistant" || !strings.Contains(string(r.Input), `"text":"Where is A-1003?"`) {
		t.Fatalf("run %s started from text: %+v %v", id, r, err)
	}
	b.clean("assistant from text")
	// The favicon.
	icon := read(b, "fetch the favicon", chromedp.Evaluate[string](`(async () => { const l = document.querySelector('link[rel=icon]'); const r = await fetch(l.href); return r.status + ' ' + r.headers.get('Content-Type') })()`, chromedp.EvalAwaitPromise))
	if icon != "200 image/svg+xml" {
		t.Errorf("the favicon answers %q, want 200 image/svg+xml", icon)
	}
}
