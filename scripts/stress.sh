#!/usr/bin/env bash
# stress: keep every core busy (one spinning shell per core) until killed or
# until the given command ends. Used to show tests pass on a loaded machine:
#   scripts/stress.sh                 # spin until Ctrl-C
#   scripts/stress.sh go test ./...   # spin while the command runs, exit with its status
set -u
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
pids=()
for ((i = 0; i < cores; i++)); do
	( while :; do :; done ) &
	pids+=($!)
done
stop() { kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; }
trap 'stop; exit 130' INT TERM
if (($# == 0)); then
	echo "stress: $cores spinning shells (pids ${pids[*]}); Ctrl-C stops them" >&2
	wait
	exit 0
fi
"$@"
rc=$?
stop
exit $rc
