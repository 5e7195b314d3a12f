#!/usr/bin/env bash
# Builds a kind node image offline: the node filesystem (Debian + systemd +
# containerd + kind's entrypoint and kubelet units + the Kubernetes binaries), and
# inside its containerd every image kubeadm will ask for, each built locally from
# the same binaries. Skips when the image already exists (its tag carries a hash
# of everything that goes into it).
# Usage: build-node-image.sh <node image> <base image> <k8s bin dir> <coredns binary> <kind module dir> <runc-wrapper>
set -euo pipefail
node_image=$1 base_image=$2 k8s_bin=$3 coredns_bin=$4 kind_dir=$5 runc_wrapper=$6
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
mapfile -t wanted < <("$k8s_bin/kubeadm" config images list --kubernetes-version "$version" 2>/dev/null)
image_for() { printf '%s\n' "${wanted[@]}" | grep -E "/$1:" ; }
check_version() { # component, the version we built, the tag kubeadm wants
  case "$3" in "$2"|"$2"-*) ;; *) echo "error: kubeadm $version wants $1 $3 but $2 was built; pin $1 to ${3%%-*}" >&2; exit 1;; esac
}

build_component() { # image tag, binary path, extra packages
  local dir="$ctx/$(basename "$2")"
  mkdir -p "$dir" && cp "$2" "$dir/"
  echo ">> image $1"
  docker build -q -f "$here/images/component.Dockerfile" --build-arg BASE_IMAGE="$base_image" \
    --build-arg BINARY="$(basename "$2")" --build-arg PACKAGES="${3:-}" -t "$1" "$dir" >/dev/null
}
for component in kube-apiserver kube-controller-manager kube-scheduler; do
  build_component "$(image_for "$component")" "$k8s_bin/$component"
done
build_component "$(image_for kube-proxy)" "$k8s_bin/kube-proxy" "iptables nftables conntrack ipset"
etcd_image=$(image_for etcd)
check_version etcd "$("$k8s_bin/etcd" --version | awk '/etcd Version/ {print $3}')" "${etcd_image##*:}"
build_component "$etcd_image" "$k8s_bin/etcd"

coredns_image=$(image_for coredns)
check_version coredns "v$("$coredns_bin" -version | awk -F'[ -]' '/CoreDNS/ {print $2}')" "${coredns_image##*:}"
mkdir -p "$ctx/coredns" && cp "$coredns_bin" "$ctx/coredns/coredns"
echo ">> image $coredns_image"
docker build -q --build-arg BASE_IMAGE="$base_image" -t "$coredns_image" -f "$here/images/coredns/Dockerfile" "$ctx/coredns" >/dev/null

pause_image=$(image_for pause)
mkdir -p "$ctx/pause"
gcc -static -O2 -o "$ctx/pause/pause" "$here/images/pause/pause.c"
echo ">> image $pause_image"
docker build -q -t "$pause_image" -f "$here/images/pause/Dockerfile" "$ctx/pause" >/dev/null

echo ">> node filesystem"
mkdir -p "$ctx/node/kind" "$ctx/node/bin"
cp -r "$kind_dir/images/base/files/." "$ctx/node/kind/"
chmod -R u+w "$ctx/node/kind"
cp -r "$here/node/files" "$ctx/node/files"
cp "$k8s_bin/kubelet" "$k8s_bin/kubeadm" "$k8s_bin/kubectl" "$ctx/node/bin/"
cp "$runc_wrapper" "$ctx/node/runc-wrapper"
docker build -q --build-arg BASE_IMAGE="$base_image" -t "$node_image-rootfs" -f "$here/node/Dockerfile" "$ctx/node" >/dev/null

echo ">> importing ${#wanted[@]} images into the node's containerd"
docker save "${wanted[@]}" -o "$ctx/images.tar"
container=$(docker run -d --privileged --entrypoint sleep -v "$ctx/images.tar:/kind/images.tar:ro" "$node_image-rootfs" infinity)
docker exec "$container" bash -c 'nohup containerd >/var/log/containerd-build.log 2>&1 &
  for _ in $(seq 50); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
  ctr -n k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests /kind/images.tar >/dev/null
  pkill containerd; while pgrep -x containerd >/dev/null; do sleep 0.2; done'
docker exec "$container" bash -c "echo $version > /kind/version"
docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' "$container" "$node_image" >/dev/null
docker rmi "$node_image-rootfs" >/dev/null
echo ">> built $node_image"
