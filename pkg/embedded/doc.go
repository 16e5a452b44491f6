// Package embedded executes runs inside the process, with the engine, as
// `superstep dev`, `superstep run` and tests do: its Scheduler is the
// runs.Dispatcher of the embedded runtime, the sibling of package tick,
// which executes them one superstep per queue message on the serverless
// runtime. Both keep the run records of package runs up to date through
// runs.Mutate, so the same lifecycle rules apply whoever executes a run.
//
// A Scheduler executes at most SchedulerConfig.Concurrency runs at a
// time, continues pending and running runs after a restart from their last
// committed checkpoint, drains them on Shutdown, and is the event source
// of the runs it executes: it appends their events to a runs.EventLog and
// delivers them to watchers as they are logged (WatchEvents, a
// runs.LiveEvents for runs.Cursor), for the runs its EventsMode says.
// See README.md.
package embedded
