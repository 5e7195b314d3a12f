#!/usr/bin/env bash
# Data-mover benchmark on loopback (about 3 minutes on 2 cores). EB_BENCH_RUNS rounds
# (default 3), each taking in turn:
#  (a) the baseline, what this machine can move: N independent iperf3
#      client/server pairs at once, one process each (Debian's iperf3 runs
#      all the streams of one client in one thread, so `iperf3 -P N` is not
#      the machine's limit);
#  (b) the data mover: N eb-builder units (folded) whose MFPs cost nothing to
#      make (--source prepared, as a readout card's DMA costs the RU nothing)
#      and whose MEPs are assembled and dropped (--output discard, as iperf3
#      drops its bytes);
#  (c) the same with the generator making every MFP (--source generator);
#  (d) every event made and checked in process (--output check).
# Throughput is what the units' transports counted over the network (their
# own MFPs, copied locally, are not), per second of building; the baseline's
# is what the iperf3 servers received. Each figure is printed as the median
# of the rounds with its min and max, and each ratio is taken within a round
# (same machine state) before its median is taken. CPU seconds (user +
# system, GNU time) per GB moved are printed for the baseline and the
# builder. Then:
#  (e) the generator's and the checker's own cost: one unit, nothing moved;
#  (f) the data mover on units x data threads (--data-threads K, with
#      --tcp-streams K/2 rounded up, so each thread has a slice of the
#      phase's send or receive): for each number of units U and each round,
#      U iperf3 pairs, then U units with each number of data threads up to
#      the cores; medians of the rounds.
#  (g) barrier latency versus N = 2..64 measured here, where N processes
#      share this machine's cores (the names say how many), and the messages
#      on each barrier's critical path for N = 2..512 (eb-barrier-plan),
#      which is what decides between them on a farm.
# Every figure says what ran it: the machine's cores and kernel first, then
# each builder figure's units (processes) and data threads per unit.
# Prints BENCH name=... value=... unit=... lines on stdout.
# Usage: builder/bench/run.sh BUILD_DIR
#   EB_BENCH_UNITS: the units of (a)-(d), a list (default 4; "4 8" runs both)
#   EB_BENCH_THREADS: their --data-threads (default: the builder's own)
#   EB_BENCH_STREAMS: their --tcp-streams (default: the builder's own, 1)
#   EB_BENCH_BUILDER_FLAGS: more eb-builder flags for every run, e.g.
#   "--busy-poll-us 50" (printed with the machine line)
#   EB_BENCH_TABLE_UNITS, EB_BENCH_TABLE_THREADS: the rows and columns of (f)
#   (default "2 4 8" and "1 2 4 8", threads beyond the cores left out;
#   empty: no table)
#   EB_BENCH_BARRIER_UNITS: the N of (g) (default "2 4 8 16 32 64"; empty:
#   none)
set -euo pipefail
build=$(cd "${1:?usage: builder/bench/run.sh BUILD_DIR}" && pwd)
read -r -a unit_counts <<<"${EB_BENCH_UNITS:-4}"
read -r -a table_units <<<"${EB_BENCH_TABLE_UNITS-2 4 8}"
read -r -a table_threads <<<"${EB_BENCH_TABLE_THREADS:-1 2 4 8}"
read -r -a barrier_units <<<"${EB_BENCH_BARRIER_UNITS-2 4 8 16 32 64}"
read -r -a builder_flags <<<"${EB_BENCH_BUILDER_FLAGS:-}"
data_threads=(${EB_BENCH_THREADS:+--data-threads "$EB_BENCH_THREADS"}
  ${EB_BENCH_STREAMS:+--tcp-streams "$EB_BENCH_STREAMS"})
# Events per BU: EB_BENCH_EVENTS, else 24 million over the units of the run
# (run_builder), so that every run moves about as many bytes whatever N.
events_per_bu() { echo "${EB_BENCH_EVENTS:-$((24000000 / units))}"; }
runs=${EB_BENCH_RUNS:-3}
iperf_seconds=${EB_BENCH_SECONDS:-4}
cores=$(nproc)
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

command -v iperf3 >/dev/null || { echo "bench: iperf3 not found; install it (make packages does)" >&2; exit 1; }
for tool in eb-builder eb-barrier-probe eb-barrier-plan; do
  [ -x "$build/$tool" ] || { echo "bench: $build/$tool missing; run make build-builder" >&2; exit 1; }
done

packing_factor=10000
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# listening PORT: whether a socket listens on PORT (IPv4 or IPv6).
listening() { grep -qiE ":$(printf '%04X' "$1") [0-9A-F]+:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null; }

# iperf3_pairs: $units iperf3 servers, each with its own client, for
# $iperf_seconds; sets iperf_gbps (what the servers received, summed),
# iperf_bytes and iperf_cpu (user + system seconds of all 2N processes).
iperf3_pairs() {
  local iperf_ports i
  mapfile -t iperf_ports < <(ports "$units")
  rm -f "$work"/cpu-iperf-*
  for ((i = 0; i < units; i++)); do
    # One test each (-1), then the server exits and GNU time writes its CPU.
    "${cpu_time[@]}" ${cpu_time:+"$work/cpu-iperf-s$i"} iperf3 -s -1 -p "${iperf_ports[i]}" >"$work/iperf-s$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < units; i++)); do
    # Poll until the server listens, reading the kernel's socket table: a
    # connection would count as the server's one test.
    for ((try = 0; try < 200; try++)); do listening "${iperf_ports[i]}" && break; sleep 0.05; done
  done
  echo ">> baseline: $units iperf3 client/server pairs for $iperf_seconds s" >&2
  for ((i = 0; i < units; i++)); do
    "${cpu_time[@]}" ${cpu_time:+"$work/cpu-iperf-c$i"} iperf3 -c 127.0.0.1 -p "${iperf_ports[i]}" -t "$iperf_seconds" -J \
      >"$work/iperf-c$i.json" 2>"$work/iperf-c$i.log" &
    pids+=($!)
  done
  wait_all iperf "an iperf3 client or server"
  read -r iperf_bits iperf_bytes < <(for ((i = 0; i < units; i++)); do
      awk '/"sum_received"/ { in_sum = 1 } in_sum && /"bytes"/ { gsub(/[^0-9.]/, "", $2); b = $2 }
           in_sum && /"bits_per_second"/ { gsub(/[^0-9.]/, "", $2); print $2, b; exit }' "$work/iperf-c$i.json"
    done | awk '{ bits += $1; bytes += $2 } END { printf "%.0f %.0f\n", bits, bytes }')
  [ "${iperf_bits:-0}" != 0 ] || { cat "$work"/iperf-* >&2; echo "bench: no sum_received from iperf3" >&2; exit 1; }
  iperf_gbps=$(awk -v b="$iperf_bits" 'BEGIN { printf "%.2f", b / 1e9 }')
  iperf_cpu=$(cpu_seconds "$work"/cpu-iperf-*)
}

# What ran the figures: printed first, so a copied figure keeps it.
echo "# machine: $(uname -m), kernel $(uname -r), $cores cores (nproc)${builder_flags[*]:+; every builder run with ${builder_flags[*]}}"
bench machine_cores "$cores" cores

for units in "${unit_counts[@]}"; do
  baseline=() baseline_cpu=() mover=() mover_cpu=() generated=() generated_cpu=() checked=() checked_cpu=()
  mover_ratio=() generated_ratio=() checked_ratio=() event_rate=()
  for ((run = 1; run <= runs; run++)); do
    echo ">> round $run of $runs" >&2
    iperf3_pairs
    baseline+=("$iperf_gbps") baseline_cpu+=("$(per_gb "$iperf_cpu" "$iperf_bytes")")
    run_builder --source prepared --output discard "${data_threads[@]}"
    mover+=("$(gbps "$received" "$seconds")") mover_cpu+=("$(per_gb "$cpu" "$received")")
    event_rate+=("$(awk -v e="$built" -v t="$seconds" 'BEGIN { printf "%.0f", e / t }')")
    run_builder --source generator --output discard "${data_threads[@]}"
    generated+=("$(gbps "$received" "$seconds")") generated_cpu+=("$(per_gb "$cpu" "$received")")
    run_builder --source generator --output check "${data_threads[@]}"
    checked+=("$(gbps "$received" "$seconds")") checked_cpu+=("$(per_gb "$cpu" "$received")")
    mover_ratio+=("$(ratio "${mover[-1]}" "$iperf_gbps")") generated_ratio+=("$(ratio "${generated[-1]}" "$iperf_gbps")")
    checked_ratio+=("$(ratio "${checked[-1]}" "$iperf_gbps")")
    echo ">> round $run: iperf3 pairs $iperf_gbps Gb/s; data mover ${mover[-1]} (${mover_ratio[-1]}), with the generator" \
      "${generated[-1]} (${generated_ratio[-1]}), every event checked ${checked[-1]} (${checked_ratio[-1]})" >&2
  done

  bench "builder_data_threads_n$units" "$threads_used" threads
  bench "builder_tcp_streams_n$units" "$streams_used" streams
  bench "iperf3_pairs_processes_n$units" $((2 * units)) processes
  bench_spread "iperf3_pairs_throughput_n$units" Gb/s "${baseline[@]}"
  bench_spread "iperf3_pairs_cpu_seconds_per_gb_n$units" s/GB "${baseline_cpu[@]}"
  bench_spread "builder_network_throughput_n$units" Gb/s "${mover[@]}"
  bench_spread "builder_cpu_seconds_per_gb_n$units" s/GB "${mover_cpu[@]}"
  bench_spread "builder_event_rate_n$units" Hz "${event_rate[@]}"
  bench_spread "builder_generated_network_throughput_n$units" Gb/s "${generated[@]}"
  bench_spread "builder_generated_cpu_seconds_per_gb_n$units" s/GB "${generated_cpu[@]}"
  bench_spread "builder_checked_network_throughput_n$units" Gb/s "${checked[@]}"
  bench_spread "builder_checked_cpu_seconds_per_gb_n$units" s/GB "${checked_cpu[@]}"
  bench_spread "tcp_vs_iperf3_pairs_n$units" ratio "${mover_ratio[@]}"
  bench_spread "tcp_generated_vs_iperf3_pairs_n$units" ratio "${generated_ratio[@]}"
  bench_spread "tcp_checked_vs_iperf3_pairs_n$units" ratio "${checked_ratio[@]}"
done

# (e) One unit, nothing over the network: its own MFP is its whole MEP. What
# making MFPs costs (generator, discard) and making and checking them (check).
saved_units=$units
units=1
run_builder --source generator --output discard
bench builder_generator_rate_n1 "$(gbps "$bytes" "$seconds")" Gb/s
run_builder --source generator --output check
bench builder_generator_and_checker_rate_n1 "$(gbps "$bytes" "$seconds")" Gb/s
units=$saved_units

# (f) Units x data threads, the data mover against the pairs of its units,
# each cell the median of the rounds (ratios taken within a round).
columns=()
for threads in "${table_threads[@]}"; do
  if ((threads <= cores)); then columns+=("$threads"); fi
done
declare -A cell_gbps cell_ratio cell_cpu
table="units | iperf3 pairs Gb/s (CPU s/GB)"
# Each thread a slice of the phase's send or receive.
streams_for() { echo $((($1 + 1) / 2)); }
for threads in "${columns[@]}"; do
  table+=" | $threads thread(s), $(streams_for "$threads") stream(s): Gb/s (ratio, CPU s/GB)"
done
for units in "${table_units[@]}"; do
  pairs=() pairs_cpu=()
  for ((run = 1; run <= runs; run++)); do
    echo ">> units x threads: $units units, round $run of $runs" >&2
    iperf3_pairs
    pairs+=("$iperf_gbps") pairs_cpu+=("$(per_gb "$iperf_cpu" "$iperf_bytes")")
    for threads in "${columns[@]}"; do
      run_builder --source prepared --output discard --data-threads "$threads" --tcp-streams "$(streams_for "$threads")"
      mover_gbps=$(gbps "$received" "$seconds")
      cell_gbps[$units,$threads]+=" $mover_gbps"
      cell_ratio[$units,$threads]+=" $(ratio "$mover_gbps" "$iperf_gbps")"
      cell_cpu[$units,$threads]+=" $(per_gb "$cpu" "$received")"
    done
  done
  read -r pairs_median _ < <(spread "${pairs[@]}")
  read -r pairs_cpu_median _ < <(spread "${pairs_cpu[@]}")
  row="$units | $pairs_median ($pairs_cpu_median)"
  for threads in "${columns[@]}"; do
    # shellcheck disable=SC2086 # the cells are space-separated lists
    {
      read -r gbps_median _ < <(spread ${cell_gbps[$units,$threads]})
      read -r ratio_median _ < <(spread ${cell_ratio[$units,$threads]})
      read -r cpu_median _ < <(spread ${cell_cpu[$units,$threads]})
    }
    bench "builder_tcp_streams_n${units}_threads$threads" "$(streams_for "$threads")" streams
    bench "builder_network_throughput_n${units}_threads$threads" "$gbps_median" Gb/s
    bench "tcp_vs_iperf3_pairs_n${units}_threads$threads" "$ratio_median" ratio
    bench "builder_cpu_seconds_per_gb_n${units}_threads$threads" "$cpu_median" s/GB
    row+=" | $gbps_median ($ratio_median, $cpu_median)"
  done
  table+=$'\n'"$row"
done
if ((${#table_units[@]} > 0)); then
  echo "# the data mover on units x data threads, $cores cores, medians of $runs rounds:"
  sed 's/^/#   /' <<<"$table"
fi

# (g) Barrier latency versus N, measured here: N processes on $cores cores.
for kind in centralized tournament; do
  for n in "${barrier_units[@]}"; do
    rounds=$((n <= 8 ? 3000 : 20000 / n))
    witness=$work/witness
    head -c $((rounds * 4)) /dev/zero >"$witness"
    mapfile -t probe_ports < <(ports "$n")
    probe_peers=$(peers_of "${probe_ports[@]}")
    for ((rank = 0; rank < n; rank++)); do
      "$build/eb-barrier-probe" --rank "$rank" --peers "$probe_peers" --barrier "$kind" --events "$rounds" \
        --http-port 1 "$witness" >"$work/probe-$rank.log" 2>&1 &
      pids+=($!)
    done
    wait_all probe "a barrier probe"
    ns=$(sed -n 's/^barrier_ns=//p' "$work/probe-0.log")
    bench "barrier_latency_${kind}_n${n}_on_${cores}_cores" "$(awk -v ns="$ns" 'BEGIN { printf "%.1f", ns / 1000 }')" us
  done
done
"$build/eb-barrier-plan"
