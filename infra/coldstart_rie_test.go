package infra

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/rietest"
	"github.com/superstep/superstep/pkg/serverless"
)

// coldStartsEnv turns TestColdStarts on; its value is the number of cold
// starts per function (20 when it is not a number).
const coldStartsEnv = "SUPERSTEP_COLDSTARTS"

// TestColdStarts measures each Lambda function's Init duration as Lambda
// defines it: from the start of the bootstrap's process to its first
// request for an event (GET /2018-06-01/runtime/invocation/next), when the
// function has wired everything it serves. The runtime interface emulator
// cannot time this (it starts the process on the first invoke and reports
// an "Init Duration" of about 0.1 ms), so the test serves that one
// endpoint of the runtime API itself and starts the bootstrap, built as
// the Makefile builds it, n times per function. It logs p50, p95 and the
// binary's size, and fails when a p50 is over 100 ms. Not in make test:
//
//	SUPERSTEP_COLDSTARTS=20 go test -run TestColdStarts -v ./infra/
func TestColdStarts(t *testing.T) {
	v := os.Getenv(coldStartsEnv)
	if v == "" {
		t.Skipf("set %s=20 to measure 20 cold starts per function", coldStartsEnv)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		n = 20
	}
	bin := t.TempDir()
	rietest.BuildBootstrap(t, "..", "./functions/...", bin+string(os.PathSeparator))
	// The configuration a deployed function has; nothing is reached at
	// init (the endpoint is closed).
	env := []string{
		serverless.EnvTable + "=t",
		serverless.EnvTickQueue + "=http://127.0.0.1:9/q/tick.fifo",
		serverless.EnvNodeQueue + "=http://127.0.0.1:9/q/node",
		serverless.EnvStartQueue + "=http://127.0.0.1:9/q/start",
		"AWS_ENDPOINT_URL=http://127.0.0.1:9",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_LAMBDA_FUNCTION_NAME=cold", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512",
		"SUPERSTEP_FUNCTION=",
	}
	for _, fn := range []string{"api", "tick", "node", "sweep", "stream"} {
		t.Run(fn, func(t *testing.T) {
			path := filepath.Join(bin, fn)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			var inits []float64
			for range n {
				inits = append(inits, coldStart(t, path, env))
			}
			slices.Sort(inits)
			p50, p95 := quantile(inits, 0.50), quantile(inits, 0.95)
			t.Logf("%-6s init p50 %6.1f ms  p95 %6.1f ms  (min %.1f, max %.1f, %d cold starts)  binary %.1f MB",
				fn, p50, p95, inits[0], inits[len(inits)-1], len(inits), float64(fi.Size())/(1<<20))
			if p50 > 100 {
				t.Errorf("%s: init p50 %.1f ms, over the 100 ms target", fn, p50)
			}
		})
	}
}

// coldStart starts the bootstrap at path with a runtime API that only
// notes the first request for an event, and returns the milliseconds from
// the process's start to that request.
func coldStart(t *testing.T, path string, env []string) float64 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan time.Time, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/2018-06-01/runtime/invocation/next" {
			select {
			case next <- time.Now():
			default:
			}
			<-r.Context().Done() // no event: the process is stopped
			return
		}
		http.NotFound(w, r) // e.g. /runtime/init/error: the init failed
	})}
	go srv.Serve(l)
	defer srv.Close()
	cmd := exec.Command(path)
	cmd.Env = append(append(os.Environ(), env...), "AWS_LAMBDA_RUNTIME_API="+l.Addr().String())
	out := &limitedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	select {
	case at := <-next:
		return float64(at.Sub(start).Microseconds()) / 1000
	case <-time.After(30 * time.Second):
		t.Fatalf("%s asked for no event within 30 s; its output:\n%s", filepath.Base(path), out.String())
	}
	return 0
}

// limitedBuffer keeps the first 64 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }

// quantile returns the q-quantile of sorted values (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
