#!/usr/bin/env bash
# Renders the chart's farm network parts and checks them against what their
# consumers accept:
#   - the RDMA shared device plugin's config.json, with the plugin's own
#     parser and validator (checkconfig, built from its Go module): one NUMA
#     node's and a two-NUMA farm's values give one resource per NUMA node;
#   - the SR-IOV network device plugin's config.json (the plugin cannot be
#     had here): its documented resourceList format, one RDMA VF pool per
#     NUMA node, resource names of the plugin's accepted characters;
#   - the NetworkAttachmentDefinitions: one per NUMA node and namespace, a
#     CNI configuration with cniVersion, type and the network's name, bound
#     to the RDMA resource of its NUMA node;
#   - bad values refused by values.schema.json or the templates, naming the
#     field.
# Usage: hack/check-network-chart.sh HELM CHECKCONFIG
set -euo pipefail
helm=$1 checkconfig=$2
root=$(cd "$(dirname "$0")/.." && pwd)
chart=$root/charts/eventbuilder-operator
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check-network-chart: $*" >&2; exit 1; }

farm=(--set rdmaSharedDevicePlugin.enabled=true
  --set-json 'rdmaSharedDevicePlugin.numaNodes=[{"numa":0,"selectors":{"vendors":["15b3"],"ifNames":["ibp65s0"]}},{"numa":1,"selectors":{"vendors":["15b3"],"ifNames":["ibp193s0"]}}]'
  --set sriovDevicePlugin.config.enabled=true
  --set-json 'sriovDevicePlugin.config.numaNodes=[{"numa":0,"selectors":{"vendors":["15b3"],"pfNames":["ens1f0np0#0-15"]}},{"numa":1,"selectors":{"vendors":["15b3"],"pfNames":["ens2f0np0#0-15"]}}]'
  --set dataNetwork.enabled=true --set 'dataNetwork.namespaces={daq,daq-test}'
  --set-json 'dataNetwork.numaNodes=[{"numa":0,"config":{"cniVersion":"0.3.1","type":"ipoib","master":"ibp65s0","ipam":{"type":"whereabouts","range":"10.56.0.0/17"}}},{"numa":1,"config":{"cniVersion":"0.3.1","type":"ipoib","master":"ibp193s0","ipam":{"type":"whereabouts","range":"10.56.128.0/17"}}}]')

# Splits rendered manifests into files: rdma.json, sriov.json, nads.json.
split() {
  python3 -c '
import json, sys, yaml
out = {"nads": []}
for doc in yaml.safe_load_all(sys.stdin):
    if not doc:
        continue
    name = doc["metadata"]["name"]
    if doc["kind"] == "ConfigMap" and name.endswith("-rdma-devices"):
        open(sys.argv[1] + "/rdma.json", "w").write(doc["data"]["config.json"])
    elif doc["kind"] == "ConfigMap" and "resourceList" in doc["data"].get("config.json", ""):
        open(sys.argv[1] + "/sriov.json", "w").write(doc["data"]["config.json"])
    elif doc["kind"] == "NetworkAttachmentDefinition":
        out["nads"].append(doc)
json.dump(out["nads"], open(sys.argv[1] + "/nads.json", "w"))
' "$work"
}

# 1. One NUMA node's values, then a farm's, through the RDMA plugin's own parser.
"$helm" template eb "$chart" --set rdmaSharedDevicePlugin.enabled=true --set rdmaSharedDevicePlugin.resourceName=ib{numa} \
  --set-json 'rdmaSharedDevicePlugin.numaNodes=[{"numa":3,"selectors":{"linkTypes":["infiniband"]}}]' | split
[ "$("$checkconfig" "$work/rdma.json" | grep /)" = "rdma/ib3" ] ||
  fail "one NUMA node's RDMA config does not give rdma/ib3: $(cat "$work/rdma.json")"
"$helm" template eb "$chart" "${farm[@]}" | split
[ "$("$checkconfig" "$work/rdma.json" | grep /)" = $'rdma/hca_numa0\nrdma/hca_numa1' ] ||
  fail "the farm's RDMA config does not give rdma/hca_numa0 and rdma/hca_numa1: $(cat "$work/rdma.json")"
# The parser refuses what the chart must never render (so the check can fail).
echo '{"configList":[{"resourceName":"hca numa0","selectors":{"vendors":["15b3"]}}]}' >"$work/bad.json"
! "$checkconfig" "$work/bad.json" >/dev/null 2>&1 || fail "checkconfig accepted an invalid resource name"

# 2. SR-IOV and 3. the NetworkAttachmentDefinitions.
python3 - "$work" <<'PY' || fail "SR-IOV config or NetworkAttachmentDefinitions wrong (above)"
import json, re, sys
work = sys.argv[1]
sriov = json.load(open(work + "/sriov.json"))
errors = []
pools = sriov.get("resourceList", [])
if [p.get("resourceName") for p in pools] != ["sriov_rdma_numa0", "sriov_rdma_numa1"]:
    errors.append(f"SR-IOV pools {pools}, want sriov_rdma_numa0 and sriov_rdma_numa1")
for p in pools:
    if not re.fullmatch(r"[a-zA-Z0-9_]+", p["resourceName"]) or p.get("resourcePrefix") != "nvidia.com":
        errors.append(f"SR-IOV pool name {p.get('resourcePrefix')}/{p['resourceName']} not as the plugin accepts")
    if p.get("deviceType") != "netDevice" or p.get("selectors", {}).get("isRdma") is not True or not p["selectors"].get("pfNames"):
        errors.append(f"SR-IOV pool {p['resourceName']}: want netDevice, selectors with isRdma true and pfNames: {p}")
nads = json.load(open(work + "/nads.json"))
got = sorted((n["metadata"]["namespace"], n["metadata"]["name"]) for n in nads)
want = [("daq", "eb-numa0"), ("daq", "eb-numa1"), ("daq-test", "eb-numa0"), ("daq-test", "eb-numa1")]
if got != want:
    errors.append(f"NetworkAttachmentDefinitions {got}, want {want}")
for n in nads:
    name, conf = n["metadata"]["name"], json.loads(n["spec"]["config"])
    numa = name.removeprefix("eb-numa")
    if conf.get("name") != name or not conf.get("cniVersion") or not conf.get("type"):
        errors.append(f"{name}: CNI config {conf} lacks its name, cniVersion or type")
    if n["metadata"]["annotations"].get("k8s.v1.cni.cncf.io/resourceName") != f"rdma/hca_numa{numa}":
        errors.append(f"{name}: bound to {n['metadata']['annotations']}, want rdma/hca_numa{numa}")
for e in errors:
    print(e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY

# 4. Bad values: refused, naming the field.
refused() {  # refused PATTERN helm-args...: helm template fails and says PATTERN
  local want=$1
  shift
  if "$helm" template eb "$chart" "$@" >/dev/null 2>"$work/err"; then fail "accepted: $*"; fi
  grep -q -- "$want" "$work/err" || { cat "$work/err" >&2; fail "the refusal of $* does not name $want"; }
}
refused "/rdmaSharedDevicePlugin/rdmaHcaMax" --set rdmaSharedDevicePlugin.rdmaHcaMax=-1
refused "/rdmaSharedDevicePlugin/numaNodes/0/numa" --set-json 'rdmaSharedDevicePlugin.numaNodes=[{"numa":"zero","selectors":{"vendors":["15b3"]}}]'
refused "/rdmaSharedDevicePlugin/resourceName" --set 'rdmaSharedDevicePlugin.resourceName=hca'
refused "rdmaSharedDevicePlugin.numaNodes\[1\].numa" "${farm[@]}" \
  --set-json 'rdmaSharedDevicePlugin.numaNodes=[{"numa":0,"selectors":{"vendors":["15b3"]}},{"numa":0,"selectors":{"ifNames":["ib1"]}}]'
refused "rdmaSharedDevicePlugin.numaNodes is empty" --set rdmaSharedDevicePlugin.enabled=true
refused "/sriovDevicePlugin/config/numaNodes/0/selectors/isRdma" \
  --set-json 'sriovDevicePlugin.config.numaNodes=[{"numa":0,"selectors":{"vendors":["15b3"],"isRdma":false}}]'
refused "/dataNetwork/numaNodes/0/config" --set-json 'dataNetwork.numaNodes=[{"numa":0,"config":{"type":"ipoib"}}]'
refused "/networkPolicy/enabled" --set networkPolicy.enabled=maybe
refused "/builderPollInterval" --set builderPollInterval=often
refused "additional properties 'rdmaSharedDevicePlugins'" --set rdmaSharedDevicePlugins.enabled=true
echo "network chart: the RDMA plugin's parser accepts the rendered configs (rdma/hca_numa0, rdma/hca_numa1), SR-IOV pools and networks per NUMA node as their formats ask, 10 bad values refused naming the field"
