package serverless

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

// Main is the body of a function's main: it wires the App from the
// environment ([FromEnv]) and serves the handler that pick returns, such
// as (*App).HandleTick, until Lambda stops the process. If the App cannot
// be wired it logs why, naming the function, and exits with status 1.
func Main(function string, pick func(*App) any) {
	app, err := FromEnv(context.Background())
	if err != nil {
		slog.Error("superstep "+function+": cannot start", "err", err)
		os.Exit(1)
	}
	lambda.Start(pick(app))
}
