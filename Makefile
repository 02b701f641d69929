# ringtail — build, test and run the main job. `make help` lists targets.
GO      ?= go
BIN     ?= bin
# An execution count, not a duration: go1.26's fuzz coordinator can fail a
# duration-bounded run with a bare "context deadline exceeded" when a loaded
# machine's worker is mid-call at the deadline (go.dev/issue/75804, fixed in
# go1.27); a count has no deadline to race. 300000 runs take 5-15 s on 2 cores.
FUZZTIME ?= 300000x
WHEELDIR ?= integration/torch/dist
# go-nvml (in the default build, cgo) declares NVIDIA's deprecated calls:
# without this every fresh build prints a screen of gcc warnings about
# NVIDIA's header. Go's default CGO_CFLAGS is "-O2 -g".
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: help build test test-start quick quick-start vet race fuzz torch wheel demo bench clean faults faults-ci

help:
	@echo "make build   build bin/ringtail and bin/ringtail-train"
	@echo "make test    go vet, go test -race ./..., a short fuzz of the wire decoders, the strict CI-size fault campaign, the PyTorch tests (what CI runs; about 27 min on 2 cores)"
	@echo "make quick   gofmt, go vet and go test -short ./... without -race: the inner loop (about 2 min on 2 cores)"
	@echo "make wheel   build the ringtail-torch wheel offline into integration/torch/dist (WHEELDIR=...)"
	@echo "make demo    4-rank training on the digits data with rank 2 slowed 3x"
	@echo "make bench   allreduce sweep, 4 ranks, 1 MiB..64 MiB"
	@echo "make faults  fault harness: FAULT_RUNS kill/freeze/skip/mismatch runs and FLOOD_CONNS-connection floods (docs/reliability.md)"
	@echo "make torch-suite  torch's own distributed suite against ringtail, as Gloo and as a plugin (CI runs it after make test; TORCH_SUITE=\"standin:3 ...\", docs/pytorch-tests.md)"

build:
	$(GO) build -o $(BIN)/ringtail ./cmd/ringtail
	$(GO) build -o $(BIN)/ringtail-train ./cmd/ringtail-train

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)

race:
	$(GO) test -race -timeout 20m ./...

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseHeader$$' -fuzztime $(FUZZTIME) ./internal/wire
	$(GO) test -run '^$$' -fuzz '^FuzzHandshake$$' -fuzztime $(FUZZTIME) ./internal/wire

torch:
	integration/torch/run_tests.sh

# torch's own distributed suite (issue 39): the runs in TORCH_SUITE, each
# MODE:WORLD (standin: ringtail's process group in place of Gloo's; plugin:
# backend "ringtail"), compared with the tests Gloo passes.
.PHONY: torch-suite
torch-suite:
	integration/torch/suite/run_suite.sh

wheel:
	integration/torch/build_wheel.sh $(WHEELDIR)

# make test is CI's command; make quick is the inner loop. The durations
# are measured on the project's 2-core machine (docs/benchmarks.md has the
# runs); test-start prints the expectation first.
test: test-start vet race fuzz faults-ci torch
	@echo "make test: passed"

test-start:
	@echo "make test: go vet, go test -race ./..., fuzz, the fault campaign (CI size, strict), PyTorch tests: about 27 minutes on 2 cores, 32 under load (make quick: about 2)"

quick: quick-start vet
	$(GO) test -short ./...

quick-start:
	@echo "make quick: go vet, gofmt, go test -short ./... (no -race, fuzz or PyTorch): about 2 minutes on 2 cores"

demo: build
	$(BIN)/ringtail run -np 4 -- $(BIN)/ringtail-train --inject slow=2:3x

bench: build
	$(BIN)/ringtail bench allreduce -np 4 -b 1M -e 64M -f 4

# The fault harness (integration/faults, build tag faults). CI-sized by
# default; the campaign of docs/reliability.md is
#   make faults FAULT_RUNS=320 FLOOD_CONNS=10000
# FAULTS_STRICT=true fails the target on any missed expectation (the default
# under CI=true); FAULT_ELEMS=524288 (2 MiB calls) runs the large allreduces
# that shared memory tunes. Each run's ranks dump their flight recorders into
# a directory of the run, and a failed run must leave dumps that
# `ringtail debug analyze` explains (docs/debugging.md).
FAULT_RUNS ?= 16
FAULT_ELEMS ?= 65536
FLOOD_CONNS ?= 2000
FAULTS_STRICT ?= $(if $(filter true,$(CI)),true,false)
faults:
	$(GO) test -tags faults -count=1 -timeout 60m -run 'TestFaults|TestFloods' -v ./integration/faults -args -runs $(FAULT_RUNS) -elems $(FAULT_ELEMS) -flood $(FLOOD_CONNS) -strict=$(FAULTS_STRICT)

# make test's (and so CI's) fault campaign: the CI size above, strict
# everywhere, so that a missed expectation fails make test. About 2 min on
# 2 cores (106-112 s measured under a load average of 12-30, docs/reliability.md).
faults-ci:
	$(MAKE) faults FAULTS_STRICT=true

clean:
	rm -rf $(BIN)
