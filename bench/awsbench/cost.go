package awsbench

import (
	"fmt"
	"math"
	"time"
)

// Public prices in US dollars: us-east-1, on-demand, first pricing tier,
// free tiers ignored. Recorded on 2026-11-22 from the AWS pricing pages
// named beside each group (not re-read online from
// the benchmark machine): check them before relying on a figure.
const (
	// DynamoDB on-demand throughput (the rates since the price cut of
	// 2024-11-01): https://aws.amazon.com/dynamodb/pricing/on-demand/
	DynamoDBWriteRequestUnitUSD = 0.625 / 1e6 // per write request unit
	DynamoDBReadRequestUnitUSD  = 0.125 / 1e6 // per read request unit

	// Amazon SQS: https://aws.amazon.com/sqs/pricing/ (every 64 KB chunk
	// of a request's payload is billed as one request).
	SQSStandardRequestUSD = 0.40 / 1e6 // per standard-queue request
	SQSFIFORequestUSD     = 0.50 / 1e6 // per FIFO-queue request

	// AWS Lambda, arm64: https://aws.amazon.com/lambda/pricing/
	LambdaRequestUSD       = 0.20 / 1e6   // per invocation
	LambdaARMGBSecondUSD   = 0.0000133334 // per GB-second, billed per 1 ms
	lambdaBillingIncrement = time.Millisecond

	// AWS Step Functions Standard workflows, for comparison:
	// https://aws.amazon.com/step-functions/pricing/ ($0.025 per 1,000
	// state transitions).
	StepFunctionsStandardTransitionUSD = 25.0 / 1e6 // per state transition
)

// Memory sizes of the functions in infra/template.yaml (MemorySize; the
// api function has the Globals' 512 MB). TestTemplateMemorySizes checks
// that they still match.
const (
	APIMemoryMB  = 512
	TickMemoryMB = 512
	NodeMemoryMB = 1024
)

// SQSChunkBytes is the payload size billed as one SQS request.
const SQSChunkBytes = 64 << 10

// Usage is what a workload consumes of the priced AWS services, for one
// unit of work (a superstep, a run).
type Usage struct {
	// DynamoDB request units (see [CapacityMeter]).
	WriteRequestUnits float64
	ReadRequestUnits  float64
	// Billed SQS requests (64 KB chunks) on standard and FIFO queues,
	// including the event source mappings' receives and deletes.
	SQSStandardRequests float64
	SQSFIFORequests     float64
	// Lambda invocations and their billed GB-seconds (see [GBSeconds]).
	LambdaInvocations float64
	LambdaGBSeconds   float64
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		WriteRequestUnits:   u.WriteRequestUnits + v.WriteRequestUnits,
		ReadRequestUnits:    u.ReadRequestUnits + v.ReadRequestUnits,
		SQSStandardRequests: u.SQSStandardRequests + v.SQSStandardRequests,
		SQSFIFORequests:     u.SQSFIFORequests + v.SQSFIFORequests,
		LambdaInvocations:   u.LambdaInvocations + v.LambdaInvocations,
		LambdaGBSeconds:     u.LambdaGBSeconds + v.LambdaGBSeconds,
	}
}

// Cost is the price of a [Usage] in US dollars, by component.
type Cost struct {
	DynamoDBWrites float64
	DynamoDBReads  float64
	SQSStandard    float64
	SQSFIFO        float64
	LambdaRequests float64
	LambdaDuration float64
}

// Price prices u at the constants above.
func Price(u Usage) Cost {
	return Cost{
		DynamoDBWrites: u.WriteRequestUnits * DynamoDBWriteRequestUnitUSD,
		DynamoDBReads:  u.ReadRequestUnits * DynamoDBReadRequestUnitUSD,
		SQSStandard:    u.SQSStandardRequests * SQSStandardRequestUSD,
		SQSFIFO:        u.SQSFIFORequests * SQSFIFORequestUSD,
		LambdaRequests: u.LambdaInvocations * LambdaRequestUSD,
		LambdaDuration: u.LambdaGBSeconds * LambdaARMGBSecondUSD,
	}
}

// Total is the sum of the components.
func (c Cost) Total() float64 {
	return c.DynamoDBWrites + c.DynamoDBReads + c.SQSStandard + c.SQSFIFO + c.LambdaRequests + c.LambdaDuration
}

// Components lists the components with their names, in a fixed order.
func (c Cost) Components() []Component {
	return []Component{
		{"DynamoDB writes", c.DynamoDBWrites},
		{"DynamoDB reads", c.DynamoDBReads},
		{"SQS FIFO (ticks)", c.SQSFIFO},
		{"SQS standard (node tasks)", c.SQSStandard},
		{"Lambda requests", c.LambdaRequests},
		{"Lambda duration", c.LambdaDuration},
	}
}

// Component is one line of a [Cost].
type Component struct {
	Name string
	USD  float64
}

// PerMillion converts a cost per unit of work into dollars per million.
func PerMillion(usd float64) float64 { return usd * 1e6 }

// GBSeconds returns the GB-seconds Lambda bills for n invocations of a
// function with memoryMB of memory that last d each: the duration rounded
// up to the millisecond, times the memory in GB (1024 MB).
func GBSeconds(memoryMB int, d time.Duration, n float64) float64 {
	if d < 0 {
		d = 0
	}
	billed := (d + lambdaBillingIncrement - 1) / lambdaBillingIncrement * lambdaBillingIncrement
	return n * billed.Seconds() * float64(memoryMB) / 1024
}

// SQSBilledRequests is the number of requests SQS bills for n requests
// carrying payload bytes in all: at least one per request, and one per
// 64 KB chunk of an average request's payload.
func SQSBilledRequests(n, payload float64) float64 {
	if n <= 0 {
		return 0
	}
	return n * math.Max(1, math.Ceil(payload/n/SQSChunkBytes))
}

// StepFunctionsRatio describes how usd per superstep compares with a Step
// Functions Standard workflow making one state transition per superstep.
func StepFunctionsRatio(usd float64) string {
	sfn := StepFunctionsStandardTransitionUSD
	switch {
	case usd <= 0:
		return "free"
	case usd < sfn:
		return fmt.Sprintf("%.1f× cheaper than Step Functions Standard ($%.2f per 1M transitions)", sfn/usd, PerMillion(sfn))
	default:
		return fmt.Sprintf("%.1f× dearer than Step Functions Standard ($%.2f per 1M transitions)", usd/sfn, PerMillion(sfn))
	}
}
