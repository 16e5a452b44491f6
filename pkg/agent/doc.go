// Package agent builds agent graphs on pregel: a [Message] type with
// content blocks and its reducer ([AddMessages], "messages"), a
// [ChatModel] interface (Bedrock's adapter is in package bedrock), tools
// made from Go functions with validated arguments ([NewTool]), and a
// prebuilt, durable agent ([New]): the model answers, each tool call it
// makes runs as its own task, back to the model until it stops — with
// optional approval before chosen tools and the answer streamed as node
// events ([EventMessageDelta]).
package agent
