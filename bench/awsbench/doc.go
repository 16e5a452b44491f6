// Package awsbench measures what a superstep of the serverless runtime
// costs on AWS, and prices it.
//
// Its benchmarks (bench_test.go, run by `make bench`) drive the real
// handlers of pkg/serverless on moto_server (internal/mototest) with the
// real aws-sdk-go-v2 clients: a run is created as the api function creates
// it, and each message is received, handed to the tick or node function's
// handler and deleted, one at a time, as Lambda's event source mappings do
// with batch size 1. Every request is counted by SDK middleware:
// awsmeter.Meter (requests and bytes per operation), [CapacityMeter]
// (DynamoDB request units, estimated from item sizes because moto does not
// compute them) and a queue meter in the test (SQS requests by queue type,
// FIFO or standard). The event source mappings' ReceiveMessage and
// DeleteMessage calls are counted too: AWS bills them.
//
// Each function (api, tick, node) has an App of its own, as on Lambda,
// where they are separate processes. Since the DynamoDB store caches what
// it reads and writes, each benchmark runs twice: warm, one App per
// function for all its invocations (one warm execution environment each,
// the best case for the cache), and cold, a new App per invocation (a
// fresh environment each time, the worst case).
//
// Each benchmark iteration runs the scenario's graph twice, for one
// superstep and for 1+N, and reports the difference divided by N: what one
// more superstep costs, without what every run pays once (its creation,
// its first and last writes of the run record). The counts do not depend
// on b.N.
//
// The cost model, [Price], takes public us-east-1 on-demand prices (the
// constants of cost.go, with their sources) and the Lambda memory sizes of
// infra/template.yaml; Lambda duration is the handler's measured wall time
// against moto, and also an assumed 50 ms. bench/README.md records the
// figures and the assumptions.
package awsbench
