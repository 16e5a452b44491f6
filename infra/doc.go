// Package infra holds superstep's AWS deployment: the SAM template
// template.yaml (deployed with `sam build && sam deploy --guided` from the
// repository root, see README.md) and the tests that keep it honest.
//
// The tests parse template.yaml and check the properties the design
// requires of the serverless runtime (batch size 1 and
// ReportBatchItemFailures on every queue, a FIFO tick queue with a
// dead-letter queue and a visibility timeout of at least six times the tick
// function's timeout, TTL, point-in-time recovery and encryption on the
// table, an alarm on every dead-letter queue, arm64 and provided.al2023,
// IAM without wildcard resources, the keys-only stream that feeds the
// sweep function through a filter passing only TTL deletions of run
// records); they compare the table with the one pkg/store/dynamo creates,
// and build each function's bootstrap with the Makefile target `sam build`
// runs.
//
// The package has no Go API.
package infra
