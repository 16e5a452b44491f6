// Package mototest runs moto_server, the AWS emulator of the Python moto
// project, for tests that drive the real aws-sdk-go-v2 clients.
//
// A test that needs its own emulator calls [Start]; the server stops when
// the test ends. Starting one costs a few seconds, so a package with many
// such tests shares one server per test binary through a [Shared] that its
// TestMain closes:
//
//	var moto mototest.Shared
//
//	func TestMain(m *testing.M) { os.Exit(moto.Run(m)) }
//
//	func TestSomething(t *testing.T) {
//		srv := moto.Start(t)
//		client := dynamodb.NewFromConfig(srv.Config)
//		...
//	}
//
// Tests sharing a server isolate themselves by resource names (a table or
// queue per test).
//
// When moto_server is not on PATH, Start skips the test with a message that
// says how to install it (pip install 'moto[server]'), except under CI (the
// environment variable CI set to anything but "" or "false"), where it fails
// the test: CI must not pass by skipping.
//
// # Serialized requests
//
// moto_server answers requests on concurrent threads, but its DynamoDB
// backend is not safe for that: a TransactWriteItems that is cancelled
// restores the tables to a copy taken when it began, erasing what other
// requests wrote meanwhile, and conditional writes are checked and applied
// without a lock. Real DynamoDB has neither problem. So that concurrency
// tests see DynamoDB's guarantees, the server is started with a
// sitecustomize module on PYTHONPATH that makes moto handle one request at
// a time (connections are still accepted concurrently).
package mototest

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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Binary is the name of the emulator's executable, looked up on PATH.
const Binary = "moto_server"

// Region is the region of [Server.Config].
const Region = "us-east-1"

// startTimeout bounds how long Start waits for the server to answer.
const startTimeout = 30 * time.Second

// sitecustomize serializes moto's request handling; see the package doc.
//
//go:embed sitecustomize.py
var sitecustomize []byte

// Server is a running moto_server.
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

// Start starts a moto_server on a free loopback port for t alone and stops
// it when t ends. See the package doc for what happens when moto_server is
// missing.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := lookBinary(t)
	s, err := start(bin)
	if err != nil {
		t.Fatalf("mototest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("mototest: %v", err)
		}
	})
	return s
}

// Shared starts one moto_server on first use and hands it to every test
// that asks, so a test binary pays the start-up cost once. The zero value
// is ready to use; call Close from TestMain after m.Run. A Shared is safe
// for concurrent use.
type Shared struct {
	mu     sync.Mutex
	srv    *Server
	err    error // a failed start, reported to every later caller
	closed bool
}

// Start returns the shared server, starting it on the first call. When
// moto_server is missing it skips or fails t as [Start] does.
func (sh *Shared) Start(t testing.TB) *Server {
	t.Helper()
	bin := lookBinary(t)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case sh.closed:
		t.Fatal("mototest: Shared.Start called after Close")
	case sh.err != nil:
		t.Fatalf("mototest: %v", sh.err)
	case sh.srv == nil:
		sh.srv, sh.err = start(bin)
		if sh.err != nil {
			t.Fatalf("mototest: %v", sh.err)
		}
	}
	select {
	case <-sh.srv.done:
		t.Fatalf("mototest: the shared moto_server at %s exited early; its output:\n%s", sh.srv.URL, sh.srv.log)
	default:
	}
	return sh.srv
}

// Run runs the package's tests (m.Run), then closes the server, and
// returns the exit code for os.Exit: the tests' code, or 1 when they
// passed but the server did not stop cleanly. It is all a TestMain of a
// package sharing a server needs.
func (sh *Shared) Run(m *testing.M) int {
	code := m.Run()
	if err := sh.Close(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "mototest:", err)
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
		// Negative pid: the whole process group, which Start made.
		if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("stop moto_server (pid %d): %w", s.cmd.Process.Pid, err)
		}
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("moto_server (pid %d) did not exit after SIGKILL", s.cmd.Process.Pid)
		}
	}
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			return fmt.Errorf("remove moto_server's temporary directory: %w", err)
		}
		s.dir = ""
	}
	return nil
}

// lookBinary finds moto_server on PATH, or skips or fails t.
func lookBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	if err == nil {
		return bin
	}
	msg := fmt.Sprintf("mototest: %s not found on PATH (%v); "+
		"tests against AWS need the moto emulator: install it with pip install 'moto[server]'", Binary, err)
	if inCI() {
		t.Fatal(msg + " (CI is set, so this is a failure, not a skip)")
	}
	t.Skip("SKIPPING: " + msg)
	return ""
}

// inCI reports whether the environment variable CI asks for strictness.
func inCI() bool {
	v := strings.TrimSpace(os.Getenv("CI"))
	return v != "" && !strings.EqualFold(v, "false") && v != "0"
}

// start runs bin on a free port and waits until it answers. A port taken
// between choosing and binding it is retried with another.
func start(bin string) (*Server, error) {
	var errs []error
	for range 3 {
		s, err := startOnce(bin)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func startOnce(bin string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mototest-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "sitecustomize.py"), sitecustomize, 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath(dir), "PYTHONUNBUFFERED=1")
	cmd.SysProcAttr = sysProcAttr()
	log := &tailBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	s := &Server{URL: url, Config: config(url), cmd: cmd, dir: dir, done: make(chan struct{}), log: log}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(); err != nil {
		stopErr := s.Stop()
		return nil, errors.Join(fmt.Errorf("%s on port %d: %w; its output:\n%s", Binary, port, err, log), stopErr)
	}
	return s, nil
}

// pythonPath puts dir first on PYTHONPATH, keeping what was there.
func pythonPath(dir string) string {
	if old := os.Getenv("PYTHONPATH"); old != "" {
		return dir + string(os.PathListSeparator) + old
	}
	return dir
}

// waitReady polls the server until it answers HTTP, exits or times out.
func (s *Server) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/moto-api/data.json", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil
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
