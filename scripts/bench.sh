#!/usr/bin/env bash
# Runs every performance benchmark, each beside its baseline, and prints one
# table: goal, measured, baseline, ratio. Raw output goes to bench.out.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${BENCH_OUT:-bench.out}
: > "$out"
run() { # package, regexp, extra flags...
	local pkg=$1 re=$2; shift 2
	echo "== $pkg $re" >&2
	go test -run '^$' -bench "$re" "$@" "$pkg" 2>&1 | tee -a "$out" | grep -E '^(Benchmark|FAIL|panic)' >&2
}
run ./wal/ 'BenchmarkAppend$' -benchtime 2s
run ./actors/scheduler/ 'BenchmarkPick$' -benchtime 200x
run ./actors/ 'BenchmarkEndToEnd$|BenchmarkRecovery$|BenchmarkKillRestart$|BenchmarkSimulatedDay$|BenchmarkTransientFaults$|BenchmarkBackendOutage$' -benchtime 1x -timeout 30m
[ -d gateway/ratelimit ] && run ./gateway/ratelimit/ 'BenchmarkIncident429' -benchtime 1x -timeout 20m
[ -d modules/dedup ] && run ./modules/dedup/ 'BenchmarkCheck' -benchtime 1s
[ -f cmd/fano/ops_bench_test.go ] && run ./cmd/fano/ 'BenchmarkShutdown' -benchtime 3x -timeout 10m
echo
go run ./scripts/benchtable < "$out"
