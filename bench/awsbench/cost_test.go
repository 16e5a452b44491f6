package awsbench_test

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/bench/awsbench"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestPrice(t *testing.T) {
	// One million of everything, 100 000 GB-seconds.
	c := awsbench.Price(awsbench.Usage{
		WriteRequestUnits:   1e6,
		ReadRequestUnits:    1e6,
		SQSStandardRequests: 1e6,
		SQSFIFORequests:     1e6,
		LambdaInvocations:   1e6,
		LambdaGBSeconds:     1e5,
	})
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"DynamoDB writes", c.DynamoDBWrites, 0.625},
		{"DynamoDB reads", c.DynamoDBReads, 0.125},
		{"SQS standard", c.SQSStandard, 0.40},
		{"SQS FIFO", c.SQSFIFO, 0.50},
		{"Lambda requests", c.LambdaRequests, 0.20},
		{"Lambda duration", c.LambdaDuration, 1.33334},
		{"total", c.Total(), 0.625 + 0.125 + 0.40 + 0.50 + 0.20 + 1.33334},
	} {
		if !near(tc.got, tc.want) {
			t.Errorf("%s: $%v, want $%v", tc.name, tc.got, tc.want)
		}
	}
	sum := 0.0
	for _, p := range c.Components() {
		sum += p.USD
	}
	if !near(sum, c.Total()) {
		t.Errorf("components add up to %v, total is %v", sum, c.Total())
	}
}

func TestGBSeconds(t *testing.T) {
	for _, tc := range []struct {
		mb   int
		d    time.Duration
		n    float64
		want float64
	}{
		{1024, 50 * time.Millisecond, 1, 0.05},
		{512, 50 * time.Millisecond, 2, 0.05},
		{1024, 1200 * time.Microsecond, 1, 0.002}, // billed per started millisecond
		{1024, 0, 3, 0},
	} {
		if got := awsbench.GBSeconds(tc.mb, tc.d, tc.n); !near(got, tc.want) {
			t.Errorf("GBSeconds(%d MB, %v, %v) = %v, want %v", tc.mb, tc.d, tc.n, got, tc.want)
		}
	}
}

func TestSQSBilledRequests(t *testing.T) {
	for _, tc := range []struct{ n, payload, want float64 }{
		{0, 0, 0},
		{3, 150, 3},
		{1, 64 << 10, 1},
		{1, 64<<10 + 1, 2},
		{2, 2 * 200 << 10, 8}, // 200 KB each: 4 chunks
	} {
		if got := awsbench.SQSBilledRequests(tc.n, tc.payload); got != tc.want {
			t.Errorf("SQSBilledRequests(%v, %v) = %v, want %v", tc.n, tc.payload, got, tc.want)
		}
	}
}

func TestStepFunctionsRatio(t *testing.T) {
	if got := awsbench.StepFunctionsRatio(5e-6); !strings.HasPrefix(got, "5.0× cheaper") {
		t.Errorf("$5 per 1M: %q", got)
	}
	if got := awsbench.StepFunctionsRatio(50e-6); !strings.HasPrefix(got, "2.0× dearer") {
		t.Errorf("$50 per 1M: %q", got)
	}
}

// The cost model's memory sizes are the template's.
func TestTemplateMemorySizes(t *testing.T) {
	f, err := os.Open("../../infra/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The MemorySize of Globals and of each function, by the top-level
	// key of the Resources (or Globals) entry it is under.
	sizes := map[string]int{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		indent := len(line) - len(strings.TrimLeft(line, " "))
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
		case indent == 0:
			section = strings.TrimSuffix(trimmed, ":")
		case indent == 2 && strings.HasSuffix(trimmed, ":"):
			section = strings.TrimSuffix(trimmed, ":")
		case strings.HasPrefix(trimmed, "MemorySize:"):
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(trimmed, "MemorySize:")))
			if err != nil {
				t.Fatalf("template: %q: %v", line, err)
			}
			sizes[section] = n
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	memory := func(fn string) int {
		if n, ok := sizes[fn]; ok {
			return n
		}
		return sizes["Function"] // Globals: Function: MemorySize
	}
	for fn, want := range map[string]int{
		"ApiFunction":  awsbench.APIMemoryMB,
		"TickFunction": awsbench.TickMemoryMB,
		"NodeFunction": awsbench.NodeMemoryMB,
	} {
		if got := memory(fn); got != want {
			t.Errorf("infra/template.yaml gives %s %d MB, the cost model %d MB", fn, got, want)
		}
	}
}
