#!/usr/bin/env bash
# The verbs transport against the device's own figure and against TCP, in one
# run on one device (make bench-verbs runs it in the Soft-RoCE VM, or on an
# RDMA host, through hack/verbs-vm/run.sh), each figure the median of
# EB_BENCH_RUNS runs (default 5, taken in turn) with its min and max:
#  (a) ib_write_bw (perftest, one RC QP), both directions at once (-b) at the
#      builder's MFP size: the same two flows as two builder units make; and
#      ib_send_bw the same way, as the builder SENDs its MFPs;
#  (b) N eb-builder units over --transport verbs, MFPs made once and handed
#      out again (--source prepared, as a readout card's DMA costs the RU
#      nothing), MEPs assembled and dropped (--output discard): the data
#      mover, as perftest moves bytes it does not make: the bytes its
#      transport counted over the network; and its CPU seconds per GB;
#  (c) the same units over TCP;
#  (d) the verbs units of (b) at --verbs-depth 1 (receives posted after each
#      cycle's headers) against (b)'s default depth 2 (the next cycle's
#      posted once the set decided to go on), the two in turn, first one then
#      the other from run to run, after the same perftest figure
#      (EB_BENCH_COMPARE_DEPTH, default 1; "" for none);
#  (e) with EB_BENCH_COMPARE_WINDOW=W, the verbs units of (b) at
#      --receive-window W against (b)'s 0, in turn the same way (it changes
#      nothing below 3 units: with 2 a cycle has one phase to a peer).
# Absolute figures on Soft-RoCE under an emulated CPU mean nothing, and they
# drift from run to run (perftest alone: 0.35 to 0.55 Gb/s in one boot); so
# each ratio is taken within a run, builder against the perftest figure just
# before it, and the median of those ratios is printed, with min and max.
# Prints BENCH lines on stdout.
# Usage: builder/bench/verbs.sh BUILD_DIR   (EB_BENCH_UNITS, default 2;
# EB_BENCH_MORE_UNITS, default 3, also over verbs)
set -euo pipefail
build=$(cd "${1:?usage: builder/bench/verbs.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${EB_RDMA_DEVICE:?run this through hack/verbs-vm/run.sh (make bench-verbs)}"
units=${EB_BENCH_UNITS:-2}
# Also over verbs at this many units, against the same ib_write_bw ("" for
# none): each unit then has two peers, as on a farm (the VM may take 3 vCPUs).
more_units=${EB_BENCH_MORE_UNITS-3}
compare_depth=${EB_BENCH_COMPARE_DEPTH-1}
compare_window=${EB_BENCH_COMPARE_WINDOW:-}
events=${EB_BENCH_EVENTS:-1500000}  # per BU
ib_seconds=${EB_BENCH_SECONDS:-6}
# Messages perftest keeps in flight per direction. Its default, 128, of 1.3 MB
# messages overruns Soft-RoCE (0 Gb/s measured); 4 is more than the
# builder's one MFP per peer and direction, so the reference is not held back.
tx_depth=${EB_BENCH_TX_DEPTH:-4}  # of each ib_write_bw
runs=${EB_BENCH_RUNS:-5}
# As make bench: MFPs of 1.3 MB, which amortize the per-cycle exchanges of
# sizes and barrier tokens as the farm's (30 000 fragments) do.
packing_factor=${EB_BENCH_PACKING_FACTOR:-10000}
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
# shellcheck source-path=SCRIPTDIR
source "$here/lib.sh"
# shellcheck source=../../hack/verbs-vm/lib.sh
source "$here/../../hack/verbs-vm/lib.sh"

# An MFP of 128-byte fragments (docs/formats.md): a 32-byte header, a type
# byte and a 2-byte size per fragment, padded to 8 bytes, then the payloads.
mfp_bytes=$(((32 + 3 * packing_factor + 7) / 8 * 8 + 128 * packing_factor))

# Soft-RoCE's counters (other devices name theirs otherwise: then these lines
# are not printed): the RNR NAKs its QPs received (an MFP that met no posted
# receive); the requester's retries (completer_retry_err: a local ACK timeout
# or a sequence NAK, each resending from the last packet acknowledged); and the
# requests the responder saw twice (duplicate_request); both per 10 000
# packets received, as perftest runs for a time and the builder for a count.
counters=/sys/class/infiniband/$EB_RDMA_DEVICE/ports/1/hw_counters
counter() { cat "$counters/$1" 2>/dev/null || echo 0; }
# counted COMMAND...: runs COMMAND; sets rnr (NAKs), retries and duplicates
# (per 10 000 packets received) to what it added to the counters.
counted() {
  local rnr0 retries0 duplicates0 received0
  rnr0=$(counter rcvd_rnr_err) retries0=$(counter completer_retry_err)
  duplicates0=$(counter duplicate_request) received0=$(counter rcvd_pkts)
  "$@"
  local packets=$(($(counter rcvd_pkts) - received0))
  rnr=$(($(counter rcvd_rnr_err) - rnr0))
  retries=$(per_10k_packets $(($(counter completer_retry_err) - retries0)) "$packets")
  duplicates=$(per_10k_packets $(($(counter duplicate_request) - duplicates0)) "$packets")
}
per_10k_packets() { awk -v n="$1" -v p="$2" 'BEGIN { printf "%.3g", (p > 0 ? 1e4 * n / p : 0) }'; }
rnr_total=0

ib=() send=() verbs=() tcp=() verbs_cpu=() tcp_cpu=()
ib_retries=() ib_duplicates=() verbs_retries=() verbs_duplicates=()
vs_write=() vs_send=() vs_tcp=() verbs_more=() vs_write_more=() vs_write_depth=() depth_gain=()
vs_write_window=() window_gain=()
# verbs_run [FLAGS...]: the verbs units of (b); sets rnr, retries, duplicates and the run's figures.
verbs_run() { counted run_builder --source prepared --output discard --transport verbs --rdma-device "$EB_RDMA_DEVICE" "$@"; }
# compared_run FLAGS...: the units of (d) or (e), their throughput in compared.
compared_run() {
  verbs_run "$@"
  compared=$(gbps "$received" "$seconds") rnr_total=$((rnr_total + rnr))
}
for ((run = 1; run <= runs; run++)); do
  echo ">> run $run of $runs: ib_write_bw and ib_send_bw -b, $mfp_bytes-byte messages, $tx_depth in flight, $ib_seconds s" >&2
  counted perftest_pair ib_write_bw $((18514 + run)) "$work/ib" -b -s "$mfp_bytes" -D "$ib_seconds" -q 1 -t "$tx_depth"
  ib+=("$(average_gbits "$work/ib")") ib_retries+=("$retries") ib_duplicates+=("$duplicates")
  [ -n "${ib[-1]}" ] || { cat "$work/ib" >&2; echo "bench: no 'BW average' from ib_write_bw" >&2; exit 1; }
  perftest_pair ib_send_bw $((18524 + run)) "$work/send" -b -s "$mfp_bytes" -D "$ib_seconds" -q 1 -t "$tx_depth"
  send+=("$(average_gbits "$work/send")")
  [ -n "${send[-1]}" ] || { cat "$work/send" >&2; echo "bench: no 'BW average' from ib_send_bw" >&2; exit 1; }
  # Which depth goes first alternates, so neither always follows perftest.
  if [ -n "$compare_depth" ] && ((run % 2 == 0)); then compared_run --verbs-depth "$compare_depth"; fi
  if [ -n "$compare_window" ] && ((run % 2 == 0)); then compared_run --receive-window "$compare_window"; windowed=$compared; fi
  verbs_run
  rnr_total=$((rnr_total + rnr)) verbs_retries+=("$retries") verbs_duplicates+=("$duplicates")
  verbs+=("$(gbps "$received" "$seconds")") verbs_cpu+=("$(per_gb "$cpu" "$received")")
  if [ -n "$compare_window" ]; then
    if ((run % 2 == 1)); then compared_run --receive-window "$compare_window"; windowed=$compared; fi
    vs_write_window+=("$(ratio "$windowed" "${ib[-1]}")") window_gain+=("$(ratio "$windowed" "${verbs[-1]}")")
  fi
  if [ -n "$compare_depth" ]; then
    if ((run % 2 == 1)); then compared_run --verbs-depth "$compare_depth"; fi
    vs_write_depth+=("$(ratio "$compared" "${ib[-1]}")") depth_gain+=("$(ratio "${verbs[-1]}" "$compared")")
  fi
  run_builder --source prepared --output discard --transport tcp
  tcp+=("$(gbps "$received" "$seconds")") tcp_cpu+=("$(per_gb "$cpu" "$received")")
  vs_write+=("$(ratio "${verbs[-1]}" "${ib[-1]}")") vs_send+=("$(ratio "${verbs[-1]}" "${send[-1]}")")
  vs_tcp+=("$(ratio "${verbs[-1]}" "${tcp[-1]}")")
  more=""
  if [ -n "$more_units" ]; then
    units=$more_units run_builder --source prepared --output discard --transport verbs --rdma-device "$EB_RDMA_DEVICE"
    verbs_more+=("$(gbps "$received" "$seconds")") vs_write_more+=("$(ratio "${verbs_more[-1]}" "${ib[-1]}")")
    more=" ($more_units units: ${vs_write_more[-1]})"
  fi
  [ -z "$compare_depth" ] || more+=", at --verbs-depth $compare_depth ${vs_write_depth[-1]}"
  [ -z "$compare_window" ] || more+=", at --receive-window $compare_window ${vs_write_window[-1]}"
  echo ">> run $run: verbs/ib_write_bw ${vs_write[-1]}$more, verbs/ib_send_bw ${vs_send[-1]}, verbs/tcp ${vs_tcp[-1]};" \
    "per 10k packets: retries ${verbs_retries[-1]} (ib_write_bw ${ib_retries[-1]}), duplicate requests" \
    "${verbs_duplicates[-1]} (ib_write_bw ${ib_duplicates[-1]})" >&2
done

bench_spread "ib_write_bw_bidirectional_${mfp_bytes}B" Gb/s "${ib[@]}"
bench_spread "ib_send_bw_bidirectional_${mfp_bytes}B" Gb/s "${send[@]}"
bench_spread "builder_verbs_network_throughput_n$units" Gb/s "${verbs[@]}"
bench_spread "builder_tcp_network_throughput_n$units" Gb/s "${tcp[@]}"
bench "builder_verbs_cpu_seconds_per_gb_n$units" "$(spread "${verbs_cpu[@]}" | cut -d' ' -f1)" s/GB
bench "builder_tcp_cpu_seconds_per_gb_n$units" "$(spread "${tcp_cpu[@]}" | cut -d' ' -f1)" s/GB
if [ -r "$counters/rcvd_rnr_err" ]; then
  bench "builder_verbs_rnr_naks_n${units}_all_runs" "$rnr_total" NAKs
  bench_spread "builder_verbs_retries_n$units" per_10k_packets "${verbs_retries[@]}"
  bench_spread ib_write_bw_retries per_10k_packets "${ib_retries[@]}"
  bench_spread "builder_verbs_duplicate_requests_n$units" per_10k_packets "${verbs_duplicates[@]}"
  bench_spread ib_write_bw_duplicate_requests per_10k_packets "${ib_duplicates[@]}"
fi
bench_spread verbs_vs_ib_write_bw ratio "${vs_write[@]}"
bench_spread verbs_vs_ib_send_bw ratio "${vs_send[@]}"
bench_spread verbs_vs_tcp ratio "${vs_tcp[@]}"
if [ -n "$more_units" ]; then
  bench_spread "builder_verbs_network_throughput_n$more_units" Gb/s "${verbs_more[@]}"
  bench_spread "verbs_vs_ib_write_bw_n$more_units" ratio "${vs_write_more[@]}"
fi
if [ -n "$compare_window" ]; then
  bench_spread "verbs_window${compare_window}_vs_ib_write_bw_n$units" ratio "${vs_write_window[@]}"
  bench_spread "verbs_window${compare_window}_over_window0_n$units" ratio "${window_gain[@]}"
fi
if [ -n "$compare_depth" ]; then
  bench_spread "verbs_depth${compare_depth}_vs_ib_write_bw" ratio "${vs_write_depth[@]}"
  bench_spread "verbs_depth2_over_depth${compare_depth}" ratio "${depth_gain[@]}"
fi
