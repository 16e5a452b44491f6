package runs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// maxAnswerName bounds the answer quoted in a resume_requested event.
const maxAnswerName = 80

// answerName is the detail of a resume_requested event: what names the
// answer applied (ResumeRequest.By), or the answer itself, shortened.
func answerName(req *ResumeRequest) string {
	if req == nil {
		return ""
	}
	if req.By != "" {
		return req.By
	}
	var v []byte
	switch {
	case len(req.Value) > 0:
		v = req.Value
	case len(req.Values) > 0:
		v, _ = json.Marshal(req.Values)
	}
	var b bytes.Buffer
	if json.Compact(&b, v) == nil {
		v = b.Bytes()
	}
	if len(v) > maxAnswerName {
		cut := maxAnswerName
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = append(v[:cut:cut], "…"...)
	}
	if len(v) == 0 {
		return ""
	}
	return "answer " + string(v)
}

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
