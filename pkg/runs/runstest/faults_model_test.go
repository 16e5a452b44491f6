package runstest

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/superstep/superstep/pkg/runs"
)

// The model with operations of unknown outcome (faultModel): such an
// operation may have taken effect or not, at any time after its call; it
// does not make every history legal.
func TestFaultModelUnknownOutcomes(t *testing.T) {
	const inf = math.MaxInt64
	create := func(run string, st runs.Strategy, call, ret int64, out linOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: 0, Input: linInput{Thread: "t", Op: "create", Run: run, Strategy: st}, Call: call, Output: out, Return: ret}
	}
	read := func(call, ret int64, msgs ...string) porcupine.Operation {
		return porcupine.Operation{ClientId: 1, Input: linInput{Thread: "t", Op: "read"}, Call: call, Output: linOutput{Messages: msgs}, Return: ret}
	}
	cancel := func(run string, call, ret int64, out linOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: 2, Input: linInput{Thread: "t", Op: "cancel", Run: run}, Call: call, Output: out, Return: ret}
	}
	wait := func(run string, call, ret int64, status string) porcupine.Operation {
		return porcupine.Operation{ClientId: 3, Input: linInput{Thread: "t", Op: "wait", Run: run}, Call: call, Output: linOutput{Status: status}, Return: ret}
	}
	unknown := linOutput{Err: errUnknown}
	completed := map[string]runFact{"a": {Status: "completed", Writes: 3}}
	tests := []struct {
		name    string
		history []porcupine.Operation
		facts   map[string]runFact
		want    porcupine.CheckResult
	}{
		{"lost create took effect", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, inf, unknown),
			read(10, 20, "a", "re:a", "done"),
		}, completed, porcupine.Ok},
		{"lost create never took effect", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, inf, unknown),
			read(10, 20),
			read(30, 40),
		}, nil, porcupine.Ok},
		{"lost create took effect late", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, inf, unknown),
			read(10, 20),
			read(30, 40, "a", "re:a", "done"),
		}, completed, porcupine.Ok},
		{"lost create's writes cannot vanish", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, inf, unknown),
			read(10, 20, "a", "re:a", "done"),
			read(30, 40),
		}, completed, porcupine.Illegal},
		{"lost create does not excuse other writes", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, inf, unknown),
			read(10, 20, "b", "re:b", "done"),
		}, completed, porcupine.Illegal},
		{"lost create's run ends once", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, inf, unknown),
			read(10, 20, "a", "re:a", "done", "a", "re:a", "done"),
		}, completed, porcupine.Illegal},
		{"a run cancelled by a lost cancel", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, 5, linOutput{}),
			cancel("a", 1, inf, unknown),
			wait("a", 10, 20, "cancelled"),
		}, map[string]runFact{"a": {Status: "cancelled", Writes: 1}}, porcupine.Ok},
		{"a lost cancel that never took effect", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, 5, linOutput{}),
			cancel("a", 1, inf, unknown),
			wait("a", 10, 20, "completed"),
		}, completed, porcupine.Ok},
		{"a lost create refused by reject", []porcupine.Operation{
			create("askA", runs.StrategyEnqueue, 0, 5, linOutput{}),
			create("b", runs.StrategyReject, 6, inf, unknown),
			wait("askA", 10, 20, "interrupted"),
			read(30, 40, "askA"),
		}, nil, porcupine.Ok},
		{"a cancel as the last step was done", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, 5, linOutput{}),
			cancel("a", 6, 8, linOutput{}),
			read(10, 20, "a", "re:a", "done"),
			wait("a", 30, 40, "cancelled"),
		}, map[string]runFact{"a": {Status: "cancelled", Writes: 3}}, porcupine.Ok},
		{"a run cancelled with all its writes keeps them", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, 5, linOutput{}),
			cancel("a", 6, 8, linOutput{}),
			read(10, 20, "a", "re:a", "done"),
			wait("a", 30, 40, "cancelled"),
			read(50, 60),
		}, map[string]runFact{"a": {Status: "cancelled", Writes: 3}}, porcupine.Illegal},
		{"no cancel, no cancelled run with all its writes", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, 5, linOutput{}),
			read(10, 20, "a", "re:a", "done"),
			wait("a", 30, 40, "cancelled"),
		}, map[string]runFact{"a": {Status: "cancelled", Writes: 3}}, porcupine.Illegal},
		{"no cancel, no cancelled run", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, 5, linOutput{}),
			wait("a", 10, 20, "cancelled"),
		}, map[string]runFact{"a": {Status: "cancelled", Writes: 1}}, porcupine.Illegal},
		{"a lost cancel after the status read did not cancel it", []porcupine.Operation{
			create("a", runs.StrategyEnqueue, 0, 5, linOutput{}),
			wait("a", 10, 20, "cancelled"),
			cancel("a", 30, inf, unknown),
		}, map[string]runFact{"a": {Status: "cancelled", Writes: 1}}, porcupine.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := porcupine.CheckOperations(faultModel(newLinModel(tt.history, tt.facts)), tt.history)
			want := tt.want == porcupine.Ok
			if got != want {
				t.Errorf("linearizable = %v, want %v", got, want)
			}
		})
	}
}
