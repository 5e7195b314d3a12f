#!/usr/bin/env bash
# Sets up what hack/verbs-vm/run.sh needs to boot a Soft-RoCE VM, and prints the
# path of the pinned `vng` (virtme-ng) on stdout; everything else goes to stderr.
# Idempotent: Debian packages are installed only when missing, and virtme-ng is
# cached under bin/ by its version, so a new pin gets a new directory.
set -euo pipefail
VIRTME_NG_VERSION=1.42
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# qemu + Debian's kernel (ships rdma_rxe) boot the VM; busybox builds the VM's
# initramfs; rdma-core/iproute2 give `rdma link add`; perftest and ibverbs-utils
# are the reference tools; libibverbs-dev builds the verbs transport.
"$ROOT/hack/ensure-packages.sh" qemu-system-x86 linux-image-amd64 busybox-static python3-venv \
  iproute2 kmod rdma-core ibverbs-utils ibverbs-providers perftest libibverbs-dev >&2

dir=$ROOT/bin/virtme-ng-$VIRTME_NG_VERSION
# Present means: the wrapper is there and the venv's python still imports it
# (a python upgrade on the host would break the venv, and then it is rebuilt).
if ! { [ -x "$dir/vng" ] && "$dir/bin/python3" -c 'import virtme_ng' 2>/dev/null; }; then
  echo ">> installing virtme-ng $VIRTME_NG_VERSION into $dir" >&2
  tmp=$dir.tmp.$$
  trap 'rm -rf "$tmp"' EXIT
  rm -rf "$tmp"
  # Debian's python, not a pyenv shim: the venv must outlive the shell's setup.
  /usr/bin/python3 -m venv "$tmp" >&2
  "$tmp/bin/pip" install -q --disable-pip-version-check "virtme-ng==$VIRTME_NG_VERSION" >&2
  # pip writes absolute shebangs: point the scripts at the final directory so
  # that the rename below leaves a working venv (vng runs `virtme-run` by name).
  for f in "$tmp"/bin/*; do
    if [ -f "$f" ] && [ ! -L "$f" ] && head -c2 "$f" | grep -q '#!'; then
      sed -i "1s|^#!$tmp/|#!$dir/|" "$f"
    fi
  done
  # The entry point run.sh calls: puts the venv's scripts first on PATH.
  cat >"$tmp/vng" <<'WRAP'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
PATH=$here/bin:$PATH exec "$here/bin/vng" "$@"
WRAP
  chmod +x "$tmp/vng"
  "$tmp/bin/python3" -c 'import virtme_ng'
  # -T: never move into a directory a concurrent run just finished.
  rm -rf "$dir" && { mv -T "$tmp" "$dir" 2>/dev/null || [ -x "$dir/vng" ]; }
  trap - EXIT
  "$dir/vng" --version >&2
fi
echo "$dir/vng"
