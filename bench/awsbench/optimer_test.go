package awsbench_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// opTimer is an SDK middleware that times each request by service and
// operation (the whole call, its retries included, as the caller waits
// for it), to see where a fan-out's time goes on the emulator.
type opTimer struct {
	mu  sync.Mutex
	ops map[string]*opTime
}

// opTime is what an opTimer measured for one operation.
type opTime struct {
	n          int
	total, max time.Duration
}

// Install adds the middleware to a client's stack, innermost at
// Initialize, so that the other meters' own requests are not in its time.
func (o *opTimer) Install(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("superstep.awsbench.optimer", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		start := time.Now()
		out, md, err := next.HandleInitialize(ctx, in)
		d := time.Since(start)
		name := awsmiddleware.GetServiceID(ctx) + " " + awsmiddleware.GetOperationName(ctx)
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.ops == nil {
			o.ops = map[string]*opTime{}
		}
		t := o.ops[name]
		if t == nil {
			t = &opTime{}
			o.ops[name] = t
		}
		t.n++
		t.total += d
		t.max = max(t.max, d)
		return out, md, err
	}), middleware.After)
}

// reset forgets what was measured.
func (o *opTimer) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops = nil
}

// String lists the operations by total time, with their count, mean and
// maximum, and tasks (when positive) for the time per task.
func (o *opTimer) report(tasks int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	names := make([]string, 0, len(o.ops))
	var all time.Duration
	for name, t := range o.ops {
		names = append(names, name)
		all += t.total
	}
	slices.SortFunc(names, func(a, b string) int { return int(o.ops[b].total - o.ops[a].total) })
	var w strings.Builder
	fmt.Fprintf(&w, "time waiting for AWS requests, %v in all (summed over concurrent handlers):\n", all.Round(time.Millisecond))
	for _, name := range names {
		t := o.ops[name]
		fmt.Fprintf(&w, "  %-34s %7d requests  %9v in all  mean %8v  max %8v", name, t.n, t.total.Round(time.Millisecond), (t.total / time.Duration(t.n)).Round(10*time.Microsecond), t.max.Round(time.Millisecond))
		if tasks > 0 {
			fmt.Fprintf(&w, "  %.1f ms/task", float64(t.total.Microseconds())/1e3/float64(tasks))
		}
		w.WriteString("\n")
	}
	return w.String()
}

// pace describes how fast results were recorded over a run: the time per
// result within each tenth of them (records, in any order), from start.
func pace(start time.Time, records []time.Time) string {
	if len(records) < 10 {
		return ""
	}
	r := slices.Clone(records)
	slices.SortFunc(r, func(a, b time.Time) int { return a.Compare(b) })
	var w strings.Builder
	w.WriteString("ms per result recorded, by tenth of the results:")
	prev, at := start, 0
	for k := 1; k <= 10; k++ {
		i := len(r)*k/10 - 1
		fmt.Fprintf(&w, " %.0f", float64(r[i].Sub(prev).Microseconds())/1e3/float64(i+1-at))
		prev, at = r[i], i+1
	}
	return w.String()
}

// childCPU is the CPU time used so far by this process's child processes
// and theirs (moto_server), from /proc; 0 where /proc is not there.
func childCPU() time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	parent := map[int]int{}
	ticks := map[int]int64{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15)
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		parent[pid], ticks[pid] = ppid, u+st
	}
	self := os.Getpid()
	var sum int64
	for pid, t := range ticks {
		for p := parent[pid]; p != 0 && p != 1; p = parent[p] {
			if p == self {
				sum += t
				break
			}
		}
	}
	return time.Duration(sum) * time.Second / 100 // USER_HZ
}
