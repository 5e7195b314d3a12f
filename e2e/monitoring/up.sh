#!/usr/bin/env bash
# Installs the monitoring stack of the kind tests and `make demo`: the
# Prometheus Operator with its CRDs, and one Prometheus that takes the
# chart's PodMonitor, ServiceMonitor and PrometheusRule (install the chart
# with -f e2e/monitoring/chart-values.yaml). Safe to run again on a cluster
# that has it. Waits until the Prometheus is Available.
# Usage: up.sh <cluster> <kind> <kubeconfig> <prometheus-operator dir: binaries and crds/>
#              <operator image> <config reloader image> <prometheus image> <prometheus version>
set -euo pipefail
cluster=$1 kind=$2 kubeconfig=$3 operator_dir=$4 operator_image=$5 reloader_image=$6 prometheus_image=$7 prometheus_version=$8
here=$(cd "$(dirname "$0")" && pwd)
kubectl="kubectl --kubeconfig $kubeconfig"
# The chart's release is eventbuilder-operator in the tests and the demo.
metrics_reader_role=eventbuilder-operator-metrics-reader

render() {
  sed -e "s|\${PROMETHEUS_OPERATOR_IMAGE}|$operator_image|g" -e "s|\${PROMETHEUS_CONFIG_RELOADER_IMAGE}|$reloader_image|g" \
      -e "s|\${PROMETHEUS_IMAGE}|$prometheus_image|g" -e "s|\${PROMETHEUS_VERSION}|$prometheus_version|g" \
      -e "s|\${METRICS_READER_ROLE}|$metrics_reader_role|g" "$here/$1"
}
failed() {
  echo "error: $1" >&2
  $kubectl -n monitoring get pods -o wide >&2 || true
  $kubectl -n monitoring logs deploy/prometheus-operator --tail=30 >&2 || true
  $kubectl -n monitoring describe prometheus eventbuilder >&2 || true
  exit 1
}

echo ">> monitoring: loading the Prometheus Operator and Prometheus images"
# kind load names each node it copies an image to: shown only when it fails.
if ! out=$("$kind" load docker-image --name "$cluster" "$operator_image" "$reloader_image" "$prometheus_image" 2>&1); then
  echo "$out" >&2
  exit 1
fi
# The CRDs are too large for client-side apply's annotation.
$kubectl apply --server-side --force-conflicts -f "$operator_dir/crds/" >/dev/null
# kubectl wait fails at once on a CRD the API server has not given a status yet.
crds=(crd/prometheuses.monitoring.coreos.com crd/podmonitors.monitoring.coreos.com
      crd/servicemonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com)
for _ in $(seq 30); do
  $kubectl wait --for=condition=Established --timeout=60s "${crds[@]}" >/dev/null 2>&1 && break
  sleep 1
done
$kubectl wait --for=condition=Established --timeout=1s "${crds[@]}" >/dev/null || failed "the Prometheus Operator's CRDs are not Established"
render prometheus-operator.yaml | $kubectl apply -f - >/dev/null
$kubectl -n monitoring rollout status deploy/prometheus-operator --timeout=3m >/dev/null \
  || failed "the Prometheus Operator did not become ready"
render prometheus.yaml | $kubectl apply -f - >/dev/null
$kubectl -n monitoring wait --for=condition=Available prometheus/eventbuilder --timeout=3m >/dev/null \
  || failed "the Prometheus did not become Available"
echo ">> monitoring: Prometheus $prometheus_version up (service monitoring/prometheus-operated, port 9090)"
