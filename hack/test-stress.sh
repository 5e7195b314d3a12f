#!/usr/bin/env bash
# make test-stress: the suites most exposed to timing, run again and again on
# a loaded machine, to find the tests that wait on a window instead of on the
# condition they assert. Outside make test: about 15 minutes on 2 cores
# (the operator's packages 11 min, the builder's suites 3 min; before each
# envtest cleaned up its runs, the controller package alone took over an
# hour); STRESS_COUNT=2 for a shorter look.
#   - a CPU hog (stress-ng, one worker per core at STRESS_CPU_LOAD percent)
#     keeps every core busy for the whole run;
#   - the operator's Go packages under -race, -count=STRESS_COUNT, in a
#     shuffled order (go test prints the seed that replays it);
#   - the builder's multi-process suites (process, data plane, control,
#     faults) over TCP, --gtest_repeat=STRESS_COUNT, shuffled (each
#     iteration prints its seed).
# At the end: the wall time of each part, and every failure with the seed
# that replays its order. Exits non-zero if anything failed.
# Usage: hack/test-stress.sh BUILDER_BUILD_DIR K8S_BIN EB_BUILDER
set -euo pipefail
builder_build=${1:?usage: hack/test-stress.sh BUILDER_BUILD_DIR K8S_BIN EB_BUILDER}
k8s_bin=${2:?usage: hack/test-stress.sh BUILDER_BUILD_DIR K8S_BIN EB_BUILDER}
eb_builder=${3:?usage: hack/test-stress.sh BUILDER_BUILD_DIR K8S_BIN EB_BUILDER}
count=${STRESS_COUNT:-5}
load=${STRESS_CPU_LOAD:-100}
[[ $count =~ ^[1-9][0-9]*$ ]] || { echo "error: STRESS_COUNT='$count': expected a whole number of at least 1" >&2; exit 2; }
[[ $load =~ ^[0-9]+$ ]] && ((load <= 100)) || { echo "error: STRESS_CPU_LOAD='$load': expected a percentage, 0..100" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
logs=$(mktemp -d /tmp/test-stress.XXXXXX)

hog=
stop_hog() { [ -z "$hog" ] || { kill "$hog" 2>/dev/null || true; wait "$hog" 2>/dev/null || true; hog=; }; }
trap stop_hog EXIT
if ((load > 0)); then
  stress-ng --cpu "$(nproc)" --cpu-load "$load" --quiet &
  hog=$!
  echo ">> test-stress: CPU hog pid $hog, $(nproc) workers at $load %"
fi

failed=0
summary=()
part() {  # part NAME COMMAND...: runs a part, its output in $logs/NAME.log
  local name=$1 start rc=0
  shift
  start=$(date +%s)
  echo ">> test-stress: $name (log $logs/$name.log)"
  "$@" >"$logs/$name.log" 2>&1 || rc=$?
  summary+=("$(printf '%-22s %5d s  %s' "$name" $(($(date +%s) - start)) "$([ $rc = 0 ] && echo passed || echo "FAILED (exit $rc)")")")
  [ $rc = 0 ] || failed=1
}

part operator bash -c "cd '$root/operator' && KUBEBUILDER_ASSETS='$k8s_bin' EB_BUILDER='$eb_builder' \
  go test -race -count=$count -shuffle=on -timeout $((40 * count))m ./..."
for suite in eb-process-tests eb-data-plane-tests eb-control-tests eb-fault-tests; do
  part "$suite" "$builder_build/tests/$suite" --gtest_repeat="$count" --gtest_shuffle --gtest_color=no
done
stop_hog

echo
echo ">> test-stress: $count runs of each, $(nproc) cores, CPU hog at $load %"
printf '   %s\n' "${summary[@]}"
# Every failure, with the seed of the order it ran in: go test prints
# "-test.shuffle N" before each package's tests, gtest "a seed of N" before
# each iteration.
awk '/^-test.shuffle /{seed=$2} /^--- FAIL|^FAIL\t/{print "   operator: " $0 "   (go test -shuffle=" seed ")"}' "$logs/operator.log"
for suite in eb-process-tests eb-data-plane-tests eb-control-tests eb-fault-tests; do
  awk -v s="$suite" '/Randomizing tests. orders with a seed of/{seed=$(NF-1)}
    /^Repeating all tests \(iteration/{it=$5; sub(/\)/, "", it)}
    /^\[  FAILED  \] [A-Za-z].* ms\)$/ {print "   " s ": " $0 "   (iteration " it ", --gtest_shuffle --gtest_random_seed=" seed ")"}' \
    "$logs/$suite.log"
done
if ((failed)); then
  echo "FAIL: test-stress (logs in $logs)"
  exit 1
fi
echo ">> test-stress: passed (logs in $logs)"
