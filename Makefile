# superstep — make targets. `make run` and `make test` are all a newcomer needs.
GO        ?= go
PKGS      := ./...
BENCHTIME ?= 1s

.PHONY: run test lint bench bench-fanout bench-fanout10k build fmt vet staticcheck fuzz mcp-tools dynalite

## run: run the example graph end to end on this machine (no cloud account needed)
run:
	$(GO) run ./cmd/superstep run support-triage --input @examples/triage/input.json --answer approve

## test: lint, then every test with the race detector
test: lint mcp-tools dynalite
	$(GO) test -race -count=1 $(PKGS)

# The npm tools the MCP tests drive (conformance suite, inspector CLI,
# server-everything, and a Node.js 22 for them), pinned by the lockfile in
# internal/mcptest/npm and installed into its node_modules once. Without
# npm: a warning, and those tests skip loudly (they fail when CI is set).
MCP_NPM := internal/mcptest/npm

## mcp-tools: install the MCP test tools (npm ci, once; again when the lockfile changes)
mcp-tools: $(MCP_NPM)/node_modules/.installed
$(MCP_NPM)/node_modules/.installed: $(MCP_NPM)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix $(MCP_NPM) --no-audit --no-fund --ignore-scripts --loglevel=error && touch $@; \
	else \
		echo "WARNING: npm not found: the MCP conformance, inspector and server-everything tests will skip (CI requires them)" >&2; \
	fi

# dynalite, the DynamoDB emulator of internal/dynalitetest (range reads in
# O(log n), where moto reads a whole partition), pinned by the lockfile in
# internal/dynalitetest/npm; --ignore-scripts: its in-memory store needs no
# native build. Without npm: a warning, and those tests skip loudly (they
# fail when CI is set).
DYNALITE_NPM := internal/dynalitetest/npm

## dynalite: install dynalite for the tests (npm ci, once; again when the lockfile changes)
dynalite: $(DYNALITE_NPM)/node_modules/.installed
$(DYNALITE_NPM)/node_modules/.installed: $(DYNALITE_NPM)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix $(DYNALITE_NPM) --no-audit --no-fund --ignore-scripts --loglevel=error && touch $@; \
	else \
		echo "WARNING: npm not found: the tests against dynalite will skip (CI requires them)" >&2; \
	fi

# staticcheck (honnef.co/go/tools), fetched from the module proxy by
# `go run` at this version (v0.8 supports go 1.26); nothing to install.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOFILES = $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*')

## lint: gofmt (check only), go vet, staticcheck and cfn-lint (lint-infra)
lint: lint-infra vet staticcheck
	@out=$$(gofmt -l $(GOFILES)); \
	if [ -n "$$out" ]; then echo "gofmt needed on (make fmt):"; echo "$$out"; exit 1; fi

## fmt: rewrite every Go file with gofmt
fmt:
	gofmt -w $(GOFILES)

## vet: go vet on every package
vet:
	$(GO) vet $(PKGS)

## staticcheck: staticcheck on every package
staticcheck:
	$(STATICCHECK) $(PKGS)

## fuzz: run one fuzz target longer than make test does (its seeds):
##   make fuzz FUZZ=FuzzDecode PKG=./pkg/internal/jsonin FUZZTIME=5m
FUZZTIME ?= 1m
fuzz:
	@if [ -z "$(FUZZ)" ] || [ -z "$(PKG)" ]; then echo "fuzz: set FUZZ=<target> PKG=<package>; the targets: git grep -n 'func Fuzz'" >&2; exit 2; fi
	$(GO) test -run '^$$' -fuzz '^$(FUZZ)$$' -fuzztime $(FUZZTIME) $(PKG)

## bench: engine and store benchmarks (figures recorded in bench/README.md); the 1,000-way fan-out is bench-fanout
bench:
	$(GO) test -run '^$$' -bench . -skip 'AWSFanOut1000' -benchmem -benchtime $(BENCHTIME) ./pkg/pregel/ ./pkg/store/... ./pkg/agent/ ./pkg/api/ ./pkg/tracing/ ./bench/awsbench/

## bench-fanout: one step of 1,000 remote tasks on moto (about 20 minutes here)
bench-fanout:
	$(GO) test -run '^$$' -bench 'AWSFanOut1000' -benchtime 1x -timeout 60m ./bench/awsbench/

## bench-fanout10k: one step of 10,000 remote tasks, DynamoDB on dynalite and SQS on moto, 8 handlers at once (BenchmarkAWSFanOut10000; on moto alone it takes hours: see bench/README.md)
bench-fanout10k: dynalite
	SUPERSTEP_AWS_DYNAMODB=dynalite $(GO) test -run '^$$' -bench 'AWSFanOut10000' -benchtime 1x -timeout 120m ./bench/awsbench/

## build: build every binary
build:
	$(GO) build $(PKGS)

# --- Infrastructure (infra/template.yaml; see infra/README.md) ---

.PHONY: lint-infra build-ApiFunction build-TickFunction build-NodeFunction build-SweepFunction build-StreamFunction

CFN_LINT ?= cfn-lint

## lint-infra: cfn-lint on infra/template.yaml; a missing cfn-lint fails when CI is set (not false), else warns
lint-infra:
	@if $(CFN_LINT) --version >/dev/null 2>&1; then \
		echo "$(CFN_LINT) infra/template.yaml"; \
		$(CFN_LINT) infra/template.yaml; \
	elif [ -n "$${CI:-}" ] && [ "$${CI}" != false ]; then \
		echo "lint-infra: $(CFN_LINT) not found, and CI ($$CI) requires it (pip install cfn-lint)" >&2; \
		exit 1; \
	else \
		echo "" >&2; \
		echo "**********************************************************************" >&2; \
		echo "WARNING: $(CFN_LINT) not found: infra/template.yaml was NOT linted." >&2; \
		echo "         Install it with: pip install cfn-lint   (CI requires it.)" >&2; \
		echo "**********************************************************************" >&2; \
		echo "" >&2; \
	fi

# build-<LogicalId>: the Lambda bootstraps, built by `sam build` (each
# function has Metadata BuildMethod: makefile, CodeUri: the repository root).
# SAM sets ARTIFACTS_DIR; by hand: make build-TickFunction ARTIFACTS_DIR=/tmp/tick
LAMBDA_BUILD = GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -buildvcs=false -ldflags='-s -w'

define build-lambda
	@if [ -z "$(ARTIFACTS_DIR)" ]; then echo "$@: set ARTIFACTS_DIR (sam build does): make $@ ARTIFACTS_DIR=<dir>" >&2; exit 2; fi
	mkdir -p "$(ARTIFACTS_DIR)"
	$(LAMBDA_BUILD) -o "$(ARTIFACTS_DIR)/bootstrap" ./functions/$(1)
endef

## build-ApiFunction: linux/arm64 bootstrap of functions/api into $(ARTIFACTS_DIR)
build-ApiFunction:
	$(call build-lambda,api)

## build-TickFunction: linux/arm64 bootstrap of functions/tick into $(ARTIFACTS_DIR)
build-TickFunction:
	$(call build-lambda,tick)

## build-NodeFunction: linux/arm64 bootstrap of functions/node into $(ARTIFACTS_DIR)
build-NodeFunction:
	$(call build-lambda,node)

## build-SweepFunction: linux/arm64 bootstrap of functions/sweep into $(ARTIFACTS_DIR)
build-SweepFunction:
	$(call build-lambda,sweep)

## build-StreamFunction: linux/arm64 bootstrap of functions/stream into $(ARTIFACTS_DIR)
build-StreamFunction:
	$(call build-lambda,stream)
