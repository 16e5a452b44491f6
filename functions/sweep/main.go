// Command sweep is the sweep Lambda function: fed by the table's stream,
// it deletes what is left of a finished run (steps, task results, claims,
// blobs) once DynamoDB's TTL has deleted the run's record.
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
		slog.Error("superstep sweep: cannot start", "err", err)
		os.Exit(1)
	}
	lambda.Start(app.HandleStream)
}
