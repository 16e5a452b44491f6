package a2a_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// process is one superstep process on a SQLite file: scheduler, HTTP
// API and A2A server with push notifications kept in the file.
type process struct {
	url  string
	db   *sqlite.Store
	stop func()
}

func startProcess(t *testing.T, path string, push a2a.PushOptions) *process {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(chatGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: db, Checkpoints: db, Logger: log})
	schedCtx, crash := context.WithCancel(ctx)
	if err := sched.Start(schedCtx); err != nil {
		t.Fatal(err)
	}
	svc := &runs.Service{Graphs: reg, Runs: db, Checkpoints: db, Dispatcher: sched, Logger: log}
	push.Store = db
	srv, err := a2a.New(svc, a2a.WithLogger(log), a2a.WithEvents(sched), a2a.WithPushNotifications(push))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.ResumePush(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Config{Service: svc, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h.Handle(a2a.Pattern, srv)
	hs := httptest.NewServer(srv.PublicCards(h))
	var stopped bool
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		hs.Close()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = sched.Shutdown(sctx, 0)
		crash()
		_ = db.Close()
	}
	t.Cleanup(stop)
	return &process{url: hs.URL, db: db, stop: stop}
}

// waitPushed waits until the receiver's last accepted notification is of
// state last.
func waitPushed(t *testing.T, rc *receiver, last core.TaskState) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		states, _, _ := rc.snapshot()
		if len(states) > 0 && states[len(states)-1] == string(last) || time.Now().After(deadline) {
			return states
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPushConfigsSurviveRestart: configs and their delivery cursors are
// kept with the runs (SQLite here): a new server on the same file lists
// the config, without its secrets, and goes on delivering from where the
// first one stopped: each state once across both processes.
func TestPushConfigsSurviveRestart(t *testing.T) {
	rc := &receiver{}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	path := filepath.Join(t.TempDir(), "superstep.db")
	opts := a2a.PushOptions{AllowPrivateNetworks: true, Backoff: 10 * time.Millisecond}
	ctx := context.Background()

	first := startProcess(t, path, opts)
	c1 := (&env{url: first.url}).client(t, "chat", "1.0")
	cfg := &core.PushConfig{ID: "hook", URL: hook.URL, Token: "tok", Auth: &core.PushAuthInfo{Scheme: "Bearer", Credentials: "secret"}}
	task := send(t, c1, text("ask"), &core.SendMessageConfig{PushConfig: cfg})
	wantState(t, task, core.TaskStateInputRequired)
	before := waitPushed(t, rc, core.TaskStateInputRequired)
	if len(before) == 0 || before[len(before)-1] != string(core.TaskStateInputRequired) {
		t.Fatalf("before the restart the receiver got %v; want it to end with input-required", before)
	}
	// The receiver has it; wait for its cursor too, so that the stop is
	// not a crash between a notification and its cursor (after which the
	// notification is sent again, by design: at least once).
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := first.db.GetPushConfig(ctx, string(task.ID), "hook")
		if err == nil && strings.Contains(strings.ToLower(c.Last), "input") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cursor of the config did not reach input-required: %+v, %v", c, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	first.stop()

	second := startProcess(t, path, opts)
	c2 := (&env{url: second.url}).client(t, "chat", "1.0")
	list, err := c2.ListTaskPushConfigs(ctx, &core.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || len(list) != 1 || list[0].ID != "hook" || list[0].URL != hook.URL {
		t.Fatalf("after the restart ListTaskPushConfigs: %+v, %v; want the config", list, err)
	}
	if list[0].Token != "" || list[0].Auth == nil || list[0].Auth.Credentials != "" {
		t.Errorf("listed config %+v (auth %+v) shows its secrets", list[0], list[0].Auth)
	}
	done := send(t, c2, core.NewMessageForTask(core.MessageRoleUser, task, core.NewTextPart("eve")), nil)
	wantState(t, done, core.TaskStateCompleted)
	waitPushed(t, rc, core.TaskStateCompleted)
	want := append(slices.Clone(before), string(core.TaskStateWorking), string(core.TaskStateCompleted))
	time.Sleep(100 * time.Millisecond)
	if states, _, _ := rc.snapshot(); !slices.Equal(states, want) {
		t.Errorf("delivered %v; want %v (each state once, across the restart)", states, want)
	}
	_, _, headers := rc.snapshot()
	for _, h := range headers {
		if h.Get("A2A-Notification-Token") != "tok" || h.Get("Authorization") != "Bearer secret" {
			t.Fatalf("notification headers %v: want the stored token and credentials", h)
		}
	}
}
