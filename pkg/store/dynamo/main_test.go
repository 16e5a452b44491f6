package dynamo_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/superstep/superstep/internal/awsmeter"
	"github.com/superstep/superstep/internal/dynalitetest"
	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// moto is the emulator the tests of this package share.
var moto mototest.Shared

// dyn is the second emulator, dynalite, for the suites run on both
// (dynalite_test.go).
var dyn dynalitetest.Shared

func TestMain(m *testing.M) {
	code := moto.Run(m)
	if err := dyn.Close(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "dynamo tests:", err)
		code = 1
	}
	os.Exit(code)
}

// env is a table on the shared emulator with a metered client.
type env struct {
	client *dynamodb.Client
	table  string
	meter  *awsmeter.Meter
	// capacity estimates the request units of the client's calls.
	capacity *capacity
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// newEnv creates a table unique to t.
func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvOn(t, moto.Start(t).Config)
}

// newEnvOn is newEnv on the emulator cfg points at.
func newEnvOn(t testing.TB, cfg aws.Config) *env {
	t.Helper()
	meter := new(awsmeter.Meter)
	ru := newCapacity()
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, meter.Install, ru.install)
	})
	var b [4]byte
	rand.Read(b[:])
	name := unsafeChars.ReplaceAllString(t.Name(), "-")
	if len(name) > 200 {
		name = name[:200]
	}
	table := name + "-" + hex.EncodeToString(b[:])
	if err := dynamo.CreateTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	return &env{client: client, table: table, meter: meter, capacity: ru}
}

func (e *env) store(opts ...dynamo.Option) *dynamo.Store {
	return dynamo.New(e.client, e.table, opts...)
}
