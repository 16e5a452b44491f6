// Command devload measures `superstep dev` under load: it starts one or more
// superstep binaries in turn, each as `BIN dev` on a fresh SQLite directory,
// has many clients create runs of one graph and follow each to its end, then
// stops the server and measures what it stored.
//
// Binaries are alternated round by round (A, B, A, B, …) so that two builds
// — say, the commit before a change and the change — meet the same machine
// load, and the ratio of their figures is what to compare:
//
//	go build -o /tmp/new ./cmd/superstep
//	git worktree add /tmp/old bdc5054 && (cd /tmp/old && go build -o /tmp/old.bin ./cmd/superstep)
//	go run ./bench/devload -bin /tmp/old.bin -bin /tmp/new -runs 1000 -clients 50 -rounds 3
//
// Each client creates a run (POST /v1/graphs/{graph}/runs), then polls it (GET
// /v1/runs/{id}) until it ends, then creates the next; throughput is runs
// ended per second of wall time, from the first create to the last end.
// Store size is the bytes of every file in the server's directory after a
// clean stop (SIGTERM), the SQLite write-ahead log included.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type binList []string

func (b *binList) String() string     { return strings.Join(*b, ",") }
func (b *binList) Set(v string) error { *b = append(*b, v); return nil }

type config struct {
	bins    binList
	runs    int
	clients int
	rounds  int
	graph   string
	input   string
	poll    time.Duration
	timeout time.Duration
	keep    string
}

// result is one binary's figures in one round.
type result struct {
	bin        string
	round      int
	wall       time.Duration
	createWall time.Duration
	ended      int
	failed     int
	errors     int
	firstErr   string
	storeBytes int64
	files      map[string]int64
}

func main() {
	var c config
	flag.Var(&c.bins, "bin", "a superstep `BINARY` to measure (repeat to alternate several)")
	flag.IntVar(&c.runs, "runs", 1000, "runs to create per binary and round")
	flag.IntVar(&c.clients, "clients", 50, "concurrent clients")
	flag.IntVar(&c.rounds, "rounds", 2, "rounds; each round measures every binary once, in turn")
	flag.StringVar(&c.graph, "graph", "counter", "graph to run")
	flag.StringVar(&c.input, "input", `{"limit": 5}`, "each run's input (JSON)")
	flag.DurationVar(&c.poll, "poll", 20*time.Millisecond, "how often a client polls its run")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up on a binary's round after this long")
	flag.StringVar(&c.keep, "keep", "", "keep each server's store under `DIR`/<binary>-<round> instead of deleting it")
	flag.Parse()
	if len(c.bins) == 0 {
		fmt.Fprintln(os.Stderr, "devload: name at least one binary with -bin")
		os.Exit(2)
	}
	if !json.Valid([]byte(c.input)) {
		fmt.Fprintln(os.Stderr, "devload: -input is not valid JSON")
		os.Exit(2)
	}
	ctx := context.Background()
	var all []result
	for round := 1; round <= c.rounds; round++ {
		for _, bin := range c.bins {
			r, err := measure(ctx, c, bin, round)
			if err != nil {
				fmt.Fprintf(os.Stderr, "devload: %s round %d: %v\n", bin, round, err)
				os.Exit(1)
			}
			all = append(all, r)
			if r.firstErr != "" {
				fmt.Fprintf(os.Stderr, "devload: %s round %d: first error: %s\n", bin, round, r.firstErr)
			}
			fmt.Printf("round %d  %-28s  %7.1f runs/s  wall %6.2fs  creates %6.1f/s  ended %d (failed %d, errors %d)  store %s\n",
				r.round, filepath.Base(r.bin), float64(r.ended)/r.wall.Seconds(), r.wall.Seconds(),
				float64(c.runs)/r.createWall.Seconds(), r.ended, r.failed, r.errors, size(r.storeBytes))
		}
	}
	summarize(c, all)
}

// measure runs one binary once: start, load, stop, measure the store.
func measure(ctx context.Context, c config, bin string, round int) (result, error) {
	dir, err := os.MkdirTemp("", "devload-")
	if err != nil {
		return result{}, err
	}
	if c.keep != "" {
		kept := filepath.Join(c.keep, fmt.Sprintf("%s-%d", filepath.Base(bin), round))
		if err := os.MkdirAll(kept, 0o755); err != nil {
			return result{}, err
		}
		_ = os.RemoveAll(dir)
		dir = kept
	} else {
		defer os.RemoveAll(dir)
	}
	cmd := exec.Command(bin, "dev", "--addr", "127.0.0.1:0", "--dir", dir)
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() { _ = cmd.Process.Kill() }()
	url, err := serving(out, 60*time.Second)
	if err != nil {
		return result{}, err
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r := result{bin: bin, round: round}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.clients}}
	var next, created, ended, failed, errs atomic.Int64
	start := time.Now()
	var createDone time.Time
	var once sync.Once
	var wg sync.WaitGroup
	var firstErr sync.Once
	fail := func(err error) {
		errs.Add(1)
		firstErr.Do(func() { r.firstErr = err.Error() })
	}
	for w := 0; w < c.clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(c.runs) {
				id, err := create(ctx, client, url, c.graph, c.input)
				if err != nil {
					fail(err)
					continue
				}
				if created.Add(1) == int64(c.runs) {
					once.Do(func() { createDone = time.Now() })
				}
				status, err := follow(ctx, client, url, id, c.poll)
				if err != nil {
					fail(err)
					continue
				}
				ended.Add(1)
				if status != "completed" {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	r.wall = time.Since(start)
	if createDone.IsZero() {
		createDone = time.Now()
	}
	r.createWall = createDone.Sub(start)
	r.ended, r.failed, r.errors = int(ended.Load()), int(failed.Load()), int(errs.Load())
	if ctx.Err() != nil {
		return r, fmt.Errorf("load did not finish in %s", c.timeout)
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		return r, errors.New("server did not stop within 60 s of SIGTERM")
	}
	r.files = map[string]int64{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		r.storeBytes += info.Size()
		r.files[d.Name()] = info.Size()
		return nil
	})
	return r, err
}

// serving reads the server's stdout until it prints its URL.
func serving(out io.Reader, wait time.Duration) (string, error) {
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, "http://"); i >= 0 {
				found <- strings.Fields(line[i:])[0]
				return
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			return "", errors.New("server exited before printing its URL")
		}
		return u, nil
	case <-time.After(wait):
		return "", fmt.Errorf("server printed no URL within %s", wait)
	}
}

func create(ctx context.Context, c *http.Client, url, graph, input string) (string, error) {
	body := fmt.Sprintf(`{"input": %s}`, input)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/graphs/"+graph+"/runs", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	var run struct {
		RunID string `json:"run_id"`
	}
	if err := do(c, req, &run); err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	return run.RunID, nil
}

// follow polls a run until it is no longer pending or running.
func follow(ctx context.Context, c *http.Client, url, id string, poll time.Duration) (string, error) {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/runs/"+id, nil)
		if err != nil {
			return "", err
		}
		var run struct {
			Status string `json:"status"`
		}
		if err := do(c, req, &run); err != nil {
			return "", fmt.Errorf("get %s: %w", id, err)
		}
		switch run.Status {
		case "pending", "queued", "running", "":
		default:
			return run.Status, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(poll):
		}
	}
}

func do(c *http.Client, req *http.Request, v any) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, v)
}

// summarize prints each binary's median figures and each one's ratio to the
// first binary's.
func summarize(c config, all []result) {
	type fig struct{ tput, store []float64 }
	by := map[string]*fig{}
	for _, r := range all {
		f := by[r.bin]
		if f == nil {
			f = &fig{}
			by[r.bin] = f
		}
		f.tput = append(f.tput, float64(r.ended)/r.wall.Seconds())
		f.store = append(f.store, float64(r.storeBytes))
	}
	base := by[c.bins[0]]
	fmt.Printf("\nmedians over %d rounds (%d runs of %s from %d clients each):\n", c.rounds, c.runs, c.graph, c.clients)
	for _, bin := range c.bins {
		f := by[bin]
		fmt.Printf("  %-28s  %7.1f runs/s (×%.2f)  store %s (×%.2f)\n", filepath.Base(bin),
			median(f.tput), median(f.tput)/median(base.tput),
			size(int64(median(f.store))), median(f.store)/median(base.store))
	}
	fmt.Println("files of the last round:")
	for _, r := range all[len(all)-len(c.bins):] {
		names := make([]string, 0, len(r.files))
		for n := range r.files {
			names = append(names, n)
		}
		sort.Strings(names)
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s %s", n, size(r.files[n])))
		}
		fmt.Printf("  %-28s  %s\n", filepath.Base(r.bin), strings.Join(parts, ", "))
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
