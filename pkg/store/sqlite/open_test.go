package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// openChildEnv names the environment variable that turns the test binary
// into a child of TestOpenFreshFileFromManyProcesses: it opens the file the
// variable names as soon as its standard input is closed.
const openChildEnv = "SUPERSTEP_SQLITE_OPEN_CHILD"

// openFresh is what a child process does: wait for the start signal (the
// end of its input), then open the database, commit a step and close it.
func openFresh(path string) error {
	if _, err := io.ReadAll(os.Stdin); err != nil {
		return err
	}
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	if err := s.Commit(ctx, &pregel.Checkpoint{RunID: "run-" + strconv.Itoa(os.Getpid()), Graph: "g"}); err != nil {
		s.Close()
		return err
	}
	return s.Close()
}

// Several processes opening a database file that does not exist yet, at
// the same moment (`superstep dev` and `superstep run` started together on
// a fresh clone): every one of them opens it.
func TestOpenFreshFileFromManyProcesses(t *testing.T) {
	if path := os.Getenv(openChildEnv); path != "" {
		if err := openFresh(path); err != nil {
			fmt.Fprintf(os.Stderr, "OPEN FAILED: %v\n", err)
			os.Exit(1)
		}
		return
	}
	// Before Open waited for the switch to WAL, about one round in twenty
	// failed; TestOpenWaitsForAWriterOnAFreshFile makes the race certain.
	rounds, procs := 5, 8
	if testing.Short() {
		rounds = 1
	}
	if v, err := strconv.Atoi(os.Getenv("SUPERSTEP_SQLITE_OPEN_ROUNDS")); err == nil {
		rounds = v
	}
	for round := range rounds {
		path := filepath.Join(t.TempDir(), "fresh.db")
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			errs   []string
			starts []io.Closer
		)
		for range procs {
			cmd := exec.Command(os.Args[0], "-test.run=^TestOpenFreshFileFromManyProcesses$", "-test.count=1")
			cmd.Env = append(os.Environ(), openChildEnv+"="+path)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			starts = append(starts, stdin)
			wg.Go(func() {
				if err := cmd.Wait(); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("%v: %s", err, out.String()))
					mu.Unlock()
				}
			})
		}
		time.Sleep(300 * time.Millisecond) // the children start and wait
		for _, c := range starts {
			c.Close() // go
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("round %d: %d of %d processes could not open a fresh file:\n%s", round, len(errs), procs, strings.Join(errs, "\n"))
		}
	}
}

// Open waits for another connection writing to a new file (another process
// creating its schema or switching it to WAL) instead of failing at once
// with SQLITE_BUSY: switching a new file to WAL mode is the write that
// SQLite does not let wait on the busy timeout.
func TestOpenWaitsForAWriterOnAFreshFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fresh.db")
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("CREATE TABLE other (a)"); err != nil { // holds the write lock
		t.Fatal(err)
	}
	const hold = 300 * time.Millisecond
	released := make(chan error, 1)
	go func() {
		time.Sleep(hold)
		released <- tx.Commit()
	}()
	start := time.Now()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open while another connection writes, after %v: %v; want it to wait for the lock", time.Since(start), err)
	}
	defer s.Close()
	if waited := time.Since(start); waited < hold/2 {
		t.Errorf("Open returned after %v, before the other writer let go (%v)", waited, hold)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(context.Background(), &pregel.Checkpoint{RunID: "r", Graph: "g"}); err != nil {
		t.Fatal(err)
	}
}
