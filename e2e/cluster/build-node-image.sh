#!/usr/bin/env bash
# Builds a kind node image offline: the node filesystem (Debian + systemd +
# containerd 2 + kind's entrypoint and kubelet units + the Kubernetes binaries), and
# inside its containerd every image kubeadm will ask for, each built locally from
# the same binaries. Skips when the image already exists (its tag carries a hash
# of everything that goes into it).
# Usage: build-node-image.sh <node image> <kind module dir> <base image> <k8s bin dir> <coredns binary> <runc-wrapper> <containerd bin dir>
set -euo pipefail
node_image=$1 kind_dir=$2 base_image=$3 k8s_bin=$4 coredns_bin=$5 runc_wrapper=$6 containerd_bin=$7
here=$(cd "$(dirname "$0")" && pwd)

if docker image inspect "$node_image" >/dev/null 2>&1; then
  exit 0
fi
version=$("$k8s_bin/kubeadm" version -o short)
ctx=$(mktemp -d)
container=""
cleanup() { rm -rf "$ctx"; [ -z "$container" ] || docker rm -f "$container" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# The images kubeadm $version expects, e.g. registry.k8s.io/etcd:3.6.6-0.
list=$("$k8s_bin/kubeadm" config images list --kubernetes-version "$version")
mapfile -t wanted <<<"$list"
image_for() {
  printf '%s\n' "${wanted[@]}" | grep -E "/$1:" || { echo "error: kubeadm $version lists no $1 image: ${wanted[*]}" >&2; return 1; }
}
check_version() { # component, the version we built, the tag kubeadm wants
  case "$3" in "$2"|"$2"-*) ;; *) echo "error: kubeadm $version wants $1 $3 but $2 was built; pin $1 to ${3%%-*}" >&2; exit 1;; esac
}

# docker build with its output shown only when it fails (the legacy builder of
# Debian's Docker 20.10 also prints a deprecation banner on every build).
quiet_build() {
  local output
  if ! output=$(docker build "$@" 2>&1); then
    echo "$output" >&2
    return 1
  fi
}

build_component() { # image tag, binary path, extra packages
  local dir="$ctx/$(basename "$2")"
  mkdir -p "$dir" && cp "$2" "$dir/"
  echo ">> image $1"
  quiet_build -f "$here/images/component.Dockerfile" --build-arg BASE_IMAGE="$base_image" \
    --build-arg BINARY="$(basename "$2")" --build-arg PACKAGES="${3:-}" -t "$1" "$dir"
}
for component in kube-apiserver kube-controller-manager kube-scheduler; do
  image=$(image_for "$component")
  build_component "$image" "$k8s_bin/$component"
done
image=$(image_for kube-proxy)
build_component "$image" "$k8s_bin/kube-proxy" "iptables nftables conntrack ipset"
etcd_image=$(image_for etcd)
check_version etcd "$("$k8s_bin/etcd" --version | awk '/etcd Version/ {print $3}')" "${etcd_image##*:}"
build_component "$etcd_image" "$k8s_bin/etcd"

coredns_image=$(image_for coredns)
check_version coredns "v$("$coredns_bin" -version | awk -F'[ -]' '/CoreDNS/ {print $2}')" "${coredns_image##*:}"
mkdir -p "$ctx/coredns" && cp "$coredns_bin" "$ctx/coredns/coredns"
echo ">> image $coredns_image"
quiet_build --build-arg BASE_IMAGE="$base_image" -t "$coredns_image" -f "$here/images/coredns/Dockerfile" "$ctx/coredns"

pause_image=$(image_for pause)
if ! grep -qF "sandbox = '$pause_image'" "$here/node/files/containerd-config.toml"; then
  echo "error: kubeadm $version wants $pause_image; set pinned_images.sandbox to it in node/files/containerd-config.toml" >&2
  exit 1
fi
mkdir -p "$ctx/pause"
gcc -static -O2 -o "$ctx/pause/pause" "$here/images/pause/pause.c"
echo ">> image $pause_image"
quiet_build -t "$pause_image" -f "$here/images/pause/Dockerfile" "$ctx/pause"

echo ">> node filesystem"
mkdir -p "$ctx/node/kind" "$ctx/node/bin" "$ctx/node/containerd"
cp -r "$kind_dir/images/base/files/." "$ctx/node/kind/"
# The Dockerfile copies with the modes found here (the legacy builder has no --chmod).
chmod -R u+w,go-w,a+rX "$ctx/node/kind"
chmod 0755 "$ctx/node/kind/usr/local/bin/"* "$ctx/node/kind/kind/bin/"*
cp -r "$here/node/files" "$ctx/node/files"
cp "$k8s_bin/kubelet" "$k8s_bin/kubeadm" "$k8s_bin/kubectl" "$ctx/node/bin/"
cp "$runc_wrapper" "$ctx/node/runc-wrapper"
cp "$containerd_bin/containerd" "$containerd_bin/containerd-shim-runc-v2" "$containerd_bin/ctr" "$ctx/node/containerd/"
quiet_build --build-arg BASE_IMAGE="$base_image" -t "$node_image-rootfs" -f "$here/node/Dockerfile" "$ctx/node"

echo ">> importing ${#wanted[@]} images into the node's containerd"
docker save "${wanted[@]}" -o "$ctx/images.tar"
container=$(docker run -d --privileged --entrypoint sleep -v "$ctx/images.tar:/kind/images.tar:ro" "$node_image-rootfs" infinity)
docker exec -e WANTED="${wanted[*]}" "$container" bash -euo pipefail -c '
  nohup containerd >/var/log/containerd-build.log 2>&1 &
  for _ in $(seq 100); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
  ctr version >/dev/null || { tail /var/log/containerd-build.log >&2; exit 1; }
  ctr -n k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests /kind/images.tar >/dev/null
  # Listed once: piping ctr into grep -q under pipefail fails whenever grep
  # exits before ctr has written its last line (SIGPIPE), a race that reported
  # imported images as missing.
  imported=$(ctr -n k8s.io images ls -q)
  for image in $WANTED; do
    grep -qxF "$image" <<<"$imported" || { echo "error: $image missing after import; imported: $imported" >&2; exit 1; }
  done
  pkill containerd
  while pgrep -x containerd >/dev/null; do sleep 0.2; done'
docker exec "$container" bash -c "echo $version > /kind/version"
docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' "$container" "$node_image" >/dev/null
docker rm -f "$container" >/dev/null && container=""
docker rmi "$node_image-rootfs" >/dev/null
echo ">> built $node_image"
# Earlier node images (other input hashes) are 1.4 GB each; drop those no cluster uses.
docker images "${node_image%:*}" --format '{{.Repository}}:{{.Tag}}' | grep -vxF "$node_image" \
  | xargs -r docker rmi >/dev/null 2>&1 || true
