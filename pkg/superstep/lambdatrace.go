package superstep

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/superstep/superstep/pkg/serverless"
)

// flushing exports the spans of each invocation before it returns: the
// Lambda runtime freezes the process between invocations, so spans left
// in the batcher could wait until the next one, or be lost.
type flushing struct {
	next lambda.Handler
	app  *serverless.App
}

// Invoke runs the function's handler, then flushes the tracer.
func (f flushing) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := f.next.Invoke(ctx, payload)
	if ferr := f.app.Tracer.Flush(ctx); ferr != nil {
		f.app.Logger.WarnContext(ctx, "export the invocation's spans", "err", ferr)
	}
	return out, err
}

// shutdownTracer exports what is left when Lambda stops the process.
func shutdownTracer(app *serverless.App) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_ = app.Tracer.Shutdown(ctx)
}
