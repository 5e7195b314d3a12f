#!/usr/bin/env bash
# Builds the builder and its tests with sanitizers and runs the C++ suites
# under them (make test-sanitizers; make test-builder calls it):
#   address: AddressSanitizer + UndefinedBehaviorSanitizer (and LeakSanitizer);
#   thread:  ThreadSanitizer.
# Each runs every suite but the verbs ones (those need the Soft-RoCE VM):
# unit tests, the event builder over loopback TCP threads, the HTTP server,
# and the multi-process suites, whose eb-builder processes are sanitized too.
# Any sanitizer report fails the test that triggered it (halt_on_error; a
# sanitized eb-builder that reports exits non-zero, which its test sees).
# Usage: builder/tests/sanitize.sh BUILD_ROOT   (builds BUILD_ROOT/builder-asan, -tsan)
set -euo pipefail
root=${1:?usage: builder/tests/sanitize.sh BUILD_ROOT}
here=$(cd "$(dirname "$0")/.." && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

run() {  # run KIND CTEST_ARGS...
  local kind=$1 build=$root/builder-${1:0:1}san
  shift
  echo ">> sanitizers: building with EB_SANITIZE=$kind into $build"
  if ! { cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEB_SANITIZE="$kind" &&
         cmake --build "$build"; } >"$build.build.log" 2>&1; then
    tail -n 40 "$build.build.log" >&2
    echo "FAIL: the $kind-sanitizer build failed (full log: $build.build.log)" >&2
    exit 1
  fi
  echo ">> sanitizers: the suites under $kind"
  ctest --test-dir "$build" --output-on-failure "$@"
}

run address -LE verbs
run thread -LE verbs
echo ">> sanitizers: no report"
