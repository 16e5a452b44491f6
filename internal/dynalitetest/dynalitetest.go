// Package dynalitetest runs dynalite, a DynamoDB emulator in Node.js, for
// tests that drive the real aws-sdk-go-v2 clients.
//
// dynalite keeps tables in a sorted in-memory tree (memory-level), so a
// Query reads a key range in O(log n + k), as DynamoDB does, where moto
// reads and sorts the whole partition on every call; and it validates
// requests as strictly as DynamoDB. It emulates DynamoDB only: a test
// that also needs SQS or Lambda routes DynamoDB's clients here and the
// rest to moto with [Server.Route].
//
// A test that needs its own server calls [Start]; the server stops when
// the test ends. A package with many such tests shares one per test
// binary through a [Shared] that its TestMain closes:
//
//	var dyn dynalitetest.Shared
//
//	func TestMain(m *testing.M) { os.Exit(dyn.Run(m)) }
//
//	func TestSomething(t *testing.T) {
//		srv := dyn.Start(t)
//		client := dynamodb.NewFromConfig(srv.Config)
//		...
//	}
//
// # Finding dynalite
//
// The environment variable SUPERSTEP_DYNALITE names dynalite's package
// directory or its cli.js; without it, the copy `make dynalite` installs
// from the lockfile in this package's npm directory (npm ci
// --ignore-scripts; the native LevelDB binding is not needed in memory).
// Node.js 20 or later must be on PATH. When either is missing, Start
// skips the test with a message that says how to install them, except
// under CI (the environment variable CI set to anything but "", "false"
// or "0"), where it fails the test: CI must not pass by skipping.
//
// # What differs from DynamoDB
//
// dynalite 4.0.0 has no transactions (TransactWriteItems,
// TransactGetItems) and no PartiQL; the stores use neither. It also lacks
// UpdateTimeToLive and ReturnValuesOnConditionCheckFailure, which they
// use: the server is started through serve.js, which answers
// UpdateTimeToLive and DescribeTimeToLive itself (the specification is
// recorded; items are never expired), returns the item a failed
// conditional PutItem, UpdateItem or DeleteItem found when asked to, as
// DynamoDB does, and makes tables ACTIVE at once. Like moto, it has no
// throttling, no capacity limits and no network latency.
package dynalitetest

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// EnvPath is the environment variable naming dynalite's package directory
// or its cli.js.
const EnvPath = "SUPERSTEP_DYNALITE"

// Region is the region of [Server.Config].
const Region = "us-east-1"

// Install says how to install what Start needs; the skip and failure
// messages include it.
const Install = "install Node.js 20+ and run `make dynalite` (npm ci --ignore-scripts in internal/dynalitetest/npm), " +
	"or point " + EnvPath + " at an installed dynalite 4 (npm install dynalite@4.0.0)"

// startTimeout bounds how long Start waits for the server to answer.
const startTimeout = 30 * time.Second

// serveJS starts dynalite; see the package doc.
//
//go:embed serve.js
var serveJS []byte

// Server is a running dynalite.
type Server struct {
	// URL is the endpoint, e.g. http://127.0.0.1:43121.
	URL string
	// Config configures aws-sdk-go-v2 clients for the server: static
	// credentials, region us-east-1 and BaseEndpoint set to URL.
	Config aws.Config

	cmd  *exec.Cmd
	dir  string
	done chan struct{} // closed when the process has exited
	log  *tailBuffer
}

// Start starts dynalite on a free loopback port for t alone and stops it
// when t ends. See the package doc for what happens when dynalite or
// Node.js is missing.
func Start(t testing.TB) *Server {
	t.Helper()
	node, pkg := lookup(t)
	s, err := start(node, pkg)
	if err != nil {
		t.Fatalf("dynalitetest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("dynalitetest: %v", err)
		}
	})
	return s
}

// Route returns a copy of base (a configuration for another emulator,
// such as moto's) whose DynamoDB clients use this server; clients of
// other services keep base's endpoint. The SDK prefers a service's own
// endpoint from the configuration sources to BaseEndpoint, which is how
// the route is made; the environment variable AWS_ENDPOINT_URL, when set
// without AWS_ENDPOINT_URL_DYNAMODB, would defeat it.
func (s *Server) Route(base aws.Config) aws.Config {
	cfg := base.Copy()
	sources := make([]any, 0, len(cfg.ConfigSources)+1)
	sources = append(sources, serviceEndpoint{"DynamoDB": s.URL})
	cfg.ConfigSources = append(sources, cfg.ConfigSources...)
	return cfg
}

// serviceEndpoint is a configuration source giving the base endpoints of
// services by their SDK ID, as the shared config file's services section
// does (the SDK's ServiceBaseEndpointProvider).
type serviceEndpoint map[string]string

// GetServiceBaseEndpoint returns the endpoint of the service sdkID.
func (m serviceEndpoint) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	url, ok := m[sdkID]
	return url, ok, nil
}

// Shared starts one dynalite on first use and hands it to every test that
// asks, so a test binary pays the start-up cost once. The zero value is
// ready to use; call Close from TestMain after m.Run (or use Run). A
// Shared is safe for concurrent use.
type Shared struct {
	mu     sync.Mutex
	srv    *Server
	err    error // a failed start, reported to every later caller
	closed bool
}

// Start returns the shared server, starting it on the first call. When
// dynalite or Node.js is missing it skips or fails t as [Start] does.
func (sh *Shared) Start(t testing.TB) *Server {
	t.Helper()
	node, pkg := lookup(t)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case sh.closed:
		t.Fatal("dynalitetest: Shared.Start called after Close")
	case sh.err != nil:
		t.Fatalf("dynalitetest: %v", sh.err)
	case sh.srv == nil:
		sh.srv, sh.err = start(node, pkg)
		if sh.err != nil {
			t.Fatalf("dynalitetest: %v", sh.err)
		}
	}
	select {
	case <-sh.srv.done:
		t.Fatalf("dynalitetest: the shared dynalite at %s exited early; its output:\n%s", sh.srv.URL, sh.srv.log)
	default:
	}
	return sh.srv
}

// Run runs the package's tests (m.Run), then closes the server, and
// returns the exit code for os.Exit: the tests' code, or 1 when they
// passed but the server did not stop cleanly.
func (sh *Shared) Run(m *testing.M) int {
	code := m.Run()
	if err := sh.Close(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "dynalitetest:", err)
		code = 1
	}
	return code
}

// Close stops the shared server, if it was started. Later calls to Start
// fail their test.
func (sh *Shared) Close() error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.closed = true
	if sh.srv == nil {
		return nil
	}
	err := sh.srv.Stop()
	sh.srv = nil
	return err
}

// Stop kills the server's process group and waits for it to exit. It is
// safe to call more than once.
func (s *Server) Stop() error {
	select {
	case <-s.done:
	default:
		// Negative pid: the whole process group, which start made.
		if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("stop dynalite (pid %d): %w", s.cmd.Process.Pid, err)
		}
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("dynalite (pid %d) did not exit after SIGKILL", s.cmd.Process.Pid)
		}
	}
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			return fmt.Errorf("remove dynalite's temporary directory: %w", err)
		}
		s.dir = ""
	}
	return nil
}

// Available reports whether Start can run dynalite here, and if not,
// why. It neither skips nor fails anything.
func Available() error {
	_, _, err := find()
	return err
}

// lookup finds node and dynalite's package directory, or skips or fails
// t.
func lookup(t testing.TB) (node, pkg string) {
	t.Helper()
	node, pkg, err := find()
	if err == nil {
		return node, pkg
	}
	msg := fmt.Sprintf("dynalitetest: %v; tests against dynalite need it: %s", err, Install)
	if inCI() {
		t.Fatal(msg + " (CI is set, so this is a failure, not a skip)")
	}
	t.Skip("SKIPPING: " + msg)
	return "", ""
}

// find locates node and dynalite's package directory.
func find() (node, pkg string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("node not found on PATH (%w)", err)
	}
	if v := os.Getenv(EnvPath); v != "" {
		pkg = v
		if filepath.Base(v) == "cli.js" {
			pkg = filepath.Dir(v)
		}
		if _, err := os.Stat(filepath.Join(pkg, "cli.js")); err != nil {
			return "", "", fmt.Errorf("%s=%q: no dynalite there (%w)", EnvPath, v, err)
		}
		return node, pkg, nil
	}
	pkg = filepath.Join(npmDir(), "node_modules", "dynalite")
	if _, err := os.Stat(filepath.Join(pkg, "cli.js")); err != nil {
		return "", "", fmt.Errorf("dynalite is not installed in %s and %s is not set", pkg, EnvPath)
	}
	return node, pkg, nil
}

// npmDir is this package's npm directory, where `make dynalite` installs
// dynalite: found from this source file's path, which go test compiles
// in.
func npmDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("internal", "dynalitetest", "npm")
	}
	return filepath.Join(filepath.Dir(file), "npm")
}

// inCI reports whether the environment variable CI asks for strictness.
func inCI() bool {
	v := strings.TrimSpace(os.Getenv("CI"))
	return v != "" && !strings.EqualFold(v, "false") && v != "0"
}

// start runs dynalite on a free port and waits until it answers. A port
// taken between choosing and binding it is retried with another.
func start(node, pkg string) (*Server, error) {
	var errs []error
	for range 3 {
		s, err := startOnce(node, pkg)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func startOnce(node, pkg string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "dynalitetest-")
	if err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "serve.js")
	if err := os.WriteFile(script, serveJS, 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(node, script, pkg, strconv.Itoa(port))
	cmd.SysProcAttr = sysProcAttr()
	log := &tailBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", node, err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	s := &Server{URL: url, Config: config(url), cmd: cmd, dir: dir, done: make(chan struct{}), log: log}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(); err != nil {
		stopErr := s.Stop()
		return nil, errors.Join(fmt.Errorf("dynalite (%s) on port %d: %w; its output:\n%s", pkg, port, err, log), stopErr)
	}
	return s, nil
}

// waitReady polls the server until it answers its health check (GET /),
// exits or times out.
func (s *Server) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), "healthy") {
				return nil
			}
			err = fmt.Errorf("GET / answered %s %q", resp.Status, body)
		}
		select {
		case <-s.done:
			return errors.New("exited before answering")
		case <-ctx.Done():
			return fmt.Errorf("no answer within %v: %w", startTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// config returns an aws.Config for the server at url.
func config(url string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(url),
		// The emulator is local; a retry storm would only hide bugs.
		RetryMaxAttempts: 3,
	}
}

// tailBuffer keeps the last max bytes written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if over := len(w.b) - w.max; over > 0 {
		w.b = append(w.b[:0], w.b[over:]...)
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
