//go:build !superstep.lambda

package superstep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/superstep/superstep/pkg/runs"
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

	// s holds what the options of Run chose.
	s *settings
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

// Main is the body of a program's main function: it runs the superstep
// command on the graphs the options give, with the process's arguments,
// streams, environment and signals, and exits with the command's exit
// code. When AWS Lambda starts the process (AWS_LAMBDA_RUNTIME_API is
// set), it serves the Lambda function named by [WithFunction] or by the
// [FunctionEnv] variable instead (pkg/lambdafn), until Lambda stops the
// process. Built with the superstep.lambda tag, Main serves the Lambda
// function only (see the package's documentation).
func Main(opts ...Option) {
	os.Exit(Run(context.Background(), OSEnv(), os.Args[1:], append([]Option{WithName(programName(os.Args[0]))}, opts...)...))
}

// programName is the name a program is called by: the base name of the
// executable, without ".exe"; "superstep" when there is none.
func programName(arg0 string) string {
	name := strings.TrimSuffix(filepath.Base(arg0), ".exe")
	if name == "" || name == "." || name == string(filepath.Separator) {
		return defaultName
	}
	return name
}

// defaultName is the program's name when no option sets it.
const defaultName = "superstep"

// progName is the name of the program env runs in, for help and hints.
func progName(env Env) string {
	if env.s == nil || env.s.name == "" {
		return defaultName
	}
	return env.s.name
}

// renamer replaces "superstep" by name where a text shows a command line
// to type: at the start of an indented line, or after a quote.
func renamer(name string) *strings.Replacer {
	return strings.NewReplacer("  superstep ", "  "+name+" ", `"superstep `, `"`+name+" ", "'superstep ", "'"+name+" ")
}

// rename puts name in place of "superstep" where the commands' help
// shows a command line to type.
func rename(c *cobra.Command, name string) {
	if name == defaultName {
		return
	}
	r := renamer(name)
	c.Example = r.Replace(c.Example)
	c.Long = r.Replace(c.Long)
	for _, sub := range c.Commands() {
		rename(sub, name)
	}
}

// Run runs the superstep command with args (without the program name) on
// the graphs the options give, and returns the process exit code. Bad
// options (no graphs, two graphs with one name, a graph that does not
// compile) exit with ExitUsage before anything runs. Started by Lambda
// (env.Getenv("AWS_LAMBDA_RUNTIME_API") is set), Run serves the Lambda
// function and returns only if it cannot start.
func Run(ctx context.Context, env Env, args []string, opts ...Option) int {
	s, err := newSettings(opts)
	if err != nil {
		fmt.Fprintf(errOut(env), "Error: %v\n", err)
		return ExitUsage
	}
	env.s = s
	if env.getenv(LambdaRuntimeEnv) != "" {
		return s.serveLambda(ctx, env.getenv, errOut(env))
	}
	cmd := New(env)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(ctx)
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
		// Errors name commands to type ('superstep graph list'): as this
		// program is called.
		fmt.Fprintf(env.Stderr, "Error: %s\n", renamer(progName(env)).Replace(ee.Err.Error()))
		if ee.Code == ExitUsage && ee.Hint != "" {
			fmt.Fprintln(env.Stderr, renamer(progName(env)).Replace(ee.Hint))
		}
	}
	return ee.Code
}

// errOut is env's stderr, or the process's.
func errOut(env Env) io.Writer {
	if env.Stderr == nil {
		return os.Stderr
	}
	return env.Stderr
}

// New builds the superstep root command and its subcommands. The graphs
// and settings are those of the options given to [Run]; New is for Run and
// this package's tests.
func New(env Env) *cobra.Command {
	if env.s == nil {
		env.s = &settings{storePath: DefaultStore}
		env.s.reg, _ = runs.NewRegistry()
	}
	root := &cobra.Command{
		Use:   progName(env),
		Short: "Durable Pregel-style agent graphs",
		Long: `superstep runs durable, Pregel-style agent graphs.

Run a registered graph on this machine (state in a SQLite file), serve the
HTTP API locally with "superstep dev", and inspect or steer the runs of a
dev server with "superstep runs" and its conversations with "superstep
threads".`,
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
		newThreadsCmd(env),
		newStoreCmd(env),
		newSchedulesCmd(env),
		newGraphCmd(env),
		newInvokeCmd(env),
	)
	if env.s.initCmd {
		root.AddCommand(newInitCmd(env))
	}
	rename(root, progName(env))
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
