package runs

import (
	"fmt"
	"time"
)

// LastAnswer says which resume a run had last, when, and with what (the
// detail of its newest resume_requested event: ResumeRequest.By or the
// answer), or "" if it had none: the words for a client whose answer
// came after it.
func LastAnswer(r Run) string {
	for i := len(r.Events) - 1; i >= 0; i-- {
		ev := r.Events[i]
		if ev.Type != EventResumeRequested {
			continue
		}
		at := ev.At.UTC().Format(time.RFC3339Nano)
		if ev.Detail == "" {
			return "at " + at
		}
		return fmt.Sprintf("at %s with %s", at, ev.Detail)
	}
	return ""
}
