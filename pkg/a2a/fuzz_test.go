package a2a

import (
	"encoding/json"
	"testing"
)

// FuzzParseEnvelope: a JSON-RPC request body from the network never
// panics the envelope parser or the params check; what it accepts names
// a known method, with an id that is a string or number as sent and
// params that are JSON; what it refuses carries a JSON-RPC error code and
// a message. `go test` runs the seeds; longer:
// make fuzz FUZZ=FuzzParseEnvelope PKG=./pkg/a2a
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t1"}}`,
		`{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","method":"SendMessage","params":{"message":{}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"ListTasks","params":{"pageSize":0}}`,
		`{"jsonrpc":"1.0","id":1,"method":"GetTask"}`,
		`{"jsonrpc":"2.0","id":{},"method":"GetTask"}`,
		`{"jsonrpc":"2.0","id":1,"method":"nope"}`,
		`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}`,
		`[{"jsonrpc":"2.0"}]`, `null`, ``, `{`, `"\udfff"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		id, _, params, name, m, rerr := parseEnvelope(body)
		if rerr != nil {
			if rerr.code == 0 || rerr.msg == "" {
				t.Fatalf("parseEnvelope(%q): error without code or message: %+v", body, rerr)
			}
			return
		}
		if name == "" {
			t.Fatalf("parseEnvelope(%q) accepted a request without a method", body)
		}
		if _, ok := lookupMethod(name); !ok {
			t.Fatalf("parseEnvelope(%q) accepted unknown method %q", body, name)
		}
		if id != nil && !json.Valid(id) {
			t.Fatalf("parseEnvelope(%q): id %q is not JSON", body, id)
		}
		if len(params) > 0 && !json.Valid(params) {
			t.Fatalf("parseEnvelope(%q): params %q are not JSON", body, params)
		}
		if perr := checkParams(name, m, params); perr != nil && (perr.code == 0 || perr.msg == "") {
			t.Fatalf("checkParams(%q): error without code or message: %+v", params, perr)
		}
	})
}
