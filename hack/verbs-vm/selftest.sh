#!/usr/bin/env bash
# End-to-end check of the verbs runner: boots the Soft-RoCE VM (or uses RDMA
# hardware) through run.sh and, there, checks that the device's port is ACTIVE,
# that perftest's RDMA WRITE runs between two processes on it, and that two
# such pairs (4 processes) run on it at once.
# Usage: hack/verbs-vm/selftest.sh [--timeout SECONDS]   (default 600)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "${1:-}" != --inside ]; then
  exec "$HERE/run.sh" "$@" -- "$HERE/selftest.sh" --inside
fi
# shellcheck source-path=SCRIPTDIR
source "$HERE/lib.sh"
dev=$EB_RDMA_DEVICE
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }

echo ">> device $dev on $EB_VERBS_HOST, address $EB_VERBS_ADDRESS; ulimit -l $(ulimit -l);" \
  "/dev/shm $(df -h --output=fstype,size /dev/shm | tail -n 1)"
ibv_devinfo -d "$dev" >"$work/devinfo"
grep -q PORT_ACTIVE "$work/devinfo" || { cat "$work/devinfo"; echo "FAIL: $dev has no ACTIVE port"; exit 1; }
ok "ibv_devinfo -d $dev: PORT_ACTIVE, GID index for RoCE v2/IPv4: $(gid_index "$dev")"

"$HERE/bench-perftest.sh" 65536 5
ok "ib_write_bw 64 KiB for 5 s between two processes"

# Two pairs at once: 4 processes with their own QPs, MRs and CQs on one device.
perftest_pair ib_write_bw 18600 "$work/a" -s 65536 -D 3 &
a=$!
perftest_pair ib_write_bw 18601 "$work/b" -s 65536 -D 3 &
b=$!
wait "$a" && wait "$b"
ok "two ib_write_bw pairs at once: $(average_gbits "$work/a") and $(average_gbits "$work/b") Gb/s"

# Captured first: `| grep -q` under pipefail fails when grep exits before the
# help text is written (SIGPIPE).
help=$(ib_write_bw --help 2>&1 || true)
if grep -q write_with_imm <<<"$help"; then
  perftest_pair ib_write_bw 18602 "$work/imm" -s 65536 -D 3 --write_with_imm
  ok "ib_write_bw --write_with_imm: $(average_gbits "$work/imm") Gb/s"
else
  echo "note: this perftest ($(dpkg-query -W -f='${Version}' perftest 2>/dev/null || echo '?')) has no --write_with_imm; RDMA WRITE WITH IMMEDIATE not checked here"
fi
echo "verbs-vm selftest: $passed passed, 0 failed"
