#!/usr/bin/env bash
# Reference RDMA WRITE bandwidth of the verbs device (perftest's ib_write_bw,
# one RC QP, server and client on the same device), to set the builder's verbs
# transport against. Runs where run.sh puts it (the Soft-RoCE VM, or hardware):
#   hack/verbs-vm/run.sh -- hack/verbs-vm/bench-perftest.sh 65536 10
# Prints: BENCH name=ib_write_bw value=<average> unit=Gb/s (Gb = 10^9 bit;
# perftest prints MiB/s, which average_gbits converts).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR
source "$HERE/lib.sh"
size=${1:?usage: bench-perftest.sh SIZE SECONDS}
seconds=${2:?usage: bench-perftest.sh SIZE SECONDS}
: "${EB_RDMA_DEVICE:?run this through hack/verbs-vm/run.sh}" "${EB_VERBS_ADDRESS:?run this through hack/verbs-vm/run.sh}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo ">> ib_write_bw on $EB_RDMA_DEVICE ($EB_VERBS_HOST): $size-byte messages, $seconds s, 1 QP" >&2
perftest_pair ib_write_bw 18515 "$work/client" -s "$size" -D "$seconds" -q 1
cat "$work/client" >&2
gbits=$(average_gbits "$work/client")
[ -n "$gbits" ] || { echo "error: no 'BW average' in ib_write_bw's output (above)" >&2; exit 1; }
echo "BENCH name=ib_write_bw value=$gbits unit=Gb/s"
