#!/usr/bin/env bash
# The RDMA shared device plugin (built from its Go module) run as the chart's
# DaemonSet runs it, on the config.json the chart renders for two NUMA nodes,
# registering its resources through the kubelet's plugin watcher. The kubelet
# side is kubelet-registrar (hack/tools/rdma-shared-dp/kubelet-registrar), an
# emulation of that part of the kubelet: no kubelet runs here. The plugin
# needs the kernel's RDMA subsystem (it checks its network namespace mode at
# start), which the Soft-RoCE VM's kernel has and kind's nodes, on this
# host's kernel, lack: so this runs where hack/verbs-vm/run.sh runs its
# command, as root. On Soft-RoCE the plugin finds no device for either
# resource (it looks for PCI NICs; rxe0 sits on a veth) and registers them
# with 0 devices; on a real HCA, NUMA node 0's resource lists rdmaHcaMax.
# Usage: rdma-device-plugin.sh HELM PLUGIN REGISTRAR
set -euo pipefail
[ $# = 3 ] || { echo "usage: $0 HELM PLUGIN REGISTRAR" >&2; exit 2; }
helm=$1 plugin=$2 registrar=$3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "rdma-device-plugin: $*" >&2; exit 1; }

# NUMA node 0's resource selects the verbs device's netdev; node 1's a vendor
# with no NIC here.
netdev=$(cat "/sys/class/infiniband/${EB_RDMA_DEVICE:?run me through hack/verbs-vm/run.sh}/ports/1/gid_attrs/ndevs/0" 2>/dev/null ||
  ls "/sys/class/infiniband/$EB_RDMA_DEVICE/device/net" 2>/dev/null | head -n 1)
[ -n "$netdev" ] || fail "no netdev found for $EB_RDMA_DEVICE"
"$helm" template eb "$root/charts/eventbuilder-operator" --set rdmaSharedDevicePlugin.enabled=true \
  --set-json "rdmaSharedDevicePlugin.numaNodes=[{\"numa\":0,\"selectors\":{\"ifNames\":[\"$netdev\"]}},{\"numa\":1,\"selectors\":{\"vendors\":[\"15b3\"],\"deviceIDs\":[\"ffff\"]}}]" \
  --show-only templates/rdma-shared-device-plugin.yaml >"$work/rendered.yaml"
# The config the ConfigMap holds, and the DaemonSet's command, checked to
# read it where the ConfigMap is mounted.
python3 - "$work" <<'PY'
import sys, yaml
work = sys.argv[1]
docs = {d["kind"]: d for d in yaml.safe_load_all(open(work + "/rendered.yaml")) if d}
open(work + "/config.json", "w").write(docs["ConfigMap"]["data"]["config.json"])
pod = docs["DaemonSet"]["spec"]["template"]["spec"]
container = pod["containers"][0]
mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
config_volume = next(v["name"] for v in pod["volumes"] if v.get("configMap", {}).get("name") == docs["ConfigMap"]["metadata"]["name"])
want = "--config-file=" + mounts[config_volume] + "/config.json"
if container["command"] != ["k8s-rdma-shared-dp"] or container["args"] != [want]:
    sys.exit("the DaemonSet runs %s %s, want k8s-rdma-shared-dp %s" % (container["command"], container["args"], want))
if "/var/lib/kubelet/plugins_registry" not in mounts.values():
    sys.exit("the DaemonSet does not mount the kubelet's plugins_registry: the plugin would not be found by the plugin watcher")
PY
echo ">> rdma-device-plugin: the chart's config for NUMA nodes 0 ($netdev) and 1: $(cat "$work/config.json")"

# The kubelet's directories, on a tmpfs in a mount namespace of our own (the
# VM's root is the host's, read-only), as the DaemonSet mounts them.
unshare --mount --propagation private bash -s "$plugin" "$registrar" "$work" <<'SH'
set -euo pipefail
plugin=$1 registrar=$2 work=$3
mount -t tmpfs tmpfs /var/lib
mkdir -p /var/lib/kubelet/device-plugins /var/lib/kubelet/plugins_registry
"$plugin" --config-file="$work/config.json" >"$work/plugin.log" 2>&1 </dev/null &
pid=$!
"$registrar" --want rdma/hca_numa0,rdma/hca_numa1 --timeout 60s </dev/null &
registrar_pid=$!
# Whichever ends first: the registrar (its verdict), or the plugin (a failure).
rc=0
wait -n "$pid" "$registrar_pid" || rc=$?
if kill -0 "$registrar_pid" 2>/dev/null; then
  echo "rdma-device-plugin: the plugin exited (status $rc) before registering" >&2
  rc=1
  kill "$registrar_pid"
fi
kill "$pid" 2>/dev/null || true
wait 2>/dev/null || true
if [ "$rc" != 0 ]; then
  echo "rdma-device-plugin: the plugin's log:" >&2
  cat "$work/plugin.log" >&2
fi
exit "$rc"
SH
echo ">> rdma-device-plugin: the RDMA shared device plugin registered rdma/hca_numa0 and rdma/hca_numa1"
