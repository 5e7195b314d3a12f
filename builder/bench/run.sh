#!/usr/bin/env bash
# Data-mover benchmark on loopback, in one run (about 1 minute):
#  (a) N eb-builder units (folded, generator at full speed) -> aggregate
#      throughput and event rate, of the data mover alone (MEPs dropped) and
#      with every event checked in process;
#  (b) iperf3 with N parallel streams on the same machine, right after;
#  (c) barrier latency versus N = 2..64 for the centralized and tournament
#      barriers (eb-barrier-probe, real processes over TCP).
# Prints BENCH name=... value=... unit=... lines on stdout.
# Usage: builder/bench/run.sh BUILD_DIR   (EB_BENCH_UNITS, default 4)
set -euo pipefail
build=$(cd "${1:?usage: builder/bench/run.sh BUILD_DIR}" && pwd)
units=${EB_BENCH_UNITS:-4}
events=${EB_BENCH_EVENTS:-6000000}  # per BU; about 5 s at 20 Gb/s
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

command -v iperf3 >/dev/null || { echo "bench: iperf3 not found; install it (make packages does)" >&2; exit 1; }
for tool in eb-builder eb-barrier-probe; do
  [ -x "$build/$tool" ] || { echo "bench: $build/$tool missing; run make build-builder" >&2; exit 1; }
done

packing_factor=10000
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# (a) the builder, twice: the data mover alone (--output discard: MEPs
# assembled and dropped, as iperf3 drops its bytes), then with every event
# checked in process (--output check, the default).
run_builder --output discard
mep_gbps=$(gbps "$bytes" "$seconds")
net_gbps=$(network "$mep_gbps")
bench "builder_throughput_n$units" "$mep_gbps" Gb/s
bench "builder_network_throughput_n$units" "$net_gbps" Gb/s
bench "builder_event_rate_n$units" "$(awk -v e="$built" -v t="$seconds" 'BEGIN { printf "%.0f", e / t }')" Hz

run_builder --output check
checked_gbps=$(gbps "$bytes" "$seconds")
checked_net_gbps=$(network "$checked_gbps")
bench "builder_checked_throughput_n$units" "$checked_gbps" Gb/s
bench "builder_checked_event_rate_n$units" "$(awk -v e="$built" -v t="$seconds" 'BEGIN { printf "%.0f", e / t }')" Hz

# (b) iperf3 with as many parallel streams as there are concurrent flows.
port=$(ports 1)
iperf3 -s -p "$port" >"$work/iperf3-server.log" 2>&1 &
pids+=($!)
# Poll until the server listens (a connection that sends nothing is harmless).
for ((i = 0; i < 200; i++)); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
echo ">> iperf3: $units parallel streams for 5 s" >&2
iperf3 -c 127.0.0.1 -p "$port" -P "$units" -t 5 -J >"$work/iperf3.json" ||
  { cat "$work/iperf3.json" "$work/iperf3-server.log" >&2; echo "bench: iperf3 failed" >&2; exit 1; }
kill "${pids[@]}"
wait "${pids[@]}" 2>/dev/null || true
pids=()
iperf_gbps=$(awk '/"sum_received"/ { in_sum = 1 } in_sum && /"bits_per_second"/ {
    gsub(/[^0-9.]/, "", $2); printf "%.2f", $2 / 1e9; exit }' "$work/iperf3.json")
bench "iperf3_throughput_p$units" "$iperf_gbps" Gb/s
bench tcp_vs_iperf3 "$(awk -v a="$net_gbps" -v b="$iperf_gbps" 'BEGIN { printf "%.3f", a / b }')" ratio
bench builder_mep_bytes_vs_iperf3 "$(awk -v a="$mep_gbps" -v b="$iperf_gbps" 'BEGIN { printf "%.3f", a / b }')" ratio
bench tcp_checked_vs_iperf3 "$(awk -v a="$checked_net_gbps" -v b="$iperf_gbps" 'BEGIN { printf "%.3f", a / b }')" ratio

# (c) barrier latency versus N.
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
    bench "barrier_latency_${kind}_n$n" "$(awk -v ns="$ns" 'BEGIN { printf "%.1f", ns / 1000 }')" us
  done
done
