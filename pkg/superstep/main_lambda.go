//go:build superstep.lambda

package superstep

import (
	"context"
	"fmt"
	"os"
)

// Main is the body of a program's main function. Built with the
// superstep.lambda tag, as here, it serves the Lambda function named by
// [WithFunction] or by the [FunctionEnv] variable until Lambda stops the
// process (pkg/lambdafn), and the program has no CLI: started outside
// Lambda, it says so and exits with code 2. Bad options exit with code
// 2 before anything is served.
func Main(opts ...Option) {
	s, err := newSettings(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(2)
	}
	os.Exit(s.serveLambda(context.Background(), os.Getenv, os.Stderr))
}
