#!/usr/bin/env bash
# Creates (or reuses) a kind cluster on the local node image and installs its
# pod network (podnet.yaml: flannel, host-gw, over the node image's ptp and
# host-local CNI plugins; kindnetd cannot be had offline) and its data
# network: a second Docker network every node is connected to, which pods
# join through the NPWG annotations (podnet.yaml).
# Usage: up.sh <cluster name> <node image> <kind binary> <kubeconfig out> <podnet image (flannel and netpol)>
set -euo pipefail
name=$1 node_image=$2 kind=$3 kubeconfig=$4 podnet_image=$5
# The data network: nodes take addresses from the first /24 (Docker's
# --ip-range), pods from the rest (a NetworkAttachmentDefinition's
# whereabouts range; e2e/data_network_test.go).
data_network=$name-data data_subnet=10.200.0.0/16 data_node_range=10.200.0.0/24
here=$(cd "$(dirname "$0")" && pwd)
kubectl="kubectl --kubeconfig $kubeconfig"

# kind-config.yaml, plus kubelet settings this host and node image need: cgroup v1
# hosts must allow v1 (kubelet 1.35 refuses it otherwise), and the offline node
# image's containerd uses cgroupfs, not systemd, as its cgroup driver. The
# kubelets run as a farm's do: the static CPU manager (Guaranteed pods with
# whole CPUs get CPUs of their own; 100m kube-reserved keeps one CPU in the
# shared pool without taking a whole one from allocatable) and the Topology
# Manager aligning CPUs and devices on one NUMA node.
cluster_config() {
  cat "$here/kind-config.yaml"
  local kubelet=("cpuManagerPolicy: static" "kubeReserved:" "  cpu: 100m" "topologyManagerPolicy: single-numa-node")
  [ -f /sys/fs/cgroup/cgroup.controllers ] || kubelet+=("failCgroupV1: false")
  case "$node_image" in kindest/node:*) ;; *) kubelet+=("cgroupDriver: cgroupfs") ;; esac
  printf 'kubeadmConfigPatches:\n  - |\n    kind: KubeletConfiguration\n'
  printf '    %s\n' "${kubelet[@]}"
}

# A cluster is reused only when it runs the wanted image and every node is up and Ready.
# Cluster names are captured before grep -q: a pipe into grep -q fails under
# pipefail when grep exits before kind has written (SIGPIPE).
cluster_exists() { local clusters; clusters=$("$kind" get clusters 2>/dev/null) || return 1; grep -qx "$name" <<<"$clusters"; }

reusable() {
  cluster_exists || return 1
  [ "$(docker inspect -f '{{.Config.Image}}' "$name-control-plane" 2>/dev/null)" = "$node_image" ] || return 1
  # One made before the kubelets ran the static CPU manager is not.
  docker exec "$name-control-plane" grep -q '^cpuManagerPolicy: static' /var/lib/kubelet/config.yaml 2>/dev/null || return 1
  local node
  for node in $("$kind" get nodes --name "$name"); do
    [ "$(docker inspect -f '{{.State.Running}}' "$node")" = true ] || return 1
  done
  "$kind" get kubeconfig --name "$name" >"$kubeconfig" 2>/dev/null || return 1
  $kubectl wait --for=condition=Ready node --all --timeout=60s >/dev/null 2>&1
}

if reusable; then
  echo ">> reusing running cluster $name"
else
  if cluster_exists; then
    echo ">> deleting stale cluster $name"
    "$kind" delete cluster --name "$name"
  fi
  echo ">> creating cluster $name (image $node_image)"
  "$kind" create cluster --name "$name" --image "$node_image" --config <(cluster_config) \
    --kubeconfig "$kubeconfig" --wait 0s
fi

echo ">> data network: Docker network $data_network ($data_subnet) on every node"
if ! docker network inspect "$data_network" >/dev/null 2>&1; then
  docker network create --driver bridge --subnet "$data_subnet" --ip-range "$data_node_range" "$data_network" >/dev/null
fi
for node in $("$kind" get nodes --name "$name"); do
  if [ "$(docker inspect -f "{{with index .NetworkSettings.Networks \"$data_network\"}}yes{{end}}" "$node")" != yes ]; then
    docker network connect "$data_network" "$node"
  fi
done

echo ">> pod network: flannel (host-gw) and netpol (NetworkPolicy ingress rules), NPWG emulation, macvlan, whereabouts"
# kind load names each node it copies the image to: shown only when it fails.
if ! out=$("$kind" load docker-image --name "$name" "$podnet_image" 2>&1); then
  echo "$out" >&2
  exit 1
fi
# The CRDs of the data network's plugins (NetworkAttachmentDefinition: the
# NPWG's, as emulated for the operator's tests; whereabouts' pools), from
# the image.
docker run --rm --entrypoint bash "$podnet_image" -c 'for f in /opt/podnet/crds/*.yaml; do echo ---; cat "$f"; done' |
  $kubectl apply -f - >/dev/null
sed -e "s|\${PODNET_IMAGE}|$podnet_image|" -e "s|\${DATA_SUBNET}|$data_subnet|" "$here/podnet.yaml" | $kubectl apply -f - >/dev/null
echo ">> waiting for nodes and CoreDNS"
if ! $kubectl wait --for=condition=Ready node --all --timeout=180s >/dev/null ||
   ! $kubectl -n kube-system rollout status daemonset/podnet --timeout=180s >/dev/null ||
   ! $kubectl -n kube-system rollout status deployment/coredns --timeout=180s >/dev/null; then
  echo "error: cluster $name did not become ready:" >&2
  $kubectl get nodes -o wide >&2
  $kubectl -n kube-system get pods -o wide >&2
  exit 1
fi
echo ">> cluster $name ready (kubeconfig $kubeconfig)"
