# shellcheck shell=bash
# Helpers of the builder benchmarks (run.sh over TCP on loopback, verbs.sh on a
# verbs device). The caller sets build, units, events, packing_factor, work and
# pids=() and cleans up the pids on exit.

bench() { echo "BENCH name=$1 value=$2 unit=$3"; }
# wait_all LOG WHAT: waits for every started process; if one fails, shows
# the $work/LOG-*.log files and stops the bench.
wait_all() {
  for pid in "${pids[@]}"; do
    wait "$pid" || { cat "$work/$1"-*.log >&2; echo "bench: $2 failed" >&2; exit 1; }
  done
  pids=()
}
# A block of `count` ports below the ephemeral range, starting at a random place.
ports() { local base=$((10000 + RANDOM % 20000)); for ((i = 0; i < $1; i++)); do echo $((base + i)); done; }
peers_of() { local list=""; for port in "$@"; do list+="${list:+,}127.0.0.1:$port"; done; echo "$list"; }

# GNU time: the system's, or a bundle's (make bench-bundle) first on PATH.
cpu_time=()
gnu_time=$(type -P time || true)
[ -n "$gnu_time" ] && cpu_time=("$gnu_time" -f "%U %S" -o)
# run_builder FLAG...: runs $units folded eb-builder units of $build on
# loopback ports, each building $events events (or, where the caller
# defines events_per_bu, as many as it says) with --packing-factor
# $packing_factor and 128-byte fragments, plus FLAGs; sets built and bytes
# (MEP bytes, summed over the units), sent and received (the bytes the
# units' transports counted over the network, summed), seconds (the longest
# time any unit spent building), cpu (user + system seconds of all units;
# 0 without GNU time), threads_used and streams_used (each unit's data
# threads and TCP streams, from its start line). Every unit also gets the
# caller's builder_flags array, if it has one. Fails, showing the logs, if a unit fails or any event is
# incomplete.
run_builder() {
  declare -p builder_flags >/dev/null 2>&1 || builder_flags=()
  local data_ports peers
  mapfile -t data_ports < <(ports "$units")
  peers=$(peers_of "${data_ports[@]}")
  local events=${events:-}
  if declare -F events_per_bu >/dev/null; then events=$(events_per_bu); fi
  echo ">> builder: $units folded units, $events events each, packing factor $packing_factor, 128-byte fragments, $*" >&2
  rm -f "$work"/cpu-* "$work"/unit-*.log  # a run of fewer units must not read the last run's logs
  for ((rank = 0; rank < units; rank++)); do
    # GNU time, where there is one, counts each unit's CPU seconds.
    "${cpu_time[@]}" ${cpu_time:+"$work/cpu-$rank"} "$build/eb-builder" --rank "$rank" --peers "$peers" \
      --http-port $((data_ports[0] + units + rank)) --events "$events" --packing-factor "$packing_factor" \
      --fragment-size 128 "${builder_flags[@]}" "$@" >"$work/unit-$rank.log" 2>&1 &
    pids+=($!)
  done
  wait_all unit "a builder unit"
  cpu=$(cpu_seconds "$work"/cpu-*)
  threads_used=$(sed -n 's/.* \([0-9][0-9]*\) data threads.*/\1/p' "$work/unit-0.log" | head -n 1)
  streams_used=$(sed -n 's/.* \([0-9][0-9]*\) TCP streams.*/\1/p' "$work/unit-0.log" | head -n 1)
  # "stopped: E events built, I incomplete, M MEPs, B bytes, D dropped, ...
  #  after T s of building, S bytes sent and R received over the network in ..."
  local incomplete
  read -r built bytes seconds incomplete sent received < <(awk '/stopped:/ {
      for (i = 1; i <= NF; i++) {
        if ($(i+1) == "events" && $(i+2) == "built,") e += $i
        if ($(i+1) == "incomplete,") n += $i
        if ($(i+1) == "bytes,") b += $i
        if ($(i+1) == "s" && $(i+2) == "of" && $(i+3) == "building,") t = ($i > t ? $i : t)
        if ($(i+1) == "bytes" && $(i+2) == "sent") s += $i
        if ($(i+1) == "received" && $(i+2) == "over") r += $i
      } } END { printf "%.0f %.0f %s %.0f %.0f %.0f\n", e, b, t, n, s, r }' "$work"/unit-*.log)
  [ -n "$seconds" ] && [ "$seconds" != 0 ] || { cat "$work"/unit-*.log >&2; echo "bench: no building time in the units' final lines" >&2; exit 1; }
  [ "$incomplete" = 0 ] || { echo "bench: $incomplete events were incomplete" >&2; exit 1; }
  [ "$sent" = "$received" ] || { echo "bench: the units sent $sent bytes over the network but received $received" >&2; exit 1; }
}
# cpu_seconds FILE...: user + system seconds summed over GNU time's files.
cpu_seconds() { cat "$@" 2>/dev/null | awk '{ s += $1 + $2 } END { printf "%.2f", s }'; }
# per_gb SECONDS BYTES: CPU seconds per GB moved.
per_gb() { awk -v c="$1" -v b="$2" 'BEGIN { printf "%.2f", c / (b / 1e9) }'; }
# gbps BYTES SECONDS: Gb/s to 4 significant digits (Soft-RoCE moves under 1).
gbps() { awk -v b="$1" -v t="$2" 'BEGIN { printf "%.4g", b * 8 / t / 1e9 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
# spread VALUE...: "median min max" of the values.
spread() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)], v[1], v[NR] }'; }
# bench_spread NAME UNIT VALUE...: the median as NAME, the extremes as NAME_min and NAME_max.
bench_spread() {
  local name=$1 unit=$2 median low high
  shift 2
  read -r median low high < <(spread "$@")
  bench "$name" "$median" "$unit"
  bench "${name}_min" "$low" "$unit"
  bench "${name}_max" "$high" "$unit"
}
