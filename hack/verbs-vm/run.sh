#!/usr/bin/env bash
# Runs COMMAND as root where an RDMA verbs device exists, exporting
#   EB_RDMA_DEVICE    the device to open (e.g. rxe0, mlx5_0)
#   EB_VERBS_ADDRESS  an IPv4 address for the out-of-band/CM side
#   EB_VERBS_HOST     real | soft-roce-vm
# If this host has an ACTIVE RDMA port, COMMAND runs here. Otherwise a VM of
# the host's root file system is booted (virtme-ng + QEMU, TCG when there is no
# KVM) with Soft-RoCE (rdma_rxe) on a veth, and COMMAND runs in it (guest.sh).
# Exits with COMMAND's exit status; 124 when --timeout (default 600 s) passed.
# Usage: hack/verbs-vm/run.sh [--timeout SECONDS] -- COMMAND...
# Env: EB_VERBS_FORCE_VM=1 boots the VM even on RDMA hardware;
#      EB_VERBS_VM_MEMORY (default 3G), EB_VERBS_VM_CPUS (default 2).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
usage() { echo "usage: $0 [--timeout SECONDS] -- COMMAND..." >&2; exit 2; }
timeout_s=600
while [ $# -gt 0 ]; do
  case $1 in
    --timeout) [ $# -ge 2 ] || usage; timeout_s=$2; shift 2 ;;
    --timeout=*) timeout_s=${1#*=}; shift ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ $# -gt 0 ] || usage
[[ $timeout_s =~ ^[0-9]+$ ]] || usage
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# --- A real device: run on the host. --------------------------------------
if [ "${EB_VERBS_FORCE_VM:-0}" != 1 ]; then
  for state in /sys/class/infiniband/*/ports/*/state; do
    grep -qs ACTIVE "$state" || continue  # no match: the literal glob, no file
    port=${state%/state}
    dev=$(basename "$(dirname "$(dirname "$port")")")
    address=127.0.0.1
    if [ "$(cat "$port/link_layer")" = Ethernet ]; then  # RoCE: use its netdev's IPv4
      netdev=$(cat "$port/gid_attrs/ndevs/0" 2>/dev/null || true)
      ip4=$( [ -n "$netdev" ] && ip -4 -o addr show dev "$netdev" | awk '{ sub("/.*", "", $4); print $4; exit }')
      [ -n "$ip4" ] || { echo "error: RoCE device $dev (netdev '${netdev:-?}') has no IPv4 address; add one" >&2; exit 1; }
      address=$ip4
    fi
    echo ">> verbs-vm: using this host's RDMA device $dev (port ${port##*/}, address $address)"
    export EB_RDMA_DEVICE=$dev EB_VERBS_ADDRESS=$address EB_VERBS_HOST=real
    rc=0
    timeout -k 15 "$timeout_s" "$@" || rc=$?
    [ "$rc" != 124 ] || echo "error: COMMAND did not finish within $timeout_s s (--timeout); killed it" >&2
    exit "$rc"
  done
fi

# --- No device: a Soft-RoCE VM. --------------------------------------------
[ "$(id -u)" = 0 ] || { echo "error: the verbs VM needs root (Debian's kernel image is root-only, and modules load in the guest as root)" >&2; exit 1; }
vng=$("$HERE/ensure.sh") || { echo "error: hack/verbs-vm/ensure.sh failed (needs root and Debian apt; see above)" >&2; exit 1; }
kernel=$(find /boot -maxdepth 1 -name 'vmlinuz-*-amd64' | sort -V | tail -n 1)
[ -n "$kernel" ] || { echo "error: no /boot/vmlinuz-*-amd64; install Debian's kernel: apt-get install linux-image-amd64" >&2; exit 1; }
kver=${kernel#/boot/vmlinuz-}
compgen -G "/lib/modules/$kver/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko*" >/dev/null ||
  { echo "error: kernel $kver has no rdma_rxe module under /lib/modules/$kver; reinstall linux-image-$kver" >&2; exit 1; }

# The guest sees the host's root read-only; the repository is shared read-write
# (build outputs, ctest's Testing/), and the hand-over files live under build/.
mkdir -p "$ROOT/build/verbs-vm"
state=$(mktemp -d "$ROOT/build/verbs-vm/run.XXXXXX")
trap 'rm -rf "$state"' EXIT
printf '%s\0' "$@" >"$state/cmd"
pwd >"$state/cwd"
for name in $(compgen -e); do
  case $name in EB_* | GTEST_* | CTEST_* | PATH) declare -p "$name" ;; esac
done >"$state/env"

kvm=(--disable-kvm)  # no vmx/svm here: TCG emulation, about 17x slower than the host
if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then kvm=(); fi
# Modules udev would load for QEMU's q35 devices that rxe does not need; under
# TCG each costs seconds of boot (kvm, AHCI/CD-ROM, watchdogs, crypto self-tests).
skip=kvm,kvm_amd,kvm_intel,ahci,libahci,sr_mod,cdrom,iTCO_wdt,iTCO_vendor_support,i6300esb,lpc_ich,i2c_i801
skip+=,pcspkr,powernow_k8,aesni_intel,ghash_clmulni_intel,sha512_ssse3,sha256_ssse3,sha1_ssse3
skip+=,evdev,psmouse,joydev,serio_raw,sg,button,edac_mce_amd

echo ">> verbs-vm: no RDMA device on this host; booting $kernel with Soft-RoCE (timeout $timeout_s s)"
t0=$(now)
# QEMU opens the guest's stdout/stderr as /proc/self/fd/1 and 2 with O_TRUNC:
# were ours a log file, it would be truncated. So it writes into FIFOs that we
# copy out (live), and we wait for the copies so the order of lines holds.
mkfifo "$state/stdout" "$state/stderr"
cat "$state/stdout" & out_pid=$!
cat "$state/stderr" >&2 & err_pid=$!
# timeout(1) runs in its own process group and kills all of it (vng, virtme-run,
# qemu); stdin is not the guest's. INT/TERM to us are passed on, so no VM is left.
timeout -k 15 "$timeout_s" "$vng" --run "$kernel" "${kvm[@]}" \
  --memory "${EB_VERBS_VM_MEMORY:-3G}" --cpus "${EB_VERBS_VM_CPUS:-2}" \
  --rwdir "$ROOT" --cwd "$ROOT" --append "modprobe.blacklist=$skip" \
  --exec "$(printf '%q ' "$HERE/guest.sh" "$state")" \
  </dev/null >"$state/stdout" 2>"$state/stderr" &
pid=$!
# shellcheck disable=SC2317  # called from the traps below
stop() { kill -TERM "$pid" 2>/dev/null; wait "$pid" || true; echo "error: interrupted; stopped the VM" >&2; exit "$1"; }
trap 'stop 130' INT
trap 'stop 143' TERM
vm_rc=0
wait "$pid" || vm_rc=$?
wait "$out_pid" "$err_pid" || true
t_end=$(now)

mtime() { stat -c %.9Y "$state/$1" 2>/dev/null; }
if [ -e "$state/started" ]; then
  echo ">> verbs-vm: booted in $(elapsed "$t0" "$(mtime started)") s"
fi
if [ -e "$state/status" ]; then
  rc=$(cat "$state/status")
  echo ">> verbs-vm: command finished in $(elapsed "$(mtime cmd-started)" "$(mtime status)") s, total $(elapsed "$t0" "$t_end") s (exit $rc)"
  exit "$rc"
fi
if [ "$vm_rc" = 124 ] || [ "$vm_rc" = 137 ]; then
  echo "error: verbs VM did not finish within $timeout_s s (--timeout); killed it after $(elapsed "$t0" "$t_end") s" >&2
  exit 124
fi
if [ -e "$state/cmd-started" ]; then
  echo "error: the VM stopped (exit $vm_rc) while COMMAND ran, without its status: guest crash or out of memory? see the output above" >&2
elif [ -e "$state/started" ]; then
  echo "error: Soft-RoCE setup failed in the guest (exit $vm_rc); see guest.sh's output above" >&2
else
  echo "error: the VM did not boot (vng exit $vm_rc); rerun with the vng line in hack/verbs-vm/run.sh plus --verbose to see the console" >&2
fi
exit $((vm_rc ? vm_rc : 1))
