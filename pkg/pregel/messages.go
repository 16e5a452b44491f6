package pregel

// The names of the events that carry a model's answer as it is generated,
// by convention: a node (the agents package, a custom model node) sends
// each piece with [Emit] under one of these names, and streams show them
// in their "messages" mode. Other names are custom events.
const (
	// MessageToken is an event carrying a piece of text, such as
	// {"text": "Hel"}.
	MessageToken = "token"
	// MessageDelta is an event carrying a change to a message being
	// generated: a text piece, a tool call's arguments, usage.
	MessageDelta = "message_delta"
)

// IsMessageEvent reports whether an event a node emitted under name
// belongs to the "messages" stream mode (see MessageToken, MessageDelta).
func IsMessageEvent(name string) bool {
	return name == MessageToken || name == MessageDelta
}
