// Command api is the api Lambda function: it serves the HTTP API (API
// Gateway HTTP API, payload format 2.0) and starts runs from EventBridge
// superstep.StartRun events and start-queue messages.
// Configuration is read from the environment; see pkg/serverless/README.md.
package main

import "github.com/superstep/superstep/pkg/serverless"

func main() {
	serverless.Main("api", func(a *serverless.App) any { return a.HandleAPI })
}
