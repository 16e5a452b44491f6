package infra

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/serverless"
)

// Environment variables of TestColdStarts (none of them set: it skips).
const (
	// coldStartsEnv turns TestColdStarts on; its value is the number of
	// cold starts per function (20 when it is not a number).
	coldStartsEnv = "SUPERSTEP_COLDSTARTS"
	// coldStartsBaseEnv names a git revision to measure beside the work
	// tree, start for start (the same load for both): e.g. main.
	coldStartsBaseEnv = "SUPERSTEP_COLDSTARTS_BASE"
	// coldStartsNiceEnv, "1", runs the bootstraps (and the test's runtime
	// API) at nice -20, the nearest to a quiet machine a loaded one gives
	// (about 85 times the CPU share of a nice 0 process; not a real-time
	// class, which livelocks the Go runtime's spinning threads on a busy
	// machine). Needs CAP_SYS_NICE.
	coldStartsNiceEnv = "SUPERSTEP_COLDSTARTS_NICE"
)

// lambdaFunctions are the repository's functions/* mains.
var lambdaFunctions = []string{"api", "tick", "node", "sweep", "stream"}

// TestColdStarts measures each Lambda function's Init duration as Lambda
// defines it: from the start of the bootstrap's process to its first
// request for an event (GET /2018-06-01/runtime/invocation/next), when the
// function has wired everything it serves. The runtime interface emulator
// cannot time this (it starts the process on the first invoke and reports
// an "Init Duration" of about 0.1 ms), so the test serves that one
// endpoint of the runtime API itself and starts the bootstrap, built as
// the Makefile's build-* targets build it (-trimpath -ldflags='-s -w'),
// n times per function. For each function it logs p50 and p95 of the
// wall time and of the process's CPU time (user+sys, less noisy than the
// wall time on a loaded machine), the binary's size, and what
// GODEBUG=inittrace=1 says of the package initialisers (count, their
// clock and allocations, the median of 5 runs). It fails when a p50 of
// the wall time is over 100 ms. With SUPERSTEP_COLDSTARTS_BASE=<rev> it
// builds that revision too and alternates its starts with the work
// tree's, so both see the same load. Not in make test:
//
//	SUPERSTEP_COLDSTARTS=20 go test -run TestColdStarts -v -timeout 30m ./infra/
//	SUPERSTEP_COLDSTARTS=20 SUPERSTEP_COLDSTARTS_BASE=main go test -run TestColdStarts -v -timeout 30m ./infra/
func TestColdStarts(t *testing.T) {
	v := os.Getenv(coldStartsEnv)
	if v == "" {
		t.Skipf("set %s=20 to measure 20 cold starts per function", coldStartsEnv)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		n = 20
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	builds := []coldBuild{{name: "work tree", dir: t.TempDir()}}
	lambdaBuild(t, root, builds[0].dir)
	if rev := os.Getenv(coldStartsBaseEnv); rev != "" {
		src := t.TempDir()
		gitArchive(t, root, rev, src)
		base := coldBuild{name: rev, dir: t.TempDir()}
		lambdaBuild(t, src, base.dir)
		builds = append(builds, base)
	}
	if os.Getenv(coldStartsNiceEnv) == "1" {
		// Every thread of this process (the nice value is per thread on
		// Linux; new threads and processes inherit it).
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			tid, _ := strconv.Atoi(task.Name())
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, -20); err != nil {
				t.Fatalf("%s=1: nice -20: %v (needs CAP_SYS_NICE)", coldStartsNiceEnv, err)
			}
		}
		t.Logf("at nice -20: the nearest to a quiet machine")
	}
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
	var table strings.Builder
	fmt.Fprintf(&table, "| function | build | init p50 | p95 | min | CPU p50 | CPU p95 | binary | package inits | their clock | their allocs |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, fn := range lambdaFunctions {
		t.Run(fn, func(t *testing.T) {
			wall := make([][]float64, len(builds))
			cpu := make([][]float64, len(builds))
			for range n {
				for i, b := range builds {
					w, c := coldStart(t, filepath.Join(b.dir, fn), env)
					wall[i], cpu[i] = append(wall[i], w), append(cpu[i], c)
				}
			}
			for i, b := range builds {
				path := filepath.Join(b.dir, fn)
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				it := initTrace(t, path, env)
				slices.Sort(wall[i])
				slices.Sort(cpu[i])
				p50, p95 := quantile(wall[i], 0.50), quantile(wall[i], 0.95)
				t.Logf("%-6s %-10s init p50 %6.1f ms  p95 %6.1f ms  (min %.1f, max %.1f, %d cold starts)  CPU p50 %5.1f ms p95 %5.1f ms  binary %.1f MB  inits %d, %.1f ms clock, %.2f MB in %d allocs",
					fn, b.name, p50, p95, wall[i][0], wall[i][len(wall[i])-1], len(wall[i]),
					quantile(cpu[i], 0.5), quantile(cpu[i], 0.95), float64(fi.Size())/(1<<20),
					it.packages, it.clock, float64(it.bytes)/(1<<20), it.allocs)
				fmt.Fprintf(&table, "| %s | %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.1f MB | %d | %.1f ms | %.2f MB, %d |\n",
					fn, b.name, p50, p95, wall[i][0], quantile(cpu[i], 0.5), quantile(cpu[i], 0.95),
					float64(fi.Size())/(1<<20), it.packages, it.clock, float64(it.bytes)/(1<<20), it.allocs)
				if i == 0 && p50 > 100 {
					t.Errorf("%s: init p50 %.1f ms, over the 100 ms target", fn, p50)
				}
			}
		})
	}
	t.Logf("load average %s\n%s", loadAverage(), table.String())
}

// coldBuild is one set of bootstraps, one per function, in dir.
type coldBuild struct{ name, dir string }

// lambdaBuild builds every functions/* main of the module at root into
// out (one binary per function, named after it), as the Makefile's
// build-* targets do, for this machine's architecture.
func lambdaBuild(t *testing.T, root, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-buildvcs=false", "-ldflags=-s -w",
		"-o", out+string(os.PathSeparator), "./functions/...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the bootstraps in %s: %v\n%s", root, err, b)
	}
}

// gitArchive writes the tree of rev of the repository at root into dir.
func gitArchive(t *testing.T, root, rev, dir string) {
	t.Helper()
	archive := exec.Command("git", "archive", "--format=tar", rev)
	archive.Dir = root
	tar, err := archive.Output()
	if err != nil {
		t.Fatalf("%s=%s: git archive: %v", coldStartsBaseEnv, rev, err)
	}
	x := exec.Command("tar", "-x", "-C", dir)
	x.Stdin = bytes.NewReader(tar)
	if out, err := x.CombinedOutput(); err != nil {
		t.Fatalf("untar %s: %v\n%s", rev, err, out)
	}
}

// coldStart starts the bootstrap at path with a runtime API that only
// notes the first request for an event, and returns the milliseconds from
// the process's start to that request, and the CPU time (user and system)
// the process used, in milliseconds (it is stopped at that request).
func coldStart(t *testing.T, path string, env []string) (wall, cpu float64) {
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
	cmd.Env = append(lambdaEnviron(env), "AWS_LAMBDA_RUNTIME_API="+l.Addr().String())
	out := &limitedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() float64 {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
		}
		return 0
	}
	select {
	case at := <-next:
		wall = float64(at.Sub(start).Microseconds()) / 1000
		return wall, stop()
	case <-time.After(30 * time.Second):
		stop()
		t.Fatalf("%s asked for no event within 30 s; its output:\n%s", filepath.Base(path), out.String())
	}
	return 0, 0
}

// initStats is what GODEBUG=inittrace=1 says of a process's package
// initialisers.
type initStats struct {
	packages      int
	clock         float64 // ms
	bytes, allocs int
}

// initTrace starts the bootstrap at path 5 times with GODEBUG=inittrace=1
// and returns the run with the median clock.
func initTrace(t *testing.T, path string, env []string) initStats {
	t.Helper()
	var runs []initStats
	for range 5 {
		cmd := exec.Command(path)
		// No runtime API: the bootstrap stops after its init.
		cmd.Env = append(lambdaEnviron(env), "AWS_LAMBDA_RUNTIME_API=127.0.0.1:9", "GODEBUG=inittrace=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		_ = cmd.Run()
		var s initStats
		sc := bufio.NewScanner(&stderr)
		for sc.Scan() {
			// init PKG @A ms, B ms clock, C bytes, D allocs
			f := strings.Fields(sc.Text())
			if len(f) != 11 || f[0] != "init" {
				continue
			}
			clock, err1 := strconv.ParseFloat(f[4], 64)
			b, err2 := strconv.Atoi(f[7])
			a, err3 := strconv.Atoi(f[9])
			if err1 != nil || err2 != nil || err3 != nil {
				continue
			}
			s.packages++
			s.clock += clock
			s.bytes += b
			s.allocs += a
		}
		if s.packages == 0 {
			t.Fatalf("%s with GODEBUG=inittrace=1 printed no init lines:\n%s", path, stderr.String())
		}
		runs = append(runs, s)
	}
	slices.SortFunc(runs, func(a, b initStats) int {
		switch {
		case a.clock < b.clock:
			return -1
		case a.clock > b.clock:
			return 1
		}
		return 0
	})
	return runs[len(runs)/2]
}

// lambdaEnviron is this process's environment without what a Lambda
// function's has not (a CA bundle the SDK would parse at init, AWS
// profiles, Go's settings), then env.
func lambdaEnviron(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "GO") || strings.HasSuffix(k, "CA_BUNDLE") || strings.HasPrefix(k, "SSL_CERT") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, env...)
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
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
