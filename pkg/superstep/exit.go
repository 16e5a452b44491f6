//go:build !superstep.lambda

package superstep

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/superstep/superstep/pkg/pregel"
)

// Exit codes of the superstep command. run and resume exit with the code
// of the run's final status; other commands exit with ExitOK, ExitFailed
// or ExitUsage.
const (
	// ExitOK: the command succeeded; for run and resume, the run
	// completed.
	ExitOK = 0
	// ExitFailed: the run failed, or the command hit an error (a store
	// that cannot be opened, a server that cannot be reached).
	ExitFailed = 1
	// ExitUsage: bad arguments, flags or input (including input the
	// graph rejects, an unknown graph or run, and 4xx answers from the
	// server).
	ExitUsage = 2
	// ExitInterrupted: the run waits for an answer; resume it with one.
	ExitInterrupted = 3
	// ExitDrained: the run stopped at a superstep boundary on request
	// (or on a signal); resume it to continue.
	ExitDrained = 4
	// ExitCancelled: the run was cancelled (after a signal's grace
	// period, or from the server).
	ExitCancelled = 5
)

// exitCodesHelp documents the exit codes in the help of run and resume.
const exitCodesHelp = `Exit codes:
  0  the run completed
  1  the run failed, or an error stopped the command
  2  usage error or bad input (unknown graph or run, invalid JSON, input
     the graph rejects, a missing answer)
  3  the run is interrupted and waits for an answer (resume it)
  4  the run drained: it stopped at a superstep boundary (resume it)
  5  the run was cancelled (a run cancelled by a signal, after --grace,
     can be resumed)
Under "go run" these are reported as "exit status N" on stderr and go
run itself exits 1; scripts should run the built binary (go build).`

// ExitError carries an exit code with the error that caused it.
type ExitError struct {
	Code int
	Err  error
	// Hint follows the message of a usage error, e.g. where to find help.
	Hint string
	// Silent: the command already told the user; print nothing more.
	Silent bool
}

// Error describes the exit.
func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap returns the error that caused the exit.
func (e *ExitError) Unwrap() error { return e.Err }

// usageErr is a usage error of command c.
func usageErr(c *cobra.Command, err error) error {
	return &ExitError{Code: ExitUsage, Err: err, Hint: fmt.Sprintf("Run '%s --help' for usage.", c.CommandPath())}
}

// badInput is a usage error without the hint: the arguments were fine,
// what they named or held was not.
func badInput(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// failed is an ExitFailed error.
func failed(err error) error { return &ExitError{Code: ExitFailed, Err: err} }

// ExitCode is the exit code of a run that ended with status s.
func ExitCode(s pregel.RunStatus) int {
	switch s {
	case pregel.RunCompleted:
		return ExitOK
	case pregel.RunInterrupted:
		return ExitInterrupted
	case pregel.RunDrained:
		return ExitDrained
	case pregel.RunCancelled:
		return ExitCancelled
	default:
		return ExitFailed
	}
}
