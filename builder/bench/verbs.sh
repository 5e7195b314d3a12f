#!/usr/bin/env bash
# The verbs transport against the device's own figure and against TCP, in one
# run on one device (make bench-verbs runs it in the Soft-RoCE VM, or on an
# RDMA host, through hack/verbs-vm/run.sh):
#  (a) ib_write_bw (perftest, one RC QP) at the builder's MFP size;
#  (b) N eb-builder units over --transport verbs, MEPs assembled and dropped
#      (--output discard: the data mover);
#  (c) the same units over TCP.
# Absolute figures on Soft-RoCE under an emulated CPU mean nothing; the
# ratios, taken in the same run, do. Prints BENCH lines on stdout.
# Usage: builder/bench/verbs.sh BUILD_DIR   (EB_BENCH_UNITS, default 2)
set -euo pipefail
build=$(cd "${1:?usage: builder/bench/verbs.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${EB_RDMA_DEVICE:?run this through hack/verbs-vm/run.sh (make bench-verbs)}"
units=${EB_BENCH_UNITS:-2}
events=${EB_BENCH_EVENTS:-600000}  # per BU
seconds=${EB_BENCH_SECONDS:-10}    # of ib_write_bw
packing_factor=1000
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
# shellcheck source-path=SCRIPTDIR
source "$here/lib.sh"

# An MFP of 128-byte fragments (docs/formats.md): a 32-byte header, a type
# byte and a 2-byte size per fragment, padded to 8 bytes, then the payloads.
mfp_bytes=$(((32 + 3 * packing_factor + 7) / 8 * 8 + 128 * packing_factor))
rate() { awk -v e="$built" -v t="$seconds" 'BEGIN { printf "%.0f", e / t }'; }

# (a) The device's reference figure at the same message size.
ib_gbps=$("$here/../../hack/verbs-vm/bench-perftest.sh" "$mfp_bytes" "$seconds" | sed -n 's/^BENCH name=ib_write_bw value=\([0-9.]*\) .*/\1/p')
[ -n "$ib_gbps" ] || { echo "bench: no figure from ib_write_bw" >&2; exit 1; }
bench "ib_write_bw_${mfp_bytes}B" "$ib_gbps" Gb/s

# (b), (c) The builder, both transports, the same units and events.
run_builder --output discard --transport verbs --rdma-device "$EB_RDMA_DEVICE"
verbs_gbps=$(network "$(gbps "$bytes" "$seconds")")
bench "builder_verbs_network_throughput_n$units" "$verbs_gbps" Gb/s
bench "builder_verbs_event_rate_n$units" "$(rate)" Hz

run_builder --output discard --transport tcp
tcp_gbps=$(network "$(gbps "$bytes" "$seconds")")
bench "builder_tcp_network_throughput_n$units" "$tcp_gbps" Gb/s
bench "builder_tcp_event_rate_n$units" "$(rate)" Hz

bench verbs_vs_ib_write_bw "$(awk -v a="$verbs_gbps" -v b="$ib_gbps" 'BEGIN { printf "%.3f", a / b }')" ratio
bench verbs_vs_tcp "$(awk -v a="$verbs_gbps" -v b="$tcp_gbps" 'BEGIN { printf "%.3f", a / b }')" ratio
