package api

import (
	"encoding/json"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// The request and response bodies of the API. Field names are snake_case;
// README.md shows an example of each.

// Health is the body of GET /healthz.
type Health struct {
	Status string `json:"status"`
}

// GraphSummary describes one graph in GET /v1/graphs.
type GraphSummary struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	NodeCount   int      `json:"node_count"`
	Channels    []string `json:"channels"`
	// TextChannel, when set, says the graph takes plain text as input
	// ("input": "some text"), which goes to this channel
	// (pregel.TextInput; agent graphs: a user message in "messages").
	TextChannel string `json:"text_channel,omitempty"`
}

// GraphList is the body of GET /v1/graphs.
type GraphList struct {
	Graphs []GraphSummary `json:"graphs"`
}

// Graph is the body of GET /v1/graphs/{graph}.
type Graph struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Nodes       []pregel.NodeInfo `json:"nodes"`
	Channels    []string          `json:"channels"`
	// TextChannel is as in GraphSummary.
	TextChannel string `json:"text_channel,omitempty"`
	// InputSchema is the JSON Schema of the graph's input: an object of
	// channel values, derived from the state struct (with
	// github.com/google/jsonschema-go, as the agents' tools are); absent
	// when it cannot be derived.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// Mermaid is a Mermaid flowchart of the graph.
	Mermaid string `json:"mermaid"`
	// RunID and NodeStatuses are set when the request named a run
	// (?run=ID): the diagram is coloured by the run's latest status of
	// each node, listed here by node name.
	RunID        string                       `json:"run_id,omitempty"`
	NodeStatuses map[string]pregel.NodeStatus `json:"node_statuses,omitempty"`

	GraphShape // edges and node policies (graphshape.go)
}

// CreateRunRequest is the body of POST /v1/graphs/{graph}/runs. An empty
// body starts a run with no input.
type CreateRunRequest struct {
	// Input is a JSON object of channel values, or plain text (a JSON
	// string) for a graph with a TextChannel.
	Input json.RawMessage `json:"input,omitempty"`
	// RunID makes creation idempotent: repeating a request with the same
	// run_id and input returns the existing run.
	RunID string `json:"run_id,omitempty"`
	// ContextID groups the runs of one conversation.
	ContextID string `json:"context_id,omitempty"`
	// Stream answers with the run's stream (as GET
	// /v1/runs/{run_id}/stream) instead of the run, in StreamMode.
	Stream     bool        `json:"stream,omitempty"`
	StreamMode StreamModes `json:"stream_mode,omitempty"`
}

// Run is a run record, the body of the run endpoints' responses.
type Run struct {
	RunID     string           `json:"run_id"`
	Graph     string           `json:"graph"`
	Status    pregel.RunStatus `json:"status"`
	Input     json.RawMessage  `json:"input,omitempty"`
	ContextID string           `json:"context_id,omitempty"`
	// ThreadID names the thread of a run created on one.
	ThreadID string `json:"thread_id,omitempty"`
	// SupersededBy names the run that took the thread from this one
	// (strategies interrupt and rollback): this run has ended and cannot
	// be resumed. Discarded says its steps were rolled back: they are
	// not in the thread.
	SupersededBy string    `json:"superseded_by,omitempty"`
	Discarded    bool      `json:"discarded,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// GraphVersion is the version of the graph whose code wrote the
	// run's state; absent on runs made before versions were recorded.
	GraphVersion *GraphVersion `json:"graph_version,omitempty"`
	// Step is the last committed superstep.
	Step     int             `json:"step"`
	Counters pregel.Counters `json:"counters"`
	// DrainRequested and DrainReason record a drain request; they stay
	// set on a run that completed before it could drain. A run whose
	// graph changed incompatibly under it is drained with the reason.
	DrainRequested  bool   `json:"drain_requested,omitempty"`
	DrainReason     string `json:"drain_reason,omitempty"`
	CancelRequested bool   `json:"cancel_requested,omitempty"`
	// Interrupts are the questions an interrupted run waits on; answer
	// them with POST /v1/runs/{run_id}/resume.
	Interrupts []pregel.InterruptInfo `json:"interrupts,omitempty"`
	// Error says why a failed run failed; FailedNode names the node.
	Error      string `json:"error,omitempty"`
	FailedNode string `json:"failed_node,omitempty"`
	// Usage is the run's token usage, in total and per node, for a graph
	// that declares a usage channel (pregel.UsageChannel; agent graphs
	// do). GET /v1/runs/{run_id} shows it.
	Usage *pregel.UsageTotals `json:"usage,omitempty"`
	// OmittedInput names the channels whose input value was left out of
	// Input (replaced by an Omitted marker: too large or too deep to
	// embed); GET /v1/runs/{run_id}/input/{channel} gives each.
	OmittedInput []string `json:"omitted_input,omitempty"`
	// OmittedInterrupts lists the interrupts whose payload was left out
	// of Interrupts the same way; GET
	// /v1/runs/{run_id}/interrupts/{interrupt_id} gives each.
	OmittedInterrupts []string `json:"omitted_interrupts,omitempty"`
}

// runView is the Run of a record, its input fitted to the response's
// value budget.
// GraphVersion names a version of a graph: the name its code gave it (if
// any) and the fingerprint of its shape.
type GraphVersion struct {
	Version     string `json:"version,omitempty"`
	Fingerprint string `json:"fingerprint"`
}

func graphVersionView(s *pregel.Stamp) *GraphVersion {
	if s == nil {
		return nil
	}
	return &GraphVersion{Version: s.Version, Fingerprint: s.Fingerprint}
}

func runView(r runs.Run, b *ValueBudget) Run {
	input, omitted := b.FitInput(r.ID, r.Input)
	interrupts, omittedInterrupts := b.FitInterrupts(r.ID, r.Interrupts)
	return Run{
		GraphVersion:      graphVersionView(r.GraphVersion),
		OmittedInterrupts: omittedInterrupts,
		RunID:             r.ID,
		Graph:             r.Graph,
		Status:            r.Status,
		Input:             input,
		OmittedInput:      omitted,
		ContextID:         r.ContextID,
		ThreadID:          r.ThreadID,
		SupersededBy:      r.SupersededBy,
		Discarded:         r.Discarded,
		CreatedAt:         r.CreatedAt,
		UpdatedAt:         r.UpdatedAt,
		Step:              r.Step,
		Counters:          r.Counters,
		DrainRequested:    r.DrainRequested,
		DrainReason:       r.DrainReason,
		CancelRequested:   r.CancelRequested,
		Interrupts:        interrupts,
		Error:             r.Error,
		FailedNode:        r.FailedNode,
		Usage:             r.Usage,
	}
}

// RunList is the body of GET /v1/runs: newest run first.
type RunList struct {
	Runs []Run `json:"runs"`
	// NextPageToken, when set, fetches the next page as ?page_token=.
	NextPageToken string `json:"next_page_token,omitempty"`
}

// RunDetail is the body of GET /v1/runs/{run_id}: the run, its newest
// committed steps (oldest first, step 0 being the input) and its latest
// state.
type RunDetail struct {
	Run
	// Steps are the run's newest committed steps, oldest first: at most
	// RunViewSteps (100), or as many as ?steps= asked (1 to 500).
	Steps []pregel.StepInfo `json:"steps"`
	// StepCount is how many steps the run has committed (step 0, the
	// input, to the latest); 0 before step 0 is stored.
	StepCount int `json:"step_count"`
	// StepsTruncated says older steps than Steps' first exist; they are
	// listed, newest first, by GET /v1/runs/{run_id}/checkpoints?order=desc
	// with OlderStepsPageToken as page_token (or oldest first, from step
	// 0, by /checkpoints without a token).
	StepsTruncated      bool   `json:"steps_truncated,omitempty"`
	OlderStepsPageToken string `json:"older_steps_page_token,omitempty"`
	// Values is the state after the last committed step, by channel.
	// Values too large or too deep to embed are replaced by an Omitted
	// marker and named in OmittedValues.
	Values        map[string]json.RawMessage `json:"values"`
	OmittedValues []string                   `json:"omitted_values,omitempty"`
}

// Checkpoint is the body of GET /v1/runs/{run_id}/checkpoints/{step}: the
// engine's checkpoint, its values too large or too deep to embed replaced
// by an Omitted marker and named in OmittedValues.
type Checkpoint struct {
	pregel.Checkpoint
	OmittedValues []string `json:"omitted_values,omitempty"`
}

// CheckpointList is the body of GET /v1/runs/{run_id}/checkpoints: a page
// of the run's committed steps, oldest first (newest first with
// order=desc).
type CheckpointList struct {
	RunID       string            `json:"run_id"`
	Checkpoints []pregel.StepInfo `json:"checkpoints"`
	// NextPageToken, when set, fetches the next page as ?page_token=.
	NextPageToken string `json:"next_page_token,omitempty"`
}

// EventList is the body of GET /v1/runs/{run_id}/events: the run's
// history, oldest first.
type EventList struct {
	RunID  string  `json:"run_id"`
	Events []Event `json:"events"`
	// EventsDropped counts the events dropped from a long history: it
	// keeps the first event (created) and the newest ones.
	EventsDropped int `json:"events_dropped"`
}

// Event is one entry of a run's history: a change of its status or a
// request made of it.
type Event struct {
	At time.Time `json:"at"`
	// Type is created, running, interrupted, drained, completed, failed,
	// cancelled (changes of status), drain_requested, cancel_requested or
	// resume_requested.
	Type string `json:"type"`
	// Status is the run's status after the change.
	Status pregel.RunStatus `json:"status"`
	// Step is the run's last committed superstep at the change.
	Step int `json:"step"`
	// Detail is the drain reason (drain_requested, drained), the error
	// (failed), the ids of the pending interrupts (interrupted), the
	// answer (resume_requested) or the rollback that asked for a cancel
	// (cancel_requested).
	Detail string `json:"detail,omitempty"`
}

func eventList(id string, evs []runs.Event, dropped int) EventList {
	out := EventList{RunID: id, Events: make([]Event, len(evs)), EventsDropped: dropped}
	for i, ev := range evs {
		out.Events[i] = Event{At: ev.At, Type: string(ev.Type), Status: ev.Status, Step: ev.Step, Detail: ev.Detail}
	}
	return out
}

// DrainRequest is the body of POST /v1/runs/{run_id}/drain; it may be
// empty.
type DrainRequest struct {
	Reason string `json:"reason,omitempty"`
}

// FleetDrainRequest is the body of POST /v1/runs/drain: drain every
// pending or running run, or those of Graph, of Version (a version name or
// fingerprint), or both, with Reason (required).
type FleetDrainRequest struct {
	Reason  string `json:"reason"`
	Graph   string `json:"graph,omitempty"`
	Version string `json:"version,omitempty"`
}

// FleetResumeRequest is the body of POST /v1/runs/resume: resume every
// run with Status (drained, the only status resumable together), or
// those of Graph, of Version, or both.
type FleetResumeRequest struct {
	Status  pregel.RunStatus `json:"status"`
	Graph   string           `json:"graph,omitempty"`
	Version string           `json:"version,omitempty"`
}

// FleetResult is the answer of a fleet drain or resume: the runs it
// drained or resumed, and those it skipped with the reason (a run that
// finished meanwhile, say).
type FleetResult struct {
	Runs    []string          `json:"runs"`
	Skipped map[string]string `json:"skipped,omitempty"`
}

// ResumeRequest is the body of POST /v1/runs/{run_id}/resume: Resume
// answers every pending interrupt, ResumeByID answers them by interrupt
// id. A drained run resumes with an empty body.
type ResumeRequest struct {
	Resume     json.RawMessage            `json:"resume,omitempty"`
	ResumeByID map[string]json.RawMessage `json:"resume_by_id,omitempty"`
}
