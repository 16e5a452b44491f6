// Command node is the node Lambda function: it executes one remote node
// task per message.
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
		slog.Error("superstep node: cannot start", "err", err)
		os.Exit(1)
	}
	lambda.Start(app.HandleNode)
}
