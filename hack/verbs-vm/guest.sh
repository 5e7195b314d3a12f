#!/usr/bin/env bash
# Runs inside the Soft-RoCE VM that run.sh boots (as root, on the host's root
# file system, read-only except the repository; /tmp is the guest's own).
# Usage: guest.sh STATE_DIR. STATE_DIR (shared with the host, writable) holds
# the command (cmd, NUL-separated), its directory (cwd) and environment (env);
# this script writes the marks the host times against (started, cmd-started)
# and the command's exit status (status), since that is what the host trusts.
set -euo pipefail
state=$1
: >"$state/started"   # created over 9p by the host's qemu: its mtime is host time
t0=$(date +%s%N)

# Soft-RoCE on one end of a veth pair. Several processes on rxe0 talk RC to
# each other through it (rxe loops back locally); a second rxe device on veth1
# would NOT connect (both addresses local), so there is one device.
modprobe rdma_rxe
modprobe veth
ip link add veth0 type veth peer name veth1
ip addr add 10.99.0.1/24 dev veth0
ip link set veth0 up
ip link set veth1 up
rdma link add rxe0 type rxe netdev veth0

# Wait (bounded) for the port to be ACTIVE and to carry the RoCE v2 GID of
# 10.99.0.1 (IPv4-mapped, as sysfs prints it): before that, connecting fails.
port=/sys/class/infiniband/rxe0/ports/1
want=0000:0000:0000:0000:0000:ffff:0a63:0001
deadline=$((SECONDS + 60))
ready() {
  grep -q ACTIVE "$port/state" 2>/dev/null || return 1
  local g
  for g in "$port"/gids/*; do
    [ "$(cat "$g")" = "$want" ] && [ "$(cat "$port/gid_attrs/types/${g##*/}" 2>/dev/null)" = "RoCE v2" ] && return 0
  done 2>/dev/null
  return 1
}
until ready; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "error: rxe0 did not come up within 60 s: state=$(cat "$port/state" 2>&1)" >&2
    rdma link show >&2 || true
    exit 1
  fi
  sleep 0.1
done
echo ">> verbs-vm: rxe0 ACTIVE with its RoCE v2 GID after $(( ($(date +%s%N) - t0) / 1000000 )) ms of guest setup"

# The guest's default locked-memory limit is 8 MiB; registering buffers needs more.
ulimit -l unlimited
# The caller's environment subset (EB_*, GTEST_*, CTEST_*, PATH), then ours.
# shellcheck disable=SC1091
source "$state/env"
export EB_RDMA_DEVICE=rxe0 EB_VERBS_ADDRESS=10.99.0.1 EB_VERBS_HOST=soft-roce-vm
cd "$(cat "$state/cwd")"
mapfile -d '' -t cmd <"$state/cmd"

: >"$state/cmd-started"
rc=0
"${cmd[@]}" || rc=$?
echo "$rc" >"$state/status"
exit "$rc"
