// Package cli implements the superstep command: running graphs on this
// machine (run, resume), serving them over HTTP (dev), talking to a dev
// server (runs) and showing graphs (graph).
//
// Every command is built by a function from an [Env], so tests run the
// command in-process with their own standard streams, environment and
// signals; nothing is kept in package-level variables.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
)

// Env is what a command may touch of the process it runs in.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads an environment variable (os.Getenv).
	Getenv func(string) string
	// Signals subscribes to the signals that stop runs (SIGINT and
	// SIGTERM); stop unsubscribes. Nil: no signal is ever delivered.
	Signals func() (ch <-chan os.Signal, stop func())
	// IsTerminal reports whether r is an interactive terminal, which
	// lets run and resume prompt for answers. Nil: never.
	IsTerminal func(r io.Reader) bool
}

// OSEnv is the Env of the real process.
func OSEnv() Env {
	return Env{
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Getenv: os.Getenv,
		Signals: func() (<-chan os.Signal, func()) {
			ch := make(chan os.Signal, 2)
			signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
			return ch, func() { signal.Stop(ch) }
		},
		IsTerminal: isTerminal,
	}
}

// isTerminal reports whether r is an interactive terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func (e Env) getenv(key string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(key)
}

func (e Env) signals() (<-chan os.Signal, func()) {
	if e.Signals == nil {
		return nil, func() {}
	}
	return e.Signals()
}

func (e Env) interactive() bool {
	return e.IsTerminal != nil && e.Stdin != nil && e.IsTerminal(e.Stdin)
}

// Main runs the superstep command with args (without the program name)
// and returns the process exit code.
func Main(ctx context.Context, env Env, args []string) int {
	cmd := New(env)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if !errors.As(err, &ee) {
		// Errors cobra raises itself (unknown flags, commands) are
		// usage errors; ours carry their code.
		ee = &ExitError{Code: ExitUsage, Err: err}
	}
	if ee.Err != nil && !ee.Silent {
		fmt.Fprintf(env.Stderr, "Error: %v\n", ee.Err)
		if ee.Code == ExitUsage && ee.Hint != "" {
			fmt.Fprintln(env.Stderr, ee.Hint)
		}
	}
	return ee.Code
}

// New builds the superstep root command and its subcommands.
func New(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "superstep",
		Short: "Durable Pregel-style agent graphs",
		Long: `superstep runs durable, Pregel-style agent graphs.

Run a registered graph on this machine (state in a SQLite file), serve the
HTTP API locally with "superstep dev", and inspect or steer the runs of a
dev server with "superstep runs".`,
		Args:          noArgs,
		RunE:          groupRunE,
		SilenceUsage:  true,
		SilenceErrors: true,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: true,
		},
	}
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr(c, err)
	})
	root.AddCommand(
		newRunCmd(env),
		newResumeCmd(env),
		newDevCmd(env),
		newRunsCmd(env),
		newGraphCmd(env),
	)
	return root
}

// groupRunE serves commands that only hold subcommands: without
// arguments they print their help; anything else is a usage error.
func groupRunE(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErr(c, fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath()))
	}
	c.SetOut(c.ErrOrStderr())
	_ = c.Help()
	return &ExitError{Code: ExitUsage, Silent: true}
}

// noArgs is cobra.NoArgs as a usage error.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 && c.HasSubCommands() {
		return nil // groupRunE reports it
	}
	if len(args) > 0 {
		return usageErr(c, fmt.Errorf("%q takes no arguments, got %q", c.CommandPath(), args))
	}
	return nil
}

// exactArgs is cobra.ExactArgs as a usage error naming the arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		if len(args) < len(names) {
			return usageErr(c, fmt.Errorf("missing %s", names[len(args)]))
		}
		return usageErr(c, fmt.Errorf("%q takes %d argument(s), got %d: %q", c.CommandPath(), len(names), len(args), args))
	}
}
