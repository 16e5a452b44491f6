package a2a_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"google.golang.org/grpc"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// ChatState is the state of the test graph "chat". Its "message" channel
// takes the text of A2A messages.
type ChatState struct {
	Message string `json:"message"`
	Reply   string `json:"reply,omitempty"`
	Count   int    `json:"count,omitempty"`
}

// chatGraph answers by the message:
//
//	"ask"     asks for a name (input-required), replies "hello <name>"
//	"auth"    asks for credentials (auth-required), replies "token <value>"
//	"fail"    fails with an error that must not reach callers
//	"slow"    runs until cancelled (or 30s)
//	"drain"   asks the run to drain after step 1 (reason "maintenance")
//	"invalid" is refused by the graph's input validation
//	anything else: replies with the message in capitals
func chatGraph(t testing.TB) *pregel.Graph {
	t.Helper()
	b := pregel.NewGraph[ChatState]("chat").Describe("Answers chat messages.")
	b.ValidateInput(func(s ChatState) error {
		if s.Message == "invalid" {
			return errors.New(`message must not be "invalid"`)
		}
		return nil
	})
	b.AddFunc("answer", func(ctx context.Context, s ChatState) (ChatState, error) {
		switch s.Message {
		case "ask":
			name, err := pregel.Interrupt[string](ctx, map[string]any{"question": "what is your name?"})
			if err != nil {
				return ChatState{}, err
			}
			return ChatState{Reply: "hello " + name}, nil
		case "auth":
			tok, err := pregel.Interrupt[string](ctx, map[string]any{"question": "your token?", "auth_required": true})
			if err != nil {
				return ChatState{}, err
			}
			return ChatState{Reply: "token " + tok}, nil
		case "fail":
			return ChatState{}, errors.New("secret internal detail at 10.0.0.7")
		case "slow":
			select {
			case <-ctx.Done():
				return ChatState{}, ctx.Err()
			case <-time.After(30 * time.Second):
				return ChatState{Reply: "slow"}, nil
			}
		case "drain":
			pregel.RequestDrain(ctx, "maintenance")
			return ChatState{Reply: "drained once"}, nil
		}
		return ChatState{Reply: strings.ToUpper(s.Message)}, nil
	}, pregel.Describe("Answer", "replies to the message"))
	b.AddFunc("count", func(ctx context.Context, s ChatState) (ChatState, error) {
		return ChatState{Count: len(s.Reply)}, nil
	})
	b.AddEdge(pregel.Start, "answer")
	b.AddEdge("answer", "count")
	b.AddEdge("count", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// SumState is the state of the test graph "sum", which takes JSON only.
type SumState struct {
	A   int `json:"a"`
	B   int `json:"b"`
	Sum int `json:"sum,omitempty"`
}

func sumGraph(t testing.TB) *pregel.Graph {
	t.Helper()
	b := pregel.NewGraph[SumState]("sum")
	b.AddFunc("add", func(ctx context.Context, s SumState) (SumState, error) {
		return SumState{Sum: s.A + s.B}, nil
	})
	b.AddEdge(pregel.Start, "add")
	b.AddEdge("add", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// env is a superstep server with the HTTP API and the A2A binding.
type env struct {
	url       string
	streaming bool
	svc       *runs.Service
	sched     *embedded.Scheduler
	// grpcAddr is the gRPC binding's address (envConfig.grpc).
	grpcAddr string
}

type envConfig struct {
	events bool
	sqlite bool   // SQLite stores instead of memory ones
	dynamo bool   // DynamoDB stores (on moto) instead of memory ones
	token  string // the API's bearer token; the cards stay public (Server.PublicCards)
	// threads: the Service keeps threads (A2A contexts are threads).
	threads bool
	// hostCheck: the API's Host check (api.Config.HostCheck) guards
	// everything, as in superstep dev.
	hostCheck bool
	// grpc: serve the gRPC binding too (Server.NewGRPCServer).
	grpc   bool
	opts   []a2a.Option
	graphs []*pregel.Graph
}

// newEnv starts a server with the chat and sum graphs, a scheduler and
// memory stores.
func newEnv(t testing.TB, cfg envConfig) *env {
	t.Helper()
	graphs := cfg.graphs
	if graphs == nil {
		graphs = []*pregel.Graph{chatGraph(t), sumGraph(t)}
	}
	reg, err := runs.NewRegistry(graphs...)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	var records runs.Store = runs.NewMemoryStore()
	var cps pregel.Checkpointer = pregel.NewMemoryStore()
	if cfg.sqlite {
		db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "superstep.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		records, cps = db, db
	}
	if cfg.dynamo {
		srv := mototest.Start(t)
		client := dynamodb.NewFromConfig(srv.Config)
		if err := dynamo.CreateTable(context.Background(), client, "a2a"); err != nil {
			t.Fatal(err)
		}
		db := dynamo.New(client, "a2a")
		records, cps = db, db
	}
	svc := &runs.Service{Graphs: reg, Runs: records, Checkpoints: cps, Logger: log}
	schedCfg := embedded.SchedulerConfig{Graphs: reg, Runs: records, Checkpoints: cps, Logger: log}
	if cfg.threads {
		svc.Threads = records.(runs.ThreadStore)
		schedCfg.OnStop, schedCfg.StartThreadRun = svc.RunStopped, svc.StartThreadRun
	}
	sched := embedded.NewScheduler(schedCfg)
	svc.Dispatcher = sched
	ctx, crash := context.WithCancel(context.Background())
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	opts := []a2a.Option{a2a.WithLogger(log), a2a.WithPollInterval(20 * time.Millisecond)}
	if cfg.events {
		opts = append(opts, a2a.WithEvents(sched), a2a.WithStreaming(true))
	}
	opts = append(opts, cfg.opts...)
	var gln net.Listener
	if cfg.grpc {
		if gln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		opts = append(opts, a2a.WithGRPCAddress(gln.Addr().String()))
	}
	h, err := api.New(api.Config{Service: svc, Logger: log, Token: cfg.token, HostCheck: cfg.hostCheck})
	if err != nil {
		t.Fatal(err)
	}
	a, err := a2a.New(svc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h.Handle(a2a.Pattern, a)
	srv := httptest.NewServer(a.BindingErrors(h.GuardHost(a.PublicCards(h))))
	var gs *grpc.Server
	if gln != nil {
		gs = a.NewGRPCServer(a2a.GRPCConfig{Token: cfg.token})
		go func() { _ = gs.Serve(gln) }()
	}
	t.Cleanup(func() {
		srv.Close()
		if gs != nil {
			gs.Stop()
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sched.Shutdown(sctx, 0)
		crash()
	})
	e := &env{url: srv.URL, svc: svc, sched: sched, streaming: cfg.events}
	if gln != nil {
		e.grpcAddr = gln.Addr().String()
	}
	return e
}

func (e *env) agentURL(graph string) string { return e.url + "/a2a/" + graph }
