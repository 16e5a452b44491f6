// Package awsmeter counts the requests an aws-sdk-go-v2 client sends and
// the bytes of their bodies, per operation. Benchmarks use it to report AWS
// requests and bytes per superstep.
//
// Install a Meter on a client through its options:
//
//	var m awsmeter.Meter
//	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
//		o.APIOptions = append(o.APIOptions, m.Install)
//	})
//	before := m.Snapshot()
//	... // calls
//	used := m.Snapshot().Sub(before)
//
// or on an aws.Config (cfg.APIOptions) to meter every client made from it.
// Each HTTP attempt counts, so a retried call counts more than once.
package awsmeter

import (
	"context"
	"io"
	"maps"
	"slices"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// middlewareID names the Meter's middleware in a client's stack.
const middlewareID = "superstep.awsmeter"

// Meter counts requests and body bytes per operation. The zero value is
// ready to use, and a Meter is safe for concurrent use. Do not copy a Meter
// after first use.
type Meter struct {
	mu  sync.Mutex
	ops map[string]*Op
}

// Op is what a Meter counted for one operation (or, in [Stats], in all).
type Op struct {
	// Requests counts HTTP requests sent, including retries.
	Requests int64 `json:"requests"`
	// RequestBytes counts request body bytes.
	RequestBytes int64 `json:"request_bytes"`
	// ResponseBytes counts response body bytes read by the client.
	ResponseBytes int64 `json:"response_bytes"`
	// Errors counts requests that failed: no response, or an error status.
	Errors int64 `json:"errors"`
}

func (o *Op) add(p Op) {
	o.Requests += p.Requests
	o.RequestBytes += p.RequestBytes
	o.ResponseBytes += p.ResponseBytes
	o.Errors += p.Errors
}

func (o Op) sub(p Op) Op {
	return Op{
		Requests:      o.Requests - p.Requests,
		RequestBytes:  o.RequestBytes - p.RequestBytes,
		ResponseBytes: o.ResponseBytes - p.ResponseBytes,
		Errors:        o.Errors - p.Errors,
	}
}

// Stats is a snapshot of a Meter.
type Stats struct {
	// Ops holds the counts per operation name, e.g. "PutItem".
	Ops map[string]Op `json:"ops"`
}

// Total sums the counts of every operation.
func (s Stats) Total() Op {
	var t Op
	for _, o := range s.Ops {
		t.add(o)
	}
	return t
}

// Op returns the counts of one operation, zero when it was not called.
func (s Stats) Op(name string) Op { return s.Ops[name] }

// Names lists the operations counted, sorted.
func (s Stats) Names() []string { return slices.Sorted(maps.Keys(s.Ops)) }

// Sub returns what s counted beyond before, an earlier snapshot of the
// same Meter. Operations with nothing counted in between are left out.
func (s Stats) Sub(before Stats) Stats {
	out := Stats{Ops: make(map[string]Op)}
	for name, o := range s.Ops {
		if d := o.sub(before.Ops[name]); d != (Op{}) {
			out.Ops[name] = d
		}
	}
	return out
}

// Snapshot returns the counts so far.
func (m *Meter) Snapshot() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := Stats{Ops: make(map[string]Op, len(m.ops))}
	for name, o := range m.ops {
		out.Ops[name] = *o
	}
	return out
}

// Reset sets every count to zero.
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ops = nil
}

func (m *Meter) add(op string, d Op) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ops == nil {
		m.ops = make(map[string]*Op)
	}
	o := m.ops[op]
	if o == nil {
		o = new(Op)
		m.ops[op] = o
	}
	o.add(d)
}

// Install adds the Meter to a client's middleware stack. Its signature
// fits the APIOptions of aws.Config and of the service clients' Options.
// It sits last in the deserialize step, next to the transport, so it sees
// every attempt.
func (m *Meter) Install(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc(middlewareID, m.handle), middleware.After)
}

func (m *Meter) handle(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	op := awsmiddleware.GetOperationName(ctx)
	d := Op{Requests: 1}
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		if n, ok, err := req.StreamLength(); err == nil && ok {
			d.RequestBytes = n
		} else if req.ContentLength > 0 {
			d.RequestBytes = req.ContentLength
		}
	}
	out, md, err := next.HandleDeserialize(ctx, in)
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if err != nil || !ok || resp.StatusCode >= 300 {
		d.Errors = 1
	}
	m.add(op, d)
	if ok && resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, count: func(n int) { m.add(op, Op{ResponseBytes: int64(n)}) }}
	}
	return out, md, err
}

// countingBody reports the bytes read from a response body.
type countingBody struct {
	io.ReadCloser
	count func(int)
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.count(n)
	}
	return n, err
}
