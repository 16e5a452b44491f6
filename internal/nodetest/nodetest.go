// Package nodetest installs and runs test-only Node.js projects (third-party
// clients such as @a2a-js/sdk) for Go tests.
package nodetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// installs remembers, per directory, the outcome of installing it once per
// test binary.
var installs sync.Map // dir -> *install

type install struct {
	once sync.Once
	err  error
}

// Project returns the absolute path of the Node project in dir, installed
// with npm ci unless its node_modules was installed from the current
// package-lock.json. Without node and npm the test fails under CI=true and
// is skipped, saying so, otherwise.
func Project(t testing.TB, dir string) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed; the Node interop tests need Node.js 20+ and npm", tool)
			}
			t.Skipf("SKIPPED: %s is not installed; install Node.js 20+ and npm to run the Node interop tests (they fail when CI=true)", tool)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := installs.LoadOrStore(abs, new(install))
	in := v.(*install)
	in.once.Do(func() { in.err = npmInstall(abs) })
	if in.err != nil {
		t.Fatalf("install the Node project in %s: %v", abs, in.err)
	}
	return abs
}

// npmInstall runs npm ci when node_modules was not installed from the
// current package-lock.json (a stamp records the lock file's digest).
func npmInstall(dir string) error {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(lock)
	digest := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", ".superstep-lock-sha256")
	if got, err := os.ReadFile(stamp); err == nil && string(got) == digest {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--prefer-offline")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci: %w\n%s", err, out.Bytes())
	}
	return os.WriteFile(stamp, []byte(digest), 0o644)
}

// Run runs node with args in dir, for at most timeout, and returns its
// standard output; a failure reports standard error.
func Run(t testing.TB, dir string, timeout time.Duration, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %v: %v\nstderr: %s\nstdout: %s", args, err, stderr.Bytes(), out)
	}
	return out
}
