#!/usr/bin/env bash
# Chooses the kind node image and prints its name: kind's own default image when
# this machine has it or can pull it, else one built offline (build-node-image.sh).
# Usage: node-image.sh <offline image tag> <kind module dir> <base image> <k8s bin dir> <coredns binary> <runc-wrapper>
set -euo pipefail
offline_image=$1 kind_dir=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)

official=$(sed -n 's/^const Image = "\(.*\)"$/\1/p' "$kind_dir/pkg/apis/config/defaults/image.go")
if [ -n "$official" ] && { docker image inspect "$official" >/dev/null 2>&1 || docker pull -q "$official" >/dev/null 2>&1; }; then
  echo "$official"
  exit 0
fi
echo ">> $official cannot be pulled here; using a node image built offline" >&2
"$here/build-node-image.sh" "$offline_image" "$kind_dir" "$@" >&2
echo "$offline_image"
