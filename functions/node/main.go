// Command node is the node Lambda function: it executes one remote node
// task per message.
// Configuration is read from the environment; see pkg/serverless/README.md.
package main

import "github.com/superstep/superstep/pkg/serverless"

func main() {
	serverless.Main("node", func(a *serverless.App) any { return a.HandleNode })
}
