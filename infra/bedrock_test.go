package infra

import "testing"

// Agents and embedders on Bedrock: the models named in BedrockModelArns
// (and only those) may be invoked by the functions that run nodes (tick,
// node) and embed store puts (api); with the parameter empty, the
// default, no function may invoke any model.
func TestBedrockModelPermissions(t *testing.T) {
	tp := loadTemplate(t)
	const model = "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0"
	const other = "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-opus-4-1"
	callers := map[string]bool{"ApiFunction": true, "TickFunction": true, "NodeFunction": true}
	for _, on := range []bool{false, true} {
		d := newDeployment(t, tp, "bedrock-test", "http://127.0.0.1:1")
		if on {
			d.conditions["HasBedrockModels"] = true
			d.refs["BedrockModelArns"] = model
		}
		for _, fn := range []string{"ApiFunction", "TickFunction", "NodeFunction", "SweepFunction", "StreamFunction"} {
			grants := roleGrantsOf(t, tp, d, fn)
			for _, action := range []string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"} {
				if got, want := allowed(grants, action, model), on && callers[fn]; got != want {
					t.Errorf("BedrockModelArns set %v: %s may %s on the model: %v, want %v", on, fn, action, got, want)
				}
				if allowed(grants, action, other) {
					t.Errorf("BedrockModelArns set %v: %s may %s on a model not named", on, fn, action)
				}
			}
		}
	}
}
