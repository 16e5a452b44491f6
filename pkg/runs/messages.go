package runs

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Bounds of a run's Messages, so that a record stays small whatever its
// callers send.
const (
	// MaxMessages is how many messages a run keeps: the first and the
	// newest.
	MaxMessages = 50
	// MaxMessageBytes bounds one kept message; a larger one is replaced
	// by {"omitted": {"bytes": N, "reason": "..."}}.
	MaxMessageBytes = 64 << 10
)

// appendMessage appends msg (if any) to msgs within the bounds above.
func appendMessage(msgs []json.RawMessage, msg json.RawMessage) []json.RawMessage {
	if len(msg) == 0 {
		return msgs
	}
	if len(msg) > MaxMessageBytes {
		msg = json.RawMessage(fmt.Sprintf(`{"omitted":{"bytes":%d,"reason":"larger than %d bytes"}}`, len(msg), MaxMessageBytes))
	} else {
		msg = slices.Clone(msg)
	}
	// Clip: never write into the backing array of a record read from a
	// store that shares memory.
	msgs = append(slices.Clip(msgs), msg)
	if len(msgs) > MaxMessages {
		msgs = slices.Delete(msgs, 1, len(msgs)-MaxMessages+1)
	}
	return msgs
}
