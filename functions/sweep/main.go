// Command sweep is the sweep Lambda function: fed by the table's stream,
// it deletes what is left of a finished run (steps, task results, claims,
// blobs) once DynamoDB's TTL has deleted the run's record.
// Configuration is read from the environment; see pkg/serverless/README.md.
package main

import "github.com/superstep/superstep/pkg/serverless"

func main() {
	serverless.Main("sweep", func(a *serverless.App) any { return a.HandleStream })
}
