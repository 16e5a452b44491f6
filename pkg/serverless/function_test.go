package serverless_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/superstep/superstep/examples/loop"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
)

// TestFunctionWiresItsParts: Options.Function wires only what the named
// function uses (its cold start); the handlers of other functions refuse
// their events with an error naming the function that serves them; an
// unknown function is refused by New.
func TestFunctionWiresItsParts(t *testing.T) {
	g, err := loop.Graph()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(g)
	if err != nil {
		t.Fatal(err)
	}
	cfg := serverless.Config{Table: "t", TickQueueURL: "http://127.0.0.1:9/q/tick.fifo", NodeQueueURL: "http://127.0.0.1:9/q/node"}
	for _, tc := range []struct {
		fn                 string
		ticks, api, agents bool
	}{
		{"", true, true, true},
		{serverless.FunctionAPI, false, true, true},
		{serverless.FunctionStream, false, true, true},
		{serverless.FunctionTick, true, false, false},
		{serverless.FunctionNode, true, false, false},
		{serverless.FunctionSweep, false, false, true},
	} {
		t.Run("fn="+tc.fn, func(t *testing.T) {
			app, err := serverless.New(serverless.Options{Config: cfg, Graphs: reg, Function: tc.fn, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			if (app.Ticks != nil) != tc.ticks || (app.API != nil) != tc.api || (app.Agents != nil) != tc.agents {
				t.Fatalf("ticks %v, api %v, agents %v; want %v, %v, %v", app.Ticks != nil, app.API != nil, app.Agents != nil, tc.ticks, tc.api, tc.agents)
			}
			if !tc.ticks {
				if _, err := app.HandleTick(t.Context(), events.SQSEvent{}); err == nil || !strings.Contains(err.Error(), "tick function") {
					t.Errorf("HandleTick on %q: err = %v; want one naming the tick function", tc.fn, err)
				}
			}
			if !tc.api {
				w := httptest.NewRecorder()
				app.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
				if w.Code != http.StatusNotFound {
					t.Errorf("ServeHTTP on %q: %d; want 404", tc.fn, w.Code)
				}
			}
			if !tc.agents {
				if _, err := app.HandleStream(t.Context(), events.DynamoDBEvent{}); err == nil || !strings.Contains(err.Error(), "sweep function") {
					t.Errorf("HandleStream on %q: err = %v; want one naming the sweep function", tc.fn, err)
				}
			}
		})
	}
	if _, err := serverless.New(serverless.Options{Config: cfg, Graphs: reg, Function: "ticker"}); err == nil || !strings.Contains(err.Error(), `"ticker"`) {
		t.Errorf("Function ticker: err = %v; want one naming it", err)
	}
}
