// Package rietest runs a Lambda bootstrap behind the AWS Lambda Runtime
// Interface Emulator, as `sam local invoke` does but without Docker: the
// emulator (github.com/aws/aws-lambda-runtime-interface-emulator, built
// from the module proxy on first use and cached) serves the Lambda
// runtime API to the bootstrap and an invoke endpoint to the test.
package rietest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/testkit"
)

// Module and Version of the emulator built by [Emulator].
const (
	Module  = "github.com/aws/aws-lambda-runtime-interface-emulator"
	Version = "v0.0.0-20261030222936-bef5c4ba774d"
)

// Binary returns the path of the emulator's binary, building it with
// `go install` into the user's cache directory the first time (keyed by
// Version). A failed build fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "superstep-test", "aws-lambda-rie-"+Version)
	bin := filepath.Join(dir, "aws-lambda-rie")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-") // same file system: rename is atomic
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", Module+"/cmd/aws-lambda-rie@"+Version)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the Lambda runtime interface emulator (%s@%s; needs the Go module proxy): %v\n%s", Module, Version, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
		if _, serr := os.Stat(bin); serr != nil {
			t.Fatalf("cache the emulator: %v", err)
		}
	}
	return bin
}

// BuildBootstrap builds pkg (a main package, built in dir) for linux on
// this machine's architecture as out, the way the Makefile's build-*
// targets do for Lambda.
func BuildBootstrap(t testing.TB, dir, pkg, out string, env ...string) {
	t.Helper()
	// No -trimpath: the build reuses what the tests compiled.
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0"), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the bootstrap %s: %v\n%s", pkg, err, b)
	}
}

// Emulator is one running emulator with its bootstrap.
type Emulator struct {
	URL  string // the invoke endpoint
	logs *syncBuffer
	cmd  *exec.Cmd
}

// Start runs bootstrap behind the emulator with env added to this
// process's environment, and stops it when the test ends. The bootstrap
// starts on the first invocation, as in Lambda.
func Start(t testing.TB, bootstrap string, env ...string) *Emulator {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("the Lambda runtime interface emulator runs linux bootstraps; this is %s", runtime.GOOS)
	}
	bin := Binary(t)
	apiPort, invokePort := freePort(t), freePort(t)
	logs := &syncBuffer{}
	cmd := exec.Command(bin,
		"--runtime-interface-emulator-address", "127.0.0.1:"+strconv.Itoa(invokePort),
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(apiPort),
		"--log-level", "error",
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	// The bootstrap is the emulator's child: stop both, and do not wait
	// for output from a bootstrap that holds the pipe.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the emulator: %v", err)
	}
	e := &Emulator{URL: fmt.Sprintf("http://127.0.0.1:%d/2015-03-31/functions/function/invocations", invokePort), logs: logs, cmd: cmd}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("emulator and bootstrap output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", invokePort), time.Second)
		if err == nil {
			c.Close()
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("the emulator does not listen: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Invoke sends payload to the function and returns the response's status
// and body. A handler's error comes back as the emulator reports it: a
// JSON object with errorType and errorMessage; a bootstrap that exits
// (fails its init) as a 502.
func (e *Emulator) Invoke(t testing.TB, payload []byte) (int, []byte) {
	t.Helper()
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Post(e.URL, "application/json", bytes.NewReader(payload))
	if err != nil {
		t.Fatalf("invoke: %v\n%s", err, e.logs.String())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// Logs returns what the emulator and the bootstrap wrote so far.
func (e *Emulator) Logs() string { return e.logs.String() }

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer collects the emulator's output while the test reads it.
type syncBuffer = testkit.Buffer
