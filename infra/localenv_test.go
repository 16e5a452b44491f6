package infra

import (
	"encoding/json"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/serverless"
)

// TestFunctionsNameTheirHandler: each function's environment names the
// handler its bootstrap serves (SUPERSTEP_FUNCTION, pkg/superstep).
func TestFunctionsNameTheirHandler(t *testing.T) {
	tp := loadTemplate(t)
	for _, fn := range tp.resources("AWS::Serverless::Function") {
		want := strings.ToLower(strings.TrimSuffix(fn.ID, "Function"))
		got := asMap(asMap(fn.Properties["Environment"])["Variables"])["SUPERSTEP_FUNCTION"]
		if got != want {
			t.Errorf("%s: SUPERSTEP_FUNCTION = %v, want %s", fn.ID, got, want)
		}
	}
}

// TestLocalEnvFile: infra/local-env.json, the --env-vars of the documented
// `sam local invoke`, sets only variables the template declares (SAM
// ignores the others), is a Config the functions start with, and names
// the table and queues `superstep dev --aws --create` makes (prefix
// superstep) on moto_server at port 5000.
func TestLocalEnvFile(t *testing.T) {
	b, err := os.ReadFile("local-env.json")
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]map[string]string
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatalf("local-env.json: %v", err)
	}
	vars := file["Parameters"]
	if len(file) != 1 || len(vars) == 0 {
		t.Fatalf("local-env.json: want one Parameters object for every function, got %v", file)
	}
	tp := loadTemplate(t)
	declared := asMap(asMap(asMap(asMap(tp["Globals"])["Function"])["Environment"])["Variables"])
	for k := range vars {
		if _, ok := declared[k]; !ok {
			t.Errorf("local-env.json sets %s, which Globals.Function.Environment does not declare: SAM would ignore it", k)
		}
	}
	if !strings.HasPrefix(vars["AWS_ENDPOINT_URL"], "http://host.docker.internal:5000") {
		t.Errorf("AWS_ENDPOINT_URL = %q, want moto_server on the Docker host", vars["AWS_ENDPOINT_URL"])
	}
	cfg, err := serverless.ConfigFromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatalf("the functions would not start with local-env.json: %v", err)
	}
	srv := mototest.Start(t)
	made, err := serverless.Provision(t.Context(), srv.Config, serverless.Resources{Prefix: "superstep"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Table != made.Table {
		t.Errorf("TABLE_NAME %s, dev --aws --create makes %s", cfg.Table, made.Table)
	}
	for _, q := range [][2]string{{cfg.TickQueueURL, made.TickQueueURL}, {cfg.NodeQueueURL, made.NodeQueueURL}, {cfg.StartQueueURL, made.StartQueueURL}} {
		if path.Base(q[0]) != path.Base(q[1]) || path.Base(path.Dir(q[0])) != path.Base(path.Dir(q[1])) {
			t.Errorf("queue %s, dev --aws --create makes %s", q[0], q[1])
		}
	}
}
