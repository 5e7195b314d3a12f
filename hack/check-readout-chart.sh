#!/usr/bin/env bash
# Renders the chart's readout-card device plugin and checks the card
# configuration it renders with the plugin's own parser
# (readout-device-plugin --check-config): the test cluster's values are
# accepted, a card without its /dev node is refused naming the field.
# Usage: hack/check-readout-chart.sh HELM PLUGIN_BINARY
set -euo pipefail
helm=$1 plugin=$2
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rendered_config() {  # helm args... -> the ConfigMap's config.json on stdout
  "$helm" template eb "$root/charts/eventbuilder-operator" --show-only templates/readout-device-plugin.yaml "$@" |
    python3 -c 'import sys, yaml
for doc in yaml.safe_load_all(sys.stdin):
    if doc and doc["kind"] == "ConfigMap": sys.stdout.write(doc["data"]["config.json"])'
}

rendered_config -f "$root/e2e/readout/chart-values.yaml" >"$work/good.json"
"$plugin" --check-config --config "$work/good.json"

rendered_config --set readoutDevicePlugin.enabled=true \
  --set-json 'readoutDevicePlugin.config.nodes={"eb0":{"cards":[{"name":"tell40-0","numa":0,"streams":["velo0"]}]}}' >"$work/bad.json"
if "$plugin" --check-config --config "$work/bad.json" 2>"$work/err"; then
  echo "check-readout-chart: a card without its device node was accepted" >&2
  exit 1
fi
grep -q 'nodes\[eb0\].cards\[0\].device' "$work/err" || { cat "$work/err" >&2; echo "check-readout-chart: the refusal does not name the field" >&2; exit 1; }
# A node-local file instead of the ConfigMap: mounted from the host, no ConfigMap.
"$helm" template eb "$root/charts/eventbuilder-operator" --show-only templates/readout-device-plugin.yaml \
  --set readoutDevicePlugin.enabled=true --set readoutDevicePlugin.hostConfig=/etc/eventbuilder/readout-cards.json >"$work/host.yaml"
grep -q -- '--config=/etc/eventbuilder/readout-cards/readout-cards.json' "$work/host.yaml" && ! grep -q 'kind: ConfigMap' "$work/host.yaml" ||
  { echo "check-readout-chart: hostConfig does not render a host-mounted configuration" >&2; exit 1; }
echo "readout device plugin chart: rendered configuration accepted, a bad one refused naming the field, a node-local one mounted"
