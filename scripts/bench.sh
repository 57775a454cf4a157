#!/usr/bin/env bash
# Runs every performance benchmark, each beside its baseline, and prints one
# table: goal, measured, baseline, ratio. Raw output goes to bench.out.
#
# BENCH_PROFILE=1 also writes a CPU and a heap profile per benchmark run,
# with the test binary beside them, into BENCH_PROFILE_DIR (default
# profiles/): <name>.cpu.pprof, <name>.mem.pprof, <name>.test, where <name>
# is the package path with / as _ plus a number (e.g. actors_scheduler-2).
# Read them with `go tool pprof` (docs/benchmarks.md, Profiles).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${BENCH_OUT:-bench.out}
: > "$out"
profdir=${BENCH_PROFILE_DIR:-profiles}
if [ "${BENCH_PROFILE:-0}" = 1 ]; then
	mkdir -p "$profdir"
fi
runs=0
run() { # package, regexp, extra flags...
	local pkg=$1 re=$2; shift 2
	runs=$((runs + 1))
	local prof=()
	if [ "${BENCH_PROFILE:-0}" = 1 ]; then
		local name
		name=$(echo "${pkg#./}" | sed 's:/*$::; s:/:_:g')-$runs
		prof=(-cpuprofile "$profdir/$name.cpu.pprof" -memprofile "$profdir/$name.mem.pprof" -o "$profdir/$name.test")
		echo "== $pkg $re (profiles: $profdir/$name.{cpu,mem}.pprof)" >&2
	else
		echo "== $pkg $re" >&2
	fi
	go test -run '^$' -bench "$re" "${prof[@]}" "$@" "$pkg" 2>&1 | tee -a "$out" | grep -E '^(Benchmark|FAIL|panic)' >&2
}
run ./wal/ 'BenchmarkAppend$' -benchtime 2s
run ./actors/scheduler/ 'BenchmarkPick$' -benchtime 200x
# The tick: every fano op is 100 ms of simulated time, 36000x is one hour of
# ticks; the spec's re-sort takes up to a second a pick at 1M, so fewer.
run ./actors/scheduler/ 'BenchmarkTick$/fano/' -benchtime 36000x -timeout 30m
run ./actors/scheduler/ 'BenchmarkTick$/spec-resort/' -benchtime 10x -timeout 30m
run ./actors/ 'BenchmarkEndToEnd$|BenchmarkEndToEndMemoryLimit$|BenchmarkRecovery$|BenchmarkKillRestart$|BenchmarkSimulatedDay$|BenchmarkTransientFaults$|BenchmarkBackendOutage$' -benchtime 1x -timeout 30m
[ -d gateway/ratelimit ] && run ./gateway/ratelimit/ 'BenchmarkIncident429' -benchtime 1x -timeout 20m
# Backend conditions: token and day windows against a real server on a
# simulated clock (429s beside the unpaced backend); four paced backends
# and 30 % 529s beside their ideals.
[ -d gateway/api ] && run ./gateway/api/ 'BenchmarkWindow429s' -benchtime 1x -timeout 10m
run ./actors/ 'BenchmarkPacedBackends$|BenchmarkOverloaded529$' -benchtime 1x -timeout 10m
# Gateway hosts over protoactor-go remote beside the same backend local.
[ -d remote ] && run ./remote/ 'BenchmarkRemoteLatency$|BenchmarkHostMemory$' -benchtime 1x -timeout 10m
[ -d remote ] && run ./actors/ 'BenchmarkRemoteGateway$' -benchtime 1x -timeout 10m
[ -d modules/dedup ] && run ./modules/dedup/ 'BenchmarkCheck|BenchmarkPassageOverlaps' -benchtime 1s
[ -d modules/documenter ] && run ./modules/documenter/ 'BenchmarkCheckDocument' -benchtime 3x -timeout 10m
# Real Chromium: answer complete on the page -> recorded, with and without
# a `complete` selector. (The memory soak, BenchmarkChromiumMemorySoak
# -benchtime 500x, takes minutes and is run by hand.)
[ -d gateway/browser ] && run ./gateway/browser/ 'BenchmarkAnswerLatency$' -benchtime 5x -timeout 10m
[ -f cmd/fano/ops_bench_test.go ] && run ./cmd/fano/ 'BenchmarkShutdown' -benchtime 3x -timeout 10m
# Pipelines through real `fano pipeline run` processes: the peers' 20k
# workload beside fano's end-to-end shape, and 10k items x 3 steps.
# FANO_BENCH_BEFORE=<fano binary> runs that binary on the same workloads
# first (a change against its before, same run). The API backend at 200
# RPM (BenchmarkPipelineAPI200RPM, FANO_BENCH_API_ITEMS) takes minutes and
# is run by hand.
[ -d modules/pipeline/e2e ] && run ./modules/pipeline/e2e/ 'BenchmarkPipelineRun$|BenchmarkPipelineThreeSteps$' -benchtime 1x -timeout 30m
# The same 20k workload beside River (tuned, on PostgreSQL), from the
# peers' harness in ../shared/peers, rounds alternated in one run; then
# the curve at 10k, 100k and 1M items (FANO_BENCH_CURVE).
[ -d modules/pipeline/e2e ] && run ./modules/pipeline/e2e/ 'BenchmarkPipelineBesideRiver$' -benchtime 1x -timeout 30m
[ -d modules/pipeline/e2e ] && FANO_BENCH_CURVE=${FANO_BENCH_CURVE:-10000,100000,1000000} run ./modules/pipeline/e2e/ 'BenchmarkPipelineCurve$' -benchtime 1x -timeout 60m
echo
go run ./scripts/benchtable < "$out"
