package a2a

import (
	"encoding/json"
	"reflect"
	"testing"

	pb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestProtoNamesMatchProtoJSON: for every request body of the HTTP+JSON
// binding, with every field set, protoNames turns protojson's output
// with proto names (UseProtoNames) into protojson's output with JSON
// names, and leaves the latter as it is. The keys inside Struct and Value
// (metadata, a data part) stay as written.
func TestProtoNamesMatchProtoJSON(t *testing.T) {
	meta, err := structpb.NewStruct(map[string]any{"trace_id": "t", "nested_obj": map[string]any{"inner_key": 1, "list_key": []any{map[string]any{"deep_key": true}}}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := structpb.NewValue(map[string]any{"channel_name": "x", "message_id": "not a field"})
	if err != nil {
		t.Fatal(err)
	}
	push := &pb.TaskPushNotificationConfig{Tenant: "ten", Id: "cfg", TaskId: "task-1", Url: "https://example.com/hook", Token: "tok",
		Authentication: &pb.AuthenticationInfo{Scheme: "Bearer", Credentials: "cred"}}
	history := int32(3)
	for _, m := range []proto.Message{
		&pb.SendMessageRequest{
			Tenant: "ten",
			Message: &pb.Message{MessageId: "m1", ContextId: "c1", TaskId: "t1", Role: pb.Role_ROLE_USER, Metadata: meta,
				Extensions: []string{"https://ext"}, ReferenceTaskIds: []string{"t0"},
				Parts: []*pb.Part{
					{Content: &pb.Part_Text{Text: "hi"}, Metadata: meta, MediaType: "text/plain", Filename: "a.txt"},
					{Content: &pb.Part_Data{Data: data}, MediaType: "application/json"},
					{Content: &pb.Part_Url{Url: "https://example.com/f"}, MediaType: "image/png"},
					{Content: &pb.Part_Raw{Raw: []byte("raw")}},
				}},
			Configuration: &pb.SendMessageConfiguration{AcceptedOutputModes: []string{"text/plain"}, TaskPushNotificationConfig: push,
				HistoryLength: &history, ReturnImmediately: true},
			Metadata: meta,
		},
		push,
		&pb.CancelTaskRequest{Tenant: "ten", Id: "t1", Metadata: meta},
		&pb.SubscribeToTaskRequest{Tenant: "ten", Id: "t1"},
	} {
		md := m.ProtoReflect().Descriptor()
		t.Run(string(md.Name()), func(t *testing.T) {
			snake, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			camel, err := protojson.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			pm := newProtoMessage(m)
			got, rerr := protoNames(pm, snake)
			if rerr != nil {
				t.Fatalf("protoNames: %v", rerr)
			}
			if !sameJSON(t, got, camel) {
				t.Errorf("protoNames(%s)\n= %s\nwant %s", snake, got, camel)
			}
			same, rerr := protoNames(pm, camel)
			if rerr != nil || string(same) != string(camel) {
				t.Errorf("protoNames of JSON names changed them: %s, %v", same, rerr)
			}
		})
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// BenchmarkRESTBodyCheck measures checkRESTBody on a message:send body
// with JSON names (what a2a-go's client sends: not walked), with JSON
// names and a proto name as a data key (walked, not rewritten) and with
// proto names (rewritten).
func BenchmarkRESTBodyCheck(b *testing.B) {
	rt, _, _ := restRouteFor("POST", "/message:send")
	for _, bc := range []struct{ name, body string }{
		{"json names, a proto name in data", `{"message": {"messageId": "m1", "contextId": "c1", "role": "ROLE_USER", "parts": [{"text": "hello there", "mediaType": "text/plain"}, {"data": {"limit": 5, "task_id": "eve"}}], "metadata": {"trace_id": "t"}}, "configuration": {"historyLength": 5, "returnImmediately": false}}`},
		{"json names", `{"message": {"messageId": "m1", "contextId": "c1", "role": "ROLE_USER", "parts": [{"text": "hello there", "mediaType": "text/plain"}, {"data": {"limit": 5, "user_name": "eve"}}], "metadata": {"trace_id": "t"}}, "configuration": {"historyLength": 5, "returnImmediately": false}}`},
		{"proto names", `{"message": {"message_id": "m1", "context_id": "c1", "role": "ROLE_USER", "parts": [{"text": "hello there", "media_type": "text/plain"}, {"data": {"limit": 5, "user_name": "eve"}}], "metadata": {"trace_id": "t"}}, "configuration": {"history_length": 5, "return_immediately": false}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(bc.body)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := checkRESTBody(rt, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
