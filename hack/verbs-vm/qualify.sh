#!/usr/bin/env bash
# make qualify-rdma: a report a site keeps of one RDMA device under the event
# builder. Where this host has an ACTIVE RDMA port (run.sh finds it) the report
# is of that device; otherwise of Soft-RoCE in the VM (which qualifies the
# builder on verbs, not a NIC). It holds: the device (firmware, link layer, MTU,
# rate, the GID the builder picks), perftest's bandwidth at the builder's MFP
# size, the builder's verbs units against it (builder/bench/verbs.sh), the two
# injected queue-pair faults (lost peer named, set building on), and every
# device counter that moved, before and after.
# Usage: hack/verbs-vm/qualify.sh BUILD_DIR REPORT_DIR [--timeout SECONDS]
# Env: EB_BENCH_RUNS (default 3 here), as builder/bench/verbs.sh.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
usage() { echo "usage: $0 BUILD_DIR REPORT_DIR [--timeout SECONDS]" >&2; exit 2; }
[ $# -ge 2 ] || usage
build=$(cd "$1" && pwd) report_dir=$2
shift 2

if [ "${EB_QUALIFY_INSIDE:-}" != 1 ]; then
  mkdir -p "$report_dir"
  report_dir=$(cd "$report_dir" && pwd)
  has_port=0
  for state in /sys/class/infiniband/*/ports/*/state; do grep -qs ACTIVE "$state" && has_port=1; done
  if [ "$has_port" = 0 ]; then
    echo ">> qualify-rdma: this host has no ACTIVE RDMA port (ibv_devinfo shows none). To qualify a NIC, run" \
      "this on a farm node with rdma-core and the HCA's driver (mlx5_ib for ConnectX) and its link up" \
      "(PORT_ACTIVE). Here Soft-RoCE in a VM stands in: it qualifies the builder on verbs, not a NIC." >&2
  fi
  export EB_QUALIFY_INSIDE=1
  exec "$HERE/run.sh" "$@" -- "$HERE/qualify.sh" "$build" "$report_dir"
fi

# --- Inside: on the device (the host's, or the VM's). ----------------------
# shellcheck source-path=SCRIPTDIR
source "$HERE/lib.sh"
dev=$EB_RDMA_DEVICE
port=/sys/class/infiniband/$dev/ports/1
stamp=$(date -u +%Y%m%dT%H%M%SZ)
report=$report_dir/qualify-rdma-$(hostname)-$dev-$stamp.txt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Every counter the device and its port keep (names differ by driver: mlx5
# has rnr_nak_retry_err, local_ack_timeout_err, packet_seq_err; rxe has
# rcvd_rnr_err, completer_retry_err, rcvd_seq_err).
snapshot() {
  local file
  for file in "$port"/hw_counters/* "$port"/counters/* /sys/class/infiniband/"$dev"/hw_counters/*; do
    [ -f "$file" ] && [ -r "$file" ] || continue
    printf '%s %s\n' "${file#/sys/class/infiniband/$dev/}" "$(cat "$file" 2>/dev/null || echo '?')"
  done
}
snapshot >"$work/before"

{
  echo "# RDMA qualification of $(hostname), $stamp"
  echo "builder: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown); device host: $EB_VERBS_HOST"
  echo
  echo "## Device"
  ibv_devinfo -v -d "$dev" | awk '/hca_id|transport:|fw_ver|node_guid|vendor_id|vendor_part_id|hw_ver|board_id|phys_port_cnt|port:|state:|max_mtu|active_mtu|active_width|active_speed|link_layer|max_qp:|max_qp_wr|max_mr_size/ { sub(/^[ \t]+/, ""); print }'
  gid=$(gid_index "$dev" || true)
  if [ -n "$gid" ]; then
    echo "GID index the builder picks (RoCE v2, IPv4): $gid = $(cat "$port/gids/$gid")," \
      "netdev $(cat "$port/gid_attrs/ndevs/$gid" 2>/dev/null || echo '?')"
  fi
  echo "rate: $(cat "$port/rate" 2>/dev/null || echo '?'); ulimit -l: $(ulimit -l)"
  echo "perftest: $(dpkg-query -W -f='${Version}' perftest 2>/dev/null || echo '?'); rdma-core:" \
    "$(dpkg-query -W -f='${Version}' rdma-core 2>/dev/null || echo '?'); kernel: $(uname -r)"
  echo
} >"$report"
cat "$report"

echo ">> qualify-rdma: perftest and the builder's verbs units (builder/bench/verbs.sh)" >&2
EB_BENCH_RUNS=${EB_BENCH_RUNS:-3} "$ROOT/builder/bench/verbs.sh" "$build" >"$work/bench" 2>"$work/bench.log" ||
  { cat "$work/bench.log" >&2; echo "qualify-rdma: the bench failed (above)" >&2; exit 1; }
echo ">> qualify-rdma: queue-pair faults injected (eb-fault-tests, InjectedVerbsFault)" >&2
faults=passed
EB_TEST_TRANSPORT=verbs "$build/tests/eb-fault-tests" --gtest_filter='*InjectedVerbsFault*' --gtest_color=no \
  >"$work/faults" 2>&1 || faults=FAILED
snapshot >"$work/after"

{
  echo "## Bandwidth (Gb/s = 10^9 bit/s; median, min and max of the runs)"
  grep '^>> run [0-9]*:' "$work/bench.log" || true
  sed 's/^BENCH name=//' "$work/bench"
  echo
  echo "## Queue-pair faults injected: $faults"
  grep -E '^(qp-error|short-mfp), rank|^\[ +(OK|FAILED) +\]' "$work/faults" || true
  echo
  echo "## Counters that moved (before -> after)"
  join "$work/before" "$work/after" | awk '$2 != $3 { printf "%s %s -> %s\n", $1, $2, $3 }'
} | tee -a "$report"
echo ">> qualify-rdma: report in $report" >&2
[ "$faults" = passed ] || { sed -n '1,200p' "$work/faults" >&2; exit 1; }
