#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into BUILD_DIR and fuzzes
# each parser for a bounded time. Fails on any crash, leak or sanitizer report.
# Usage: builder/fuzz/run.sh BUILD_DIR   (EB_FUZZ_SECONDS per target, default 25)
set -euo pipefail
build=${1:?usage: builder/fuzz/run.sh BUILD_DIR}
seconds=${EB_FUZZ_SECONDS:-25}
here=$(cd "$(dirname "$0")" && pwd)

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; install clang and libclang-rt-14-dev (make packages does)" >&2
  exit 1
fi
mkdir -p "$(dirname "$build")"
if ! { cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$build"; } >"$build.build.log" 2>&1; then
  tail -n 40 "$build.build.log" >&2
  echo "FAIL: could not build the fuzz targets (full log: $build.build.log)" >&2
  exit 1
fi

corpus=$build/corpus
rm -rf "$corpus"
"$build/eb-fuzz-seeds" "$corpus"
for target in mfp mep; do
  echo ">> fuzzing the $target parser for ${seconds}s"
  log=$build/$target.log
  if ! "$build/eb-fuzz-$target" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=1024 \
      -artifact_prefix="$build/$target-" "$corpus/$target" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "FAIL: the $target fuzzer found a crash; the input is $build/$target-* (see $log)" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "   ok: ${runs:-?} inputs, no crash ($log)"
done
echo ">> fuzz: all parsers survived"
