//go:build !superstep.lambda

package superstep

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/schedule"
)

// The schedules commands: graphs run on a clock (/v1/schedules).

func newSchedulesCmd(env Env) *cobra.Command {
	var f serverFlags
	c := &cobra.Command{
		Use:   "schedules",
		Short: "Create, list, pause, resume and delete the schedules of a server",
		Long: `A schedule runs a graph on a clock: a cron expression ("0 9 * * 1-5"), or
EventBridge Scheduler's cron(0 9 ? * MON-FRI *), rate(15 minutes) or
at(2030-01-31T09:00:00), evaluated in an IANA --timezone (default UTC),
with an --input and optionally a --thread (each firing a run on it, with
--strategy when the thread is busy). "superstep dev" fires them itself
(a firing missed while it was stopped is made up once when it starts); a
deployment on AWS hands them to EventBridge Scheduler. Each firing's run id
is sched.NAME.TIME, so a firing delivered twice starts one run.

The commands talk to a server over its HTTP API, like "superstep runs":
--server (default $` + ServerEnv + ` or ` + DefaultServer + `) and --token (default
$` + TokenEnv + `). 4xx answers exit with code 2, other failures with 1.`,
		Example: `  superstep schedules create nightly --graph triage --schedule "0 2 * * *" --timezone Europe/Paris --input '{"limit": 50}'
  superstep schedules create digest --graph assistant --schedule "rate(1 day)" --thread inbox --strategy enqueue
  superstep schedules list
  superstep schedules pause nightly
  superstep schedules update nightly --schedule "cron(0 3 * * ? *)"
  superstep schedules delete nightly`,
		Args: noArgs,
		RunE: groupRunE,
	}
	f.register(c, env, DefaultServer)
	c.AddCommand(
		newSchedulesListCmd(env, &f),
		newSchedulesCreateCmd(env, &f),
		newSchedulesShowCmd(env, &f),
		newSchedulesUpdateCmd(env, &f),
		newSchedulesPauseCmd(env, &f, true),
		newSchedulesPauseCmd(env, &f, false),
		newSchedulesDeleteCmd(env, &f),
	)
	return c
}

func schedulePath(name string, under ...string) string {
	p := "/v1/schedules/" + url.PathEscape(name)
	for _, u := range under {
		p += "/" + u
	}
	return p
}

func fmtOptTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

func newSchedulesListCmd(env Env, f *serverFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List schedules with their last and next firings",
		Args:  noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			var l api.ScheduleList
			raw, err := f.call(c.Context(), http.MethodGet, "/v1/schedules", nil, nil, &l)
			if err != nil {
				return err
			}
			if f.json {
				return writeRaw(env.Stdout, raw)
			}
			tw := newTable(env.Stdout)
			fmt.Fprintln(tw, "NAME\tGRAPH\tSCHEDULE\tTIMEZONE\tTHREAD\tSTATE\tLAST\tLAST RUN\tNEXT")
			for _, s := range l.Schedules {
				state := "active"
				if s.Paused {
					state = "paused"
				}
				last := orDash(s.LastRunID)
				if s.LastError != "" {
					last = "none: " + oneLine(s.LastError, 40)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Graph, s.Expression, s.Timezone, orDash(s.ThreadID), state, fmtOptTime(s.LastFireAt), last, fmtOptTime(s.NextFireAt))
			}
			return tw.Flush()
		},
	}
}

// scheduleFlags are the flags create and update share.
type scheduleFlags struct {
	expr, tz, input, strategy, description string
}

func (sf *scheduleFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&sf.expr, "schedule", "", "when: a cron `EXPR` (\"0 9 * * 1-5\"), cron(...), rate(N minutes|hours|days) or at(yyyy-mm-ddThh:mm:ss)")
	c.Flags().StringVar(&sf.tz, "timezone", "", "the IANA `ZONE` the schedule is evaluated in (default UTC), such as Europe/Paris")
	c.Flags().StringVar(&sf.input, "input", "", "each run's input, a JSON object: `JSON`, @FILE or -")
	c.Flags().StringVar(&sf.strategy, "strategy", "", "on a thread, what a firing does when the thread is busy: reject (default), enqueue, interrupt or rollback")
	c.Flags().StringVar(&sf.description, "description", "", "free text kept with the schedule")
}

func (sf *scheduleFlags) readInput(c *cobra.Command, env Env) (json.RawMessage, error) {
	if !c.Flags().Changed("input") {
		return nil, nil
	}
	raw, err := readJSONArg("input", sf.input, env.Stdin)
	if err != nil {
		return nil, usageErr(c, err)
	}
	return raw, nil
}

func printSchedule(env Env, f *serverFlags, raw []byte, s schedule.Schedule) error {
	if f.json {
		return writeRaw(env.Stdout, raw)
	}
	tw := newTable(env.Stdout)
	fmt.Fprintf(tw, "Schedule:\t%s\n", s.Name)
	fmt.Fprintf(tw, "Graph:\t%s\n", s.Graph)
	fmt.Fprintf(tw, "When:\t%s (%s)\n", s.Expression, s.Timezone)
	if s.ThreadID != "" {
		fmt.Fprintf(tw, "Thread:\t%s (strategy %s)\n", s.ThreadID, s.Strategy)
	}
	if len(s.Input) > 0 {
		fmt.Fprintf(tw, "Input:\t%s\n", oneLine(string(s.Input), 200))
	}
	state := "active"
	if s.Paused {
		state = "paused"
	}
	fmt.Fprintf(tw, "State:\t%s\n", state)
	fmt.Fprintf(tw, "Next firing:\t%s\n", fmtOptTime(s.NextFireAt))
	fmt.Fprintf(tw, "Last firing:\t%s\n", fmtOptTime(s.LastFireAt))
	if s.LastRunID != "" {
		fmt.Fprintf(tw, "Last run:\t%s\n", s.LastRunID)
	}
	if s.LastError != "" {
		fmt.Fprintf(tw, "Last firing started no run:\t%s\n", s.LastError)
	}
	if s.Missed > 0 {
		fmt.Fprintf(tw, "Missed (caught up):\t%d\n", s.Missed)
	}
	return tw.Flush()
}

func newSchedulesCreateCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		sf     scheduleFlags
		graph  string
		thread string
		paused bool
	)
	c := &cobra.Command{
		Use:   "create NAME --graph GRAPH --schedule EXPR [--timezone ZONE] [--input JSON] [--thread ID [--strategy S]]",
		Short: "Create a schedule",
		Args:  exactArgs("NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			if graph == "" || sf.expr == "" {
				return usageErr(c, fmt.Errorf("--graph and --schedule are required"))
			}
			input, err := sf.readInput(c, env)
			if err != nil {
				return err
			}
			var s schedule.Schedule
			raw, err := f.call(c.Context(), http.MethodPost, "/v1/schedules", nil, schedule.CreateRequest{Name: args[0], Graph: graph, Schedule: sf.expr,
				Timezone: sf.tz, Input: input, ThreadID: thread, Strategy: sf.strategy, Description: sf.description, Paused: paused}, &s)
			if err != nil {
				return err
			}
			return printSchedule(env, f, raw, s)
		},
	}
	sf.register(c)
	c.Flags().StringVar(&graph, "graph", "", "the `GRAPH` each firing runs")
	c.Flags().StringVar(&thread, "thread", "", "run each firing on this thread `ID` (it must exist)")
	c.Flags().BoolVar(&paused, "paused", false, "create it paused")
	return c
}

func newSchedulesShowCmd(env Env, f *serverFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Show a schedule with its last and next firings",
		Args:  exactArgs("NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			var s schedule.Schedule
			raw, err := f.call(c.Context(), http.MethodGet, schedulePath(args[0]), nil, nil, &s)
			if err != nil {
				return err
			}
			return printSchedule(env, f, raw, s)
		},
	}
}

func newSchedulesUpdateCmd(env Env, f *serverFlags) *cobra.Command {
	var sf scheduleFlags
	c := &cobra.Command{
		Use:   "update NAME [--schedule EXPR] [--timezone ZONE] [--input JSON] [--strategy S] [--description TEXT]",
		Short: "Change a schedule's time, zone, input, strategy or description",
		Args:  exactArgs("NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			var req schedule.UpdateRequest
			set := func(name string, v string) *string {
				if c.Flags().Changed(name) {
					return &v
				}
				return nil
			}
			req.Schedule, req.Timezone, req.Strategy, req.Description = set("schedule", sf.expr), set("timezone", sf.tz), set("strategy", sf.strategy), set("description", sf.description)
			input, err := sf.readInput(c, env)
			if err != nil {
				return err
			}
			req.Input = input
			var s schedule.Schedule
			raw, err := f.call(c.Context(), http.MethodPatch, schedulePath(args[0]), nil, req, &s)
			if err != nil {
				return err
			}
			return printSchedule(env, f, raw, s)
		},
	}
	sf.register(c)
	return c
}

func newSchedulesPauseCmd(env Env, f *serverFlags, pause bool) *cobra.Command {
	verb, short := "resume", "Resume a paused schedule: it fires from now on (what it missed while paused is not made up)"
	if pause {
		verb, short = "pause", "Pause a schedule: it does not fire until resumed"
	}
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  exactArgs("NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			var s schedule.Schedule
			raw, err := f.call(c.Context(), http.MethodPost, schedulePath(args[0], verb), nil, nil, &s)
			if err != nil {
				return err
			}
			return printSchedule(env, f, raw, s)
		},
	}
}

func newSchedulesDeleteCmd(env Env, f *serverFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a schedule (the runs it started stay)",
		Args:  exactArgs("NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			if _, err := f.call(c.Context(), http.MethodDelete, schedulePath(args[0]), nil, nil, nil); err != nil {
				return err
			}
			if !f.json {
				fmt.Fprintf(env.Stdout, "schedule %s deleted\n", args[0])
			}
			return nil
		},
	}
}
