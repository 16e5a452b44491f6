package infra

import (
	"fmt"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/serverless"
)

// TestStreamFunctionURL: StreamFunction is reached through a function URL
// in RESPONSE_STREAM mode whose auth follows AuthMode as the HTTP API's
// does: AWS_IAM, or NONE with a public invoke permission (only by way of
// the URL) and the JWT issuer and audiences in the function's environment
// for the check it makes itself. The api function's agent cards point at
// the URL, and it is an output.
func TestStreamFunctionURL(t *testing.T) {
	tp := loadTemplate(t)
	url := tp.resource(t, "StreamFunctionUrl", "AWS::Lambda::Url")
	if got := url.Properties["InvokeMode"]; got != "RESPONSE_STREAM" {
		t.Errorf("StreamFunctionUrl.InvokeMode = %v, want RESPONSE_STREAM (lambdaurl streams only in that mode)", got)
	}
	if id, attr, ok := refTarget(url.Properties["TargetFunctionArn"]); !ok || id != "StreamFunction" || attr != "Arn" {
		t.Errorf("StreamFunctionUrl.TargetFunctionArn = %v, want !GetAtt StreamFunction.Arn", url.Properties["TargetFunctionArn"])
	}
	wantAuth := fmt.Sprint(map[string]any{"Fn::If": []any{"UseJWT", "NONE", "AWS_IAM"}})
	if got := fmt.Sprint(url.Properties["AuthType"]); got != wantAuth {
		t.Errorf("StreamFunctionUrl.AuthType = %s, want !If [UseJWT, NONE, AWS_IAM] (as the HTTP API's AuthMode)", got)
	}

	// AuthType NONE: anyone may invoke through the URL, and only
	// through it; the function checks the token.
	res := asMap(tp["Resources"])
	public := map[string]bool{}
	for _, p := range tp.resources("AWS::Lambda::Permission") {
		id, _, ok := refTarget(p.Properties["FunctionName"])
		if !ok || (id != "StreamFunction" && id != "StreamFunction.Alias") {
			continue
		}
		if id != "StreamFunction.Alias" {
			t.Errorf("%s: FunctionName !Ref %s, want !Ref StreamFunction.Alias (the URL is on the alias)", p.ID, id)
		}
		if cond := asMap(res[p.ID])["Condition"]; cond != "UseJWT" {
			t.Errorf("%s: Condition %v, want UseJWT (IAM mode grants no public access)", p.ID, cond)
		}
		if p.Properties["Principal"] != "*" {
			t.Errorf("%s: Principal %v, want *", p.ID, p.Properties["Principal"])
		}
		action := fmt.Sprint(p.Properties["Action"])
		switch action {
		case "lambda:InvokeFunctionUrl":
			if p.Properties["FunctionUrlAuthType"] != "NONE" {
				t.Errorf("%s: FunctionUrlAuthType %v, want NONE", p.ID, p.Properties["FunctionUrlAuthType"])
			}
		case "lambda:InvokeFunction":
			if v, ok := asBool(p.Properties["InvokedViaFunctionUrl"]); !ok || !v {
				t.Errorf("%s: lambda:InvokeFunction for anyone without InvokedViaFunctionUrl: true", p.ID)
			}
		default:
			t.Errorf("%s: action %s on StreamFunction", p.ID, action)
		}
		public[action] = true
	}
	if !public["lambda:InvokeFunctionUrl"] || !public["lambda:InvokeFunction"] {
		t.Errorf("public permissions of StreamFunction %v; want lambda:InvokeFunctionUrl and lambda:InvokeFunction (via the URL), under UseJWT", public)
	}

	fn := tp.resource(t, "StreamFunction", "AWS::Serverless::Function")
	vars := asMap(asMap(fn.Properties["Environment"])["Variables"])
	for k, want := range map[string]string{
		"JWT_ISSUER":   fmt.Sprint(map[string]any{"Fn::If": []any{"UseJWT", map[string]any{"Ref": "JwtIssuer"}, ""}}),
		"JWT_AUDIENCE": fmt.Sprint(map[string]any{"Fn::If": []any{"UseJWT", map[string]any{"Fn::Join": []any{",", map[string]any{"Ref": "JwtAudience"}}}, ""}}),
	} {
		if got := fmt.Sprint(vars[k]); got != want {
			t.Errorf("StreamFunction %s = %s, want %s", k, got, want)
		}
	}
	if _, ok := fn.Properties["FunctionUrlConfig"]; ok {
		t.Error("StreamFunction has a FunctionUrlConfig as well as StreamFunctionUrl")
	}
	timeout, ok := asInt(tp.functionProp(fn, "Timeout"))
	if !ok || timeout > 900 || time.Duration(timeout)*time.Second < 10*serverless.FunctionURLMargin {
		t.Errorf("StreamFunction.Timeout = %v; want at most 900 s (Lambda's limit) and well over the stream's margin %v", timeout, serverless.FunctionURLMargin)
	}

	api := tp.resource(t, "ApiFunction", "AWS::Serverless::Function")
	su := asMap(asMap(api.Properties["Environment"])["Variables"])[serverless.EnvStreamURL]
	if id, attr, ok := refTarget(su); !ok || id != "StreamFunctionUrl" || attr != "FunctionUrl" {
		t.Errorf("ApiFunction %s = %v, want !GetAtt StreamFunctionUrl.FunctionUrl", serverless.EnvStreamURL, su)
	}
	out := asMap(asMap(tp["Outputs"])["StreamUrl"])
	if id, attr, ok := refTarget(out["Value"]); !ok || id != "StreamFunctionUrl" || attr != "FunctionUrl" {
		t.Errorf("output StreamUrl = %v, want !GetAtt StreamFunctionUrl.FunctionUrl", out["Value"])
	}
}
