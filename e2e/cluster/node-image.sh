#!/usr/bin/env bash
# Chooses the kind node image and prints its name: the official kindest/node image
# of our Kubernetes version where it can be pulled and used, else one built offline
# (build-node-image.sh; skipped when already built).
# Usage: node-image.sh <offline image tag> <kind module@version> <base image> <k8s bin dir> <coredns binary> <runc-wrapper> <containerd bin dir>
set -euo pipefail
offline_image=$1 kind_module=$2 base_image=$3 k8s_bin=$4 coredns_bin=$5 runc_wrapper=$6 containerd_bin=$7
here=$(cd "$(dirname "$0")" && pwd)

# The official image runs privileged pods as they are, which needs CAP_SYS_RESOURCE
# (bit 24 of the bounding set); without it only the offline image's runc wrapper works.
official=kindest/node:$("$k8s_bin/kubeadm" version -o short)
if (( (0x$(awk '/^CapBnd/ {print $2}' /proc/self/status) >> 24 & 1) == 1 )) &&
   { docker image inspect "$official" >/dev/null 2>&1 || docker pull -q "$official" >/dev/null 2>&1; }; then
  echo "$official"
  exit 0
fi
echo ">> $official cannot be pulled or run here; using a node image built offline" >&2

# kind's base-image files (entrypoint, kubelet units) come from the pinned kind module.
if ! module=$(go mod download -json "$kind_module" 2>&1); then
  echo "error: go mod download $kind_module failed: $module" >&2
  exit 1
fi
kind_dir=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$module")
if [ ! -d "$kind_dir/images/base/files" ]; then
  echo "error: $kind_module has no images/base/files in the module cache ($kind_dir)" >&2
  exit 1
fi
"$here/build-node-image.sh" "$offline_image" "$kind_dir" "$base_image" "$k8s_bin" "$coredns_bin" "$runc_wrapper" "$containerd_bin" >&2
echo "$offline_image"
