package serverless

import (
	"context"
	"log/slog"
	"os"
	"time"

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
	h := lambda.NewHandler(pick(app))
	if app.Tracer == nil {
		lambda.Start(h)
		return
	}
	// The runtime freezes the process between invocations: export each
	// invocation's spans before it returns, and what is left on SIGTERM.
	lambda.StartWithOptions(flushing{h, app}, lambda.WithEnableSIGTERM(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_ = app.Tracer.Shutdown(ctx)
	}))
}

// flushing exports the spans of each invocation before returning.
type flushing struct {
	next lambda.Handler
	app  *App
}

func (f flushing) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := f.next.Invoke(ctx, payload)
	if ferr := f.app.Tracer.Flush(ctx); ferr != nil {
		f.app.Logger.WarnContext(ctx, "export the invocation's spans", "err", ferr)
	}
	return out, err
}
