// Package runs manages runs of registered graphs: their records (status,
// input, counters, drain and cancel requests, history of events), the
// rules of their lifecycle, and the Service that the HTTP API, the CLI and
// the Lambdas share. Executing supersteps is left to a Dispatcher: the
// embedded Scheduler (package embedded), or the serverless tick queue
// (package tick). Package runs holds the records, the rules and the
// interfaces both runtimes share; it executes nothing itself.
//
// Threads (Thread, ThreadStore) are conversations: a run created on one
// (Service.CreateOnThread) starts from the thread's latest committed state
// with its input applied through the channels' reducers, and at most one
// run of a thread is active, by a conditional write of the thread's record;
// a Strategy says what a run arriving on a busy thread does. An executor
// calls Service.RunStopped when a run stops, which starts the next queued
// run (embedded.SchedulerConfig.OnStop, tick.Handler.Threads on Lambda);
// it is idempotent, so an executor may call it on every redelivery. A
// Checkpointer that is also a Seeder stores a continuing run's step 0
// without copying the state it inherits. Service.DeleteThread deletes a
// thread with its runs through stores that are RunDeleters.
package runs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// Run is the record of one run of a graph.
type Run struct {
	ID        string           `json:"run_id"`
	Graph     string           `json:"graph"`
	Status    pregel.RunStatus `json:"status"`
	Input     json.RawMessage  `json:"input,omitempty"`
	ContextID string           `json:"context_id,omitempty"`
	// ThreadID names the thread the run belongs to, if any (see Thread).
	ThreadID string `json:"thread_id,omitempty"`
	// Base is the step of the thread the run started from: its step 0 is
	// that state with Input applied. Nil: the empty state.
	Base *StepRef `json:"base,omitempty"`
	// SupersededBy names the run that took the thread from this one
	// (strategies interrupt and rollback); a superseded run cannot be
	// resumed.
	SupersededBy string `json:"superseded_by,omitempty"`
	// Discarded: the run was rolled back; its steps are not part of its
	// thread's state or history.
	Discarded bool `json:"discarded,omitempty"`
	// AsNode is set on the record of a thread's state update
	// (Service.UpdateState): the node the update was written as. Its
	// Input holds the values written.
	AsNode    string    `json:"as_node,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// GraphVersion is the stamp of the graph whose code wrote the run's
	// state: set when the run is created, and changed to the code's
	// stamp when a run continued on other (compatible) code commits a
	// step. Nil on records made before versions were recorded.
	GraphVersion *pregel.Stamp `json:"graph_version,omitempty"`
	// Step is the last committed superstep.
	Step     int             `json:"step"`
	Counters pregel.Counters `json:"counters"`
	// DrainRequested and DrainReason record a drain request; the reason
	// stays visible after the run completes.
	DrainRequested bool   `json:"drain_requested,omitempty"`
	DrainReason    string `json:"drain_reason,omitempty"`
	// CancelRequested records a cancel request not yet carried out.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// Interrupts are pending while Status is interrupted.
	Interrupts []pregel.InterruptInfo `json:"interrupts,omitempty"`
	// Resume holds the value(s) a resume request supplied, until the run
	// has taken them.
	Resume *ResumeRequest `json:"resume,omitempty"`
	// Error says why a failed run failed, in words fit for its caller.
	Error string `json:"error,omitempty"`
	// FailedNode names the node that failed the run, if one did.
	FailedNode string `json:"failed_node,omitempty"`
	// Rejected marks a failed run whose input was refused before it
	// started (Service.Reject); Error says why.
	Rejected bool `json:"rejected,omitempty"`
	// Messages are the protocol messages a binding (A2A) recorded with
	// the run: the one that created it and those that resumed it, oldest
	// first (see CreateRequest.Message, MaxMessages).
	Messages []json.RawMessage `json:"messages,omitempty"`
	// Usage is the run's token usage, in total and per node, when its
	// graph declares a usage channel (pregel.UsageChannel), read from a
	// checkpoint by Service.AddUsage (Service.Get does it for pending and
	// running runs); stores do not keep it.
	Usage *pregel.UsageTotals `json:"usage,omitempty"`
	// Events is the run's history, oldest first: its changes of status
	// and the requests made of it (see Event). Mutate appends to it. It
	// holds at most MaxEvents events: the first (created) and the newest;
	// EventsDropped counts the ones dropped in between.
	Events        []Event `json:"events,omitempty"`
	EventsDropped int     `json:"events_dropped,omitempty"`
	// Version increases with every update; stores use it for optimistic
	// concurrency.
	Version int64 `json:"version"`
	// Trace is the trace context of the run's root span (W3C
	// traceparent, tracestate), set when the run is created with tracing
	// on, so that everything that executes the run joins its trace.
	Trace map[string]string `json:"trace,omitempty"`
	// WatchedUntil, when in the future, says a client streams the run:
	// a runtime that keeps run events only for watched runs (the
	// serverless one, by default) keeps them until then. Watchers renew
	// it while they stream.
	WatchedUntil time.Time `json:"watched_until,omitzero"`
}

// VersionMatches reports whether the run's graph version has the name or
// fingerprint v.
func (r *Run) VersionMatches(v string) bool {
	return r.GraphVersion != nil && (r.GraphVersion.Version == v || r.GraphVersion.Fingerprint == v)
}

// HistoryLen is how many events the run's history has had: those Events
// holds and those dropped. Every change of status adds one, so a run that
// stops again at the same step with the same status has a longer history
// than at its previous stop; the run_finished event of each stop carries
// the length of the record's history at that stop (pregel.Event.History).
func (r *Run) HistoryLen() int { return len(r.Events) + r.EventsDropped }

// ResumeRequest answers a run's interrupts: Value answers all of them,
// Values answers them by interrupt id.
type ResumeRequest struct {
	Value  json.RawMessage            `json:"value,omitempty"`
	Values map[string]json.RawMessage `json:"values,omitempty"`
	// Message, if set, is appended to the run's Messages.
	Message json.RawMessage `json:"-"`
	// By names the answer for those whose answers come too late: the
	// A2A message that carries it, say. Empty, the answer itself names
	// it. It is the detail of the run's resume_requested event.
	By string `json:"-"`
}

// Filter selects runs to list.
type Filter struct {
	Graph  string
	Status pregel.RunStatus
	// Version selects the runs whose graph version (GraphVersion) has
	// this name or fingerprint. A version no run has gives an empty
	// page: versions of code no longer deployed are not known to the
	// running code, so none is refused.
	Version string
	// ContextID selects the runs of one conversation.
	ContextID string
	// Limit bounds the page (default 50, at most MaxPageSize).
	Limit int
	// PageToken continues a previous listing.
	PageToken string
}

// MaxPageSize is the most runs or threads one page of a listing holds
// (Filter.Limit, ThreadFilter.Limit).
const MaxPageSize = 500

// Page is one page of a listing, newest run first.
type Page struct {
	Runs []Run `json:"runs"`
	// NextPageToken is empty on the last page.
	NextPageToken string `json:"next_page_token,omitempty"`
}

// Errors of the run store and service; each is wrapped with details.
var (
	ErrNotFound = errors.New("not found")
	// ErrConflict: the run changed since it was read (optimistic
	// concurrency), or a run with that id exists with other content.
	ErrConflict = errors.New("conflict")
	// ErrInvalidState: the request does not fit the run's status, e.g.
	// resuming a completed run.
	ErrInvalidState = errors.New("invalid state")
	// ErrInvalid: the request itself is malformed.
	ErrInvalid = errors.New("invalid request")
)

// Store keeps run records. Implementations must be safe for concurrent
// use. The package runstest holds a conformance suite.
type Store interface {
	// CreateRun stores r if no run has its id; otherwise it returns the
	// existing record and created=false.
	CreateRun(ctx context.Context, r Run) (stored Run, created bool, err error)
	// GetRun returns a run or an error wrapping ErrNotFound.
	GetRun(ctx context.Context, id string) (Run, error)
	// UpdateRun stores r if the stored version is r.Version, and returns
	// it with Version incremented and UpdatedAt set; otherwise it returns
	// an error wrapping ErrConflict (or ErrNotFound).
	UpdateRun(ctx context.Context, r Run) (Run, error)
	// ListRuns lists runs, newest first (by CreatedAt, then id).
	ListRuns(ctx context.Context, f Filter) (Page, error)
}
