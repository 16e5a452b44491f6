package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// Thread is a conversation: a sequence of runs, each starting from the
// state the one before it left. Its state is the latest committed step of
// its newest run (Active, or Head when no run is active); its history is
// every committed step of its runs, newest first, but the discarded steps
// of runs rolled back.
//
// At most one run of a thread is active, and the store enforces it: a run
// becomes Active only by a conditional update of the thread's record
// (UpdateThread with the Version read). Active runs are the pending,
// running, interrupted and drained ones: an interrupted run waits for a
// person's answer and a drained one to be resumed (as after a shutdown),
// and each continues from its own last step, so another run writing the
// thread meanwhile would fork the conversation under it. A run leaves the
// thread when it completes, fails or is cancelled, or when a newer run
// supersedes it (strategies interrupt and rollback).
type Thread struct {
	ID string `json:"thread_id"`
	// Metadata is the caller's JSON object, stored as given.
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	// Head is the step the next run starts from when no run is active:
	// the last step of the last run, the step a fork was made from, or
	// the step before a run that was rolled back. Nil: the empty state.
	Head *StepRef `json:"head,omitempty"`
	// Active is the id of the run that holds the thread, if one does.
	Active string `json:"active_run_id,omitempty"`
	// Queue lists the runs waiting for the thread, in arrival order.
	Queue []string `json:"queued_run_ids,omitempty"`
	// Superseding names the run that supersedes Active: the first run
	// that claimed the thread with strategy interrupt or rollback while
	// Active held it (later ones only queue). See Superseding.
	Superseding *Superseding `json:"superseding,omitempty"`
	// ForkedFrom is the thread this one was forked from, if it was.
	ForkedFrom string `json:"forked_from,omitempty"`
	// Forks lists the threads forked from this one: their runs continue
	// from steps of this thread's runs, so it cannot be deleted while
	// they exist. It may name forks deleted since (they are dropped when
	// the thread is deleted).
	Forks []string `json:"forks,omitempty"`
	// Deleting is set when a deletion of the thread has begun: no run
	// may take it, and deleting it again finishes the deletion.
	Deleting bool `json:"deleting,omitempty"`
	// Version increases with every update; stores use it for optimistic
	// concurrency, and it is what makes Active exclusive.
	Version int64 `json:"version"`
}

// Superseding is the supersede of a thread's active run by a newer run
// (strategy interrupt or rollback). The claim that queues the newer run
// records it, Pending, in the same conditional write; it is carried out
// by a second write, on the active run's record (supersedeRun), and then
// no longer Pending. While it is pending no other run may claim the
// thread: a claim that finds it pending carries it out first (any caller
// may: the write is the same), so that every run queued after the
// superseding one sees what it did to the active run, as it would if the
// two writes were one. It is cleared when the active run changes.
type Superseding struct {
	// Run is the superseding run, Strategy its strategy.
	Run      string   `json:"run_id"`
	Strategy Strategy `json:"strategy"`
	// Pending is set until the active run's record is written.
	Pending bool `json:"pending,omitempty"`
}

// StepRef names a committed step of a run; it is [pregel.StepRef], so a
// store's CommitFrom and the engine's conformance kit share it.
type StepRef = pregel.StepRef

// Strategy says what creating a run on a busy thread does.
type Strategy string

// The strategies of a run created on a thread with an active run.
const (
	// StrategyReject refuses the new run with a BusyError (the default).
	StrategyReject Strategy = "reject"
	// StrategyEnqueue queues the new run; it starts when the runs before
	// it have left the thread, in arrival order.
	StrategyEnqueue Strategy = "enqueue"
	// StrategyInterrupt drains the active run at its next superstep
	// boundary (its committed steps stay in the thread) and queues the
	// new run, which then starts from that state.
	StrategyInterrupt Strategy = "interrupt"
	// StrategyRollback cancels the active run, discards its steps from
	// the thread, and queues the new run, which starts from the state
	// before the cancelled one.
	StrategyRollback Strategy = "rollback"
)

// ParseStrategy returns the strategy named s; empty means StrategyReject.
func ParseStrategy(s string) (Strategy, error) {
	switch st := Strategy(s); st {
	case "":
		return StrategyReject, nil
	case StrategyReject, StrategyEnqueue, StrategyInterrupt, StrategyRollback:
		return st, nil
	}
	return "", fmt.Errorf("strategy %q is not one of reject, enqueue, interrupt, rollback: %w", s, ErrInvalid)
}

// BusyError refuses a run on a thread that has an active run (strategy
// reject). It wraps ErrConflict.
type BusyError struct {
	Thread    string
	ActiveRun string
}

// Error names the thread, its active run and what to do.
func (e *BusyError) Error() string {
	return fmt.Sprintf("thread %q is busy with run %q; wait for it to finish, or create the run with strategy enqueue, interrupt or rollback", e.Thread, e.ActiveRun)
}

// Unwrap makes a BusyError match ErrConflict.
func (e *BusyError) Unwrap() error { return ErrConflict }

// ThreadFilter selects threads to list.
type ThreadFilter struct {
	// Limit bounds the page (default 50, at most 500).
	Limit int
	// PageToken continues a previous listing.
	PageToken string
}

// ThreadPage is one page of a listing of threads, newest first.
type ThreadPage struct {
	Threads       []Thread `json:"threads"`
	NextPageToken string   `json:"next_page_token,omitempty"`
}

// ThreadStore keeps thread records. Implementations must be safe for
// concurrent use; the package runstest holds a conformance suite
// (runstest.Threads).
type ThreadStore interface {
	// CreateThread stores t if no thread has its id; otherwise it
	// returns the existing record and created=false.
	CreateThread(ctx context.Context, t Thread) (stored Thread, created bool, err error)
	// GetThread returns a thread or an error wrapping ErrNotFound.
	GetThread(ctx context.Context, id string) (Thread, error)
	// UpdateThread stores t if the stored version is t.Version (a
	// conditional write), and returns it with Version incremented and
	// UpdatedAt set; otherwise an error wrapping ErrConflict (or
	// ErrNotFound).
	UpdateThread(ctx context.Context, t Thread) (Thread, error)
	// DeleteThread deletes a thread's record if its version is version;
	// otherwise an error wrapping ErrConflict (or ErrNotFound).
	DeleteThread(ctx context.Context, id string, version int64) error
	// ListThreads lists threads, newest first (by CreatedAt, then id).
	ListThreads(ctx context.Context, f ThreadFilter) (ThreadPage, error)
}

// MutateThread reads a thread, applies fn and stores the result with a
// conditional write, retrying (with a short random pause) when the thread
// changed in between. An error from fn is returned as is.
func MutateThread(ctx context.Context, store ThreadStore, id string, fn func(*Thread) error) (Thread, error) {
	for attempt := 0; ; attempt++ {
		t, err := store.GetThread(ctx, id)
		if err != nil {
			return Thread{}, err
		}
		if err := fn(&t); err != nil {
			return t, err
		}
		out, err := store.UpdateThread(ctx, t)
		if !errors.Is(err, ErrConflict) || attempt >= 500 {
			return out, err
		}
		select {
		case <-ctx.Done():
			return Thread{}, ctx.Err()
		case <-time.After(time.Duration(rand.Int64N(int64(time.Millisecond) * int64(min(attempt+1, 20))))):
		}
	}
}

func cloneThread(t Thread) Thread {
	t.Metadata = append(json.RawMessage(nil), t.Metadata...)
	if len(t.Metadata) == 0 {
		t.Metadata = nil
	}
	if t.Head != nil {
		h := *t.Head
		t.Head = &h
	}
	if t.Queue != nil {
		t.Queue = append([]string(nil), t.Queue...)
	}
	if t.Superseding != nil {
		sp := *t.Superseding
		t.Superseding = &sp
	}
	if t.Forks != nil {
		t.Forks = append([]string(nil), t.Forks...)
	}
	return t
}

// RunDeleter is a store that deletes a run and everything stored for it:
// its record, checkpoints, task results, claims and events. Deleting a
// run that does not exist (or no longer does) is not an error. A store
// deletes the record last, so that a deletion cut short is finished by
// calling DeleteRun again. Service.DeleteThread deletes a thread's runs
// with it; its Runs store and its Checkpointer must both be RunDeleters
// (one call when they are the same store).
type RunDeleter interface {
	DeleteRun(ctx context.Context, id string) error
}
