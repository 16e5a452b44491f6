# superstep — make targets. `make run` and `make test` are all a newcomer needs.
GO        ?= go
PKGS      := ./...
BENCHTIME ?= 1s

.PHONY: run test lint bench build fmt vet

## run: run the example graph end to end on this machine (no cloud account needed)
run:
	$(GO) run ./cmd/superstep run support-triage --input @examples/triage/input.json --answer approve

## test: lint, then every test with the race detector
test: lint
	$(GO) test -race -count=1 $(PKGS)

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## bench: engine and store benchmarks (figures recorded in bench/README.md)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./pkg/pregel/ ./pkg/store/...

## build: build every binary
build:
	$(GO) build $(PKGS)
