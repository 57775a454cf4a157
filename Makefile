# fano — the two set-up commands are `make run` and `make test`.
SHELL := /bin/bash
GO    ?= go
# Tests need Chromium and the Playwright driver (browser backend, control
# panel end-to-end test). `deps` installs both, idempotently.
PLAYWRIGHT_DRIVER_PATH ?= $(HOME)/.cache/fano/playwright-driver
export PLAYWRIGHT_DRIVER_PATH

.PHONY: run run-fresh test test-short deps bench proto build lint fuzz clean stress crashtest simulate bench-simulate simulate-same-seed

## run: the offline demo on the built-in simulated LLMs; a second run
## continues ./fano-data (fano says so), `make run-fresh` starts over
run: build
	@if [ -d fano-data ]; then echo "make run: continuing ./fano-data from the last run (make run-fresh starts over)"; fi
	./bin/fano run --until-idle --data-dir ./fano-data

## run-fresh: the demo from scratch (deletes ./fano-data first)
run-fresh: build
	rm -rf ./fano-data
	./bin/fano run --until-idle --data-dir ./fano-data

# -buildvcs=auto: `fano version` names the commit even where GOFLAGS turns
# stamping off (git worktrees are never stamped: their .git is a file).
build:
	$(GO) build -buildvcs=auto -o bin/fano ./cmd/fano

## test: install what tests need, then run every test with the race detector
test: deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 12m ./...

test-short:
	$(GO) test -short -count=1 ./...

## stress: keep every core busy until Ctrl-C (run `make test` beside it to
## show the tests hold on a loaded machine); STRESS_CMD runs under load instead
stress:
	@bash scripts/stress.sh $(STRESS_CMD)

## deps: Chromium (Debian) and the Playwright driver (npm), idempotent
deps:
	@bash scripts/install-test-deps.sh

## simulate: two weeks of the demo with the default fault schedule on the
## virtual clock, its goals checked (report in ./fano-simulation/simulation/)
simulate: build
	rm -rf ./fano-simulation
	./bin/fano simulate --days 14 --data-dir ./fano-simulation

## simulate-same-seed: two runs of one seed must give the same trace and report
simulate-same-seed:
	$(GO) test -count=1 -run '^TestSimulateSameSeedSameReport$$' -v ./cmd/fano

## bench-simulate: the simulated fortnight beside a simulated day
bench-simulate:
	$(GO) test -run '^$$' -bench 'BenchmarkSimulateFortnight|BenchmarkSimulatedDay$$' -benchtime 1x ./cmd/fano ./actors

## bench: the performance goals, each beside its baseline
bench:
	@bash scripts/bench.sh

## proto: regenerate pb/*.pb.go (needs protoc: apt-get install protobuf-compiler)
proto:
	cd pb && protoc --plugin=protoc-gen-go="$$($(GO) tool -n protoc-gen-go)" --plugin=protoc-gen-go-vtproto="$$($(GO) tool -n protoc-gen-go-vtproto)" \
		-I . --go_out=. --go_opt=paths=source_relative \
		--go-vtproto_out=. --go-vtproto_opt=paths=source_relative,features=marshal+size *.proto

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodeEntry -fuzztime 30s ./wal/
	$(GO) test -run '^$$' -fuzz FuzzMarshalEventTo -fuzztime 30s ./pb/

clean:
	rm -rf bin fano-data fano-simulation

## crashtest: SIGKILL `fano run` on the slowed demo K times at seeded random
## moments (K=50 by default, up to 500; SEED picks the moments), then run
## it to the end and check nothing was lost or done twice
K    ?= 50
SEED ?= 1
crashtest:
	FANO_CRASH_K=$(K) FANO_CRASH_SEED=$(SEED) $(GO) test -race -count=1 -timeout 60m -run '^TestCrashLoop$$' -v ./cmd/fano/
