// Command tick is the tick Lambda function: it executes or commits one
// superstep per tick message.
// Configuration is read from the environment; see pkg/serverless/README.md.
package main

import "github.com/superstep/superstep/pkg/serverless"

func main() {
	serverless.Main("tick", func(a *serverless.App) any { return a.HandleTick })
}
