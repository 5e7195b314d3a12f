#!/usr/bin/env bash
# Builds the Debian base image every project image starts from. No registry can be
# reached here, so the root filesystem is made with debootstrap and imported.
# Usage: images/base/build.sh <image:tag>   (skips when the image already exists)
set -euo pipefail
image=$1
suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if docker image inspect "$image" >/dev/null 2>&1; then
  exit 0
fi
if ! command -v debootstrap >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
echo ">> debootstrap $suite into $rootfs (about 2 min)"
debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >/dev/null
# Same sources as the host sees, security updates included, and no cached lists.
cat > "$rootfs/etc/apt/sources.list" <<LIST
deb $mirror $suite main
deb $mirror $suite-updates main
deb ${mirror%/debian}/debian-security $suite-security main
LIST
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
tar -C "$rootfs" -c . | docker import --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo ">> built $image"
