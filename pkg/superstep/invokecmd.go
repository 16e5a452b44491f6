//go:build !superstep.lambda

package superstep

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/spf13/cobra"

	"github.com/superstep/superstep/pkg/lambdafn"
	"github.com/superstep/superstep/pkg/serverless"
)

func newInvokeCmd(env Env) *cobra.Command {
	var event string
	c := &cobra.Command{
		Use:   "invoke FUNCTION --event FILE",
		Short: "Invoke a Lambda function's handler here with one event",
		Long: `Invoke the handler of FUNCTION (api, tick, node, sweep or stream) in this process
with the event in FILE (- for stdin), as Lambda would, and print its
response. The function's configuration comes from the environment, as in
Lambda: TABLE_NAME, TICK_QUEUE_URL, NODE_QUEUE_URL (and START_QUEUE_URL,
API_TOKEN, AWS_ENDPOINT_URL, AWS_REGION); see pkg/serverless/README.md.
An error the handler returns exits 1 with its message.`,
		Example: `  TABLE_NAME=superstep TICK_QUEUE_URL=http://127.0.0.1:5000/123456789012/superstep-ticks.fifo \
  NODE_QUEUE_URL=http://127.0.0.1:5000/123456789012/superstep-nodes AWS_ENDPOINT_URL=http://127.0.0.1:5000 \
  superstep invoke api --event events/api-create-run.json`,
		Args: exactArgs("FUNCTION"),
		RunE: func(c *cobra.Command, args []string) error {
			name := args[0]
			if !slices.Contains(lambdafn.Functions(), name) {
				return usageErr(c, fmt.Errorf("unknown function %q: want one of %s", name, strings.Join(lambdafn.Functions(), ", ")))
			}
			if event == "" {
				return usageErr(c, fmt.Errorf("missing --event FILE"))
			}
			var payload []byte
			var err error
			if event == "-" {
				payload, err = io.ReadAll(env.Stdin)
			} else {
				payload, err = os.ReadFile(event)
			}
			if err != nil {
				return badInput(fmt.Errorf("read --event: %w", err))
			}
			app, err := serverless.FromEnv(c.Context(), serverless.Options{
				Config:     serverless.Config{APIToken: env.s.token},
				Graphs:     env.s.reg,
				Logger:     env.logger(0),
				Middleware: env.s.wrap,
				LongTerm:   env.s.longTerm,
			})
			if err != nil {
				return badInput(err)
			}
			// The process ends after this one invocation: export its
			// spans (and stop the provider) before it does.
			defer shutdownTracer(app)
			installLogger(app.Tracer, app.Logger)
			if err := env.s.mount(app.API); err != nil {
				return badInput(err)
			}
			h, err := lambdafn.Handler(app, name)
			if err != nil {
				return usageErr(c, err)
			}
			out, err := lambda.NewHandler(h).Invoke(c.Context(), payload)
			if err != nil {
				return failed(fmt.Errorf("%s: %w", name, err))
			}
			fmt.Fprintf(env.Stdout, "%s\n", out)
			return nil
		},
	}
	c.Flags().StringVar(&event, "event", "", "`FILE` holding the event (JSON), or - for stdin")
	return c
}
