#!/usr/bin/env bash
# Builds the Debian base image every project image starts from. No registry can be
# reached here, so the root filesystem is made with debootstrap and imported.
# Usage: images/base/build.sh <image:tag>   (skips when the image already exists;
# the Makefile puts a hash of this script in the tag)
set -euo pipefail
image=$1
suite=bookworm
# The mirror this machine's apt uses, unless DEBIAN_MIRROR says otherwise.
host_mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
mirror=${DEBIAN_MIRROR:-${host_mirror:-http://deb.debian.org/debian}}

if docker image inspect "$image" >/dev/null 2>&1; then
  exit 0
fi
rootfs=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$rootfs" "$log"' EXIT
echo ">> debootstrap $suite from $mirror (about 1 min)"
if ! debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$log" 2>&1; then
  echo "error: debootstrap failed; its last lines:" >&2
  tail -20 "$log" "$rootfs/debootstrap/debootstrap.log" >&2 2>/dev/null || true
  exit 1
fi
# The same mirror inside images, security updates included, and no cached lists.
cat > "$rootfs/etc/apt/sources.list" <<LIST
deb $mirror $suite main
deb $mirror $suite-updates main
deb ${mirror%/debian}/debian-security $suite-security main
LIST
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
tar -C "$rootfs" -c . | docker import --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo ">> built $image"
# Base images of earlier versions of this script are no longer referenced.
docker images "${image%:*}" --format '{{.Repository}}:{{.Tag}}' | grep -vxF "$image" \
  | xargs -r docker rmi >/dev/null 2>&1 || true
