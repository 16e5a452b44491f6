package a2a_test

import (
	"testing"

	core "github.com/a2aproject/a2a-go/v2/a2a"
)

// TestHistoryKeepsMessageID: the client's messageId stays the id of its
// message in the task's history, conversation graphs included.
func TestHistoryKeepsMessageID(t *testing.T) {
	for _, version := range protocols {
		t.Run(version, func(t *testing.T) {
			e := threadEnv(t, true)
			c := e.client(t, "memo", version)
			msg := text("my name is Ana")
			msg.ID = "client-message-" + version
			task := send(t, c, msg, nil)
			got := getTask(t, c, task.ID)
			var ids []string
			for _, m := range got.History {
				if m.Role == core.MessageRoleUser {
					ids = append(ids, m.ID)
				}
			}
			if len(ids) != 1 || ids[0] != msg.ID {
				t.Fatalf("user messages in the history have ids %v, want [%s]", ids, msg.ID)
			}
		})
	}
}
