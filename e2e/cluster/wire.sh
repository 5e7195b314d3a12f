#!/usr/bin/env bash
# Wires the test cluster's pod network on the given nodes (what kindnetd
# does): a ptp + host-local CNI configuration for each node's podCIDR, IP
# forwarding, and a route to every other node's podCIDR through that node.
# Idempotent: up.sh runs it on a new cluster, the e2e suite again on a node
# it restarted (a restarted node container loses its routes and sysctls).
# Usage: wire.sh <kubeconfig> <node>...
set -euo pipefail
kubeconfig=$1
shift
kubectl="kubectl --kubeconfig $kubeconfig"
all=$($kubectl get nodes -o jsonpath='{.items[*].metadata.name}')
for node in "$@"; do
  cidr=$($kubectl get node "$node" -o jsonpath='{.spec.podCIDR}')
  docker exec -i "$node" sh -c 'cat > /etc/cni/net.d/10-podnet.conflist' <<JSON
{
  "cniVersion": "0.4.0",
  "name": "podnet",
  "plugins": [
    {"type": "ptp", "ipMasq": false, "mtu": 1500,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  docker exec "$node" sysctl -qw net.ipv4.ip_forward=1
  for peer in $all; do
    [ "$peer" != "$node" ] || continue
    peer_cidr=$($kubectl get node "$peer" -o jsonpath='{.spec.podCIDR}')
    peer_ip=$($kubectl get node "$peer" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
    docker exec "$node" ip route replace "$peer_cidr" via "$peer_ip"
  done
done
