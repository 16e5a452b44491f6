//go:build !superstep.lambda

package superstep

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// progress prints a run's events as they happen, one line per superstep
// and per finished node:
//
//	run 5c1e… of support-triage
//	step 1  1 task                        +0s
//	  detect_language  completed   120µs
//	step 1  committed in 1.2ms
//	run interrupted at step 6 after 25ms
type progress struct {
	w     io.Writer
	mu    sync.Mutex
	begin time.Time
	step  time.Time
	tasks map[string]time.Time // task id -> start
	// tokens: print the text of the message events nodes emit
	// (pregel.IsMessageEvent) as they come.
	tokens bool
	// open is the task whose text is being printed, on a line not yet
	// ended.
	open string
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tasks: make(map[string]time.Time)}
}

// observe is a pregel.Observer.
func (p *progress) observe(ev pregel.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev.Type == pregel.EventCustom {
		p.token(ev)
		return
	}
	if ev.Type == pregel.EventNodeStarted {
		p.tasks[ev.TaskID] = ev.Time
		return
	}
	if p.open != "" {
		fmt.Fprintln(p.w)
		p.open = ""
	}
	if p.begin.IsZero() { // a stream resumed after its start
		p.begin = ev.Time
	}
	switch ev.Type {
	case pregel.EventRunStarted:
		p.begin = ev.Time
		if ev.Step == 0 {
			fmt.Fprintf(p.w, "run %s of %s started\n", ev.RunID, ev.Graph)
		} else {
			fmt.Fprintf(p.w, "run %s of %s resumed after step %d\n", ev.RunID, ev.Graph, ev.Step)
		}
	case pregel.EventStepStarted:
		p.step = ev.Time
		fmt.Fprintf(p.w, "step %d  %d %s  +%s\n", ev.Step, ev.Tasks, plural(ev.Tasks, "task", "tasks"), fmtDuration(ev.Time.Sub(p.begin)))
	case pregel.EventNodeFinished:
		took := time.Duration(0)
		if t, ok := p.tasks[ev.TaskID]; ok {
			took = ev.Time.Sub(t)
			delete(p.tasks, ev.TaskID)
		}
		why := ev.Reason
		if ev.Error != "" {
			why = ev.Error
		}
		if why != "" {
			why = "  " + oneLine(why, 80)
		}
		fmt.Fprintf(p.w, "  %-20s %-11s %8s%s\n", ev.Node, ev.Status, fmtDuration(took), why)
	case pregel.EventStepFinished:
		fmt.Fprintf(p.w, "step %d  committed in %s\n", ev.Step, fmtDuration(ev.Time.Sub(p.step)))
	case pregel.EventRunFinished:
		line := fmt.Sprintf("run %s at step %d after %s", ev.RunStatus, ev.Step, fmtDuration(ev.Time.Sub(p.begin)))
		if ev.Reason != "" && ev.RunStatus == pregel.RunDrained {
			line += " (" + ev.Reason + ")"
		}
		if ev.Error != "" {
			line += ": " + oneLine(ev.Error, 200)
		}
		fmt.Fprintln(p.w, line)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// token prints the text a node streams, on a line of its own per task:
//
//	model: The refund was approved
func (p *progress) token(ev pregel.Event) {
	if !p.tokens || !pregel.IsMessageEvent(ev.Name) {
		return
	}
	var piece struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(ev.Payload, &piece) != nil || piece.Text == "" {
		return
	}
	if p.open != ev.TaskID {
		if p.open != "" {
			fmt.Fprintln(p.w)
		}
		fmt.Fprintf(p.w, "  %s: ", ev.Node)
		p.open = ev.TaskID
	}
	fmt.Fprint(p.w, strings.ReplaceAll(piece.Text, "\n", "\n    "))
}
