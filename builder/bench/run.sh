#!/usr/bin/env bash
# Data-mover benchmark on loopback (about 40 s on 2 cores). EB_BENCH_RUNS rounds
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
#  (f) barrier latency versus N = 2..64 measured here, where N processes
#      share this machine's cores (the names say how many), and the messages
#      on each barrier's critical path for N = 2..512 (eb-barrier-plan),
#      which is what decides between them on a farm.
# Prints BENCH name=... value=... unit=... lines on stdout.
# Usage: builder/bench/run.sh BUILD_DIR   (EB_BENCH_UNITS, default 4)
set -euo pipefail
build=$(cd "${1:?usage: builder/bench/run.sh BUILD_DIR}" && pwd)
units=${EB_BENCH_UNITS:-4}
events=${EB_BENCH_EVENTS:-6000000}  # per BU; 2-4 s at 40 Gb/s
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

baseline=() baseline_cpu=() mover=() mover_cpu=() generated=() generated_cpu=() checked=() checked_cpu=()
mover_ratio=() generated_ratio=() checked_ratio=() event_rate=()
for ((run = 1; run <= runs; run++)); do
  echo ">> round $run of $runs" >&2
  iperf3_pairs
  baseline+=("$iperf_gbps") baseline_cpu+=("$(per_gb "$iperf_cpu" "$iperf_bytes")")
  run_builder --source prepared --output discard
  mover+=("$(gbps "$received" "$seconds")") mover_cpu+=("$(per_gb "$cpu" "$received")")
  event_rate+=("$(awk -v e="$built" -v t="$seconds" 'BEGIN { printf "%.0f", e / t }')")
  run_builder --source generator --output discard
  generated+=("$(gbps "$received" "$seconds")") generated_cpu+=("$(per_gb "$cpu" "$received")")
  run_builder --source generator --output check
  checked+=("$(gbps "$received" "$seconds")") checked_cpu+=("$(per_gb "$cpu" "$received")")
  mover_ratio+=("$(ratio "${mover[-1]}" "$iperf_gbps")") generated_ratio+=("$(ratio "${generated[-1]}" "$iperf_gbps")")
  checked_ratio+=("$(ratio "${checked[-1]}" "$iperf_gbps")")
  echo ">> round $run: iperf3 pairs $iperf_gbps Gb/s; data mover ${mover[-1]} (${mover_ratio[-1]}), with the generator" \
    "${generated[-1]} (${generated_ratio[-1]}), every event checked ${checked[-1]} (${checked_ratio[-1]})" >&2
done

bench_spread "iperf3_pairs_throughput_n$units" Gb/s "${baseline[@]}"
bench_spread "iperf3_pairs_cpu_seconds_per_gb_n$units" s/GB "${baseline_cpu[@]}"
bench_spread "builder_network_throughput_n$units" Gb/s "${mover[@]}"
bench_spread "builder_cpu_seconds_per_gb_n$units" s/GB "${mover_cpu[@]}"
bench_spread "builder_event_rate_n$units" Hz "${event_rate[@]}"
bench_spread "builder_generated_network_throughput_n$units" Gb/s "${generated[@]}"
bench_spread "builder_generated_cpu_seconds_per_gb_n$units" s/GB "${generated_cpu[@]}"
bench_spread "builder_checked_network_throughput_n$units" Gb/s "${checked[@]}"
bench_spread "builder_checked_cpu_seconds_per_gb_n$units" s/GB "${checked_cpu[@]}"
bench_spread tcp_vs_iperf3_pairs ratio "${mover_ratio[@]}"
bench_spread tcp_generated_vs_iperf3_pairs ratio "${generated_ratio[@]}"
bench_spread tcp_checked_vs_iperf3_pairs ratio "${checked_ratio[@]}"

# (e) One unit, nothing over the network: its own MFP is its whole MEP. What
# making MFPs costs (generator, discard) and making and checking them (check).
saved_units=$units
units=1
run_builder --source generator --output discard
bench builder_generator_rate_n1 "$(gbps "$bytes" "$seconds")" Gb/s
run_builder --source generator --output check
bench builder_generator_and_checker_rate_n1 "$(gbps "$bytes" "$seconds")" Gb/s
units=$saved_units

# (f) Barrier latency versus N, measured here: N processes on $cores cores.
for kind in centralized tournament; do
  for n in 2 4 8 16 32 64; do
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
