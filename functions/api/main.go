// Command api is the api Lambda function: it serves the HTTP API (API
// Gateway HTTP API, payload format 2.0) and starts runs from EventBridge
// superstep.StartRun events and start-queue messages.
// Configuration is read from the environment; see pkg/serverless/README.md.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/superstep/superstep/pkg/serverless"
)

func main() {
	app, err := serverless.FromEnv(context.Background())
	if err != nil {
		slog.Error("superstep api: cannot start", "err", err)
		os.Exit(1)
	}
	lambda.Start(app.HandleAPI)
}
