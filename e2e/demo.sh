#!/usr/bin/env bash
# `make demo`: a kind cluster with a Prometheus (the Prometheus Operator's) and the
# operator installed, and the sample run of 4 units building events; prints the
# measured rates and where to look, Prometheus included. The cluster stays up
# (delete it with: kind delete cluster --name <name>; docker network rm <name>-data).
# Usage: demo.sh <cluster> <node image> <kind> <helm> <operator image> <builder image> <podnet image>
#                <prometheus-operator dir> <prometheus-operator image> <config reloader image>
#                <prometheus image> <prometheus version>
set -euo pipefail
name=$1 node_image=$2 kind=$3 helm=$4 operator_image=$5 builder_image=$6 podnet_image=$7
monitoring=("${@:8:5}")
root=$(cd "$(dirname "$0")/.." && pwd)
kubeconfig=$root/build/$name.kubeconfig
# The pinned kubectl (make puts bin/k8s-*/ first on PATH): printed by its
# path, since a fresh machine has no other.
kubectl_path=$(command -v kubectl) || { echo "error: no kubectl on PATH (make demo puts the pinned one there)" >&2; exit 1; }
kubectl="$kubectl_path --kubeconfig $kubeconfig"
plugin=$root/build/operator/kubectl-eventbuilder  # make build-operator
mkdir -p "$root/build"
steps=()
step_started=$SECONDS
# step_done NAME: notes how long the step since the last one took.
step_done() { steps+=("$(printf '%-34s %4d s' "$1" $((SECONDS - step_started)))"); step_started=$SECONDS; }

"$root/e2e/cluster/up.sh" "$name" "$node_image" "$kind" "$kubeconfig" "$podnet_image"
step_done "kind cluster up"
echo ">> loading images"
"$kind" load docker-image --name "$name" "$operator_image" "$builder_image" >/dev/null
step_done "images loaded"
echo ">> installing the chart"
# helm upgrade leaves CRDs alone, so a reused cluster gets the chart's current ones here.
$kubectl apply --server-side --force-conflicts -f "$root/charts/eventbuilder-operator/crds/" >/dev/null
operator_failed() {
  echo "error: the operator did not become ready:" >&2
  $kubectl -n eventbuilder-system get pods -o wide >&2
  $kubectl -n eventbuilder-system logs deploy/eventbuilder-operator --tail=50 >&2 || true
  exit 1
}
# Events first: the chart without its monitoring objects (their CRDs come with
# the Prometheus Operator, brought up once the sample builds), console on.
chart=(upgrade --install eventbuilder-operator "$root/charts/eventbuilder-operator" --kubeconfig "$kubeconfig"
  --namespace eventbuilder-system --create-namespace
  --set image.repository="${operator_image%:*}" --set image.tag="${operator_image##*:}" --set console.enabled=true)
"$helm" "${chart[@]}" --wait --timeout 3m >/dev/null || operator_failed
# The image tag does not change between builds: restart so a reloaded image runs.
$kubectl -n eventbuilder-system rollout restart deployment/eventbuilder-operator >/dev/null
$kubectl -n eventbuilder-system rollout status deployment/eventbuilder-operator --timeout=3m >/dev/null || operator_failed
step_done "operator installed"
# Builder pods keep the old binary across image reloads unless the run is recreated.
$kubectl delete eventbuilderrun sample --ignore-not-found --wait >/dev/null
sed "s|image: .*|image: $builder_image|" "$root/config/samples/eventbuilder_v1alpha1_eventbuilderrun.yaml" \
  | $kubectl apply -f - >/dev/null
echo ">> waiting for the sample run to build events"
deadline=$((SECONDS + 300))
until [ "$($kubectl get eventbuilderrun sample -o jsonpath='{.status.phase}')" = Running ]; do
  if ((SECONDS > deadline)); then
    echo "error: the sample run is not Running after 5 min:" >&2
    $kubectl describe eventbuilderrun sample >&2
    $kubectl get pods -o wide >&2
    exit 1
  fi
  sleep 2
done
step_done "sample run Running"
status() { $kubectl get eventbuilderrun sample -o jsonpath='{.status.eventsBuilt} {.status.bytesBuilt}{"\n"}'; }
sample=$(status); t0=$(date +%s.%N)
read -r events0 bytes0 <<<"$sample"
sleep 10 # the measurement window
sample=$(status); t1=$(date +%s.%N)
read -r events1 bytes1 <<<"$sample"
awk -v e="$((events1 - events0))" -v b="$((bytes1 - bytes0))" -v t0="$t0" -v t1="$t1" 'BEGIN {
  dt = t1 - t0
  printf ">> measured over %.1f s: %.0f events/s, %.3f Gb/s (4 units, TCP, one machine)\n", dt, e / dt, 8 * b / dt / 1e9 }'
step_done "rate measured"
echo ">> kubectl eventbuilder status sample"
"$plugin" status sample --kubeconfig "$kubeconfig"
events_after=$SECONDS
"$root/e2e/monitoring/up.sh" "$name" "$kind" "$kubeconfig" "${monitoring[@]}"
echo ">> adding the chart's monitoring objects; the console draws rates from Prometheus"
"$helm" "${chart[@]}" -f "$root/e2e/monitoring/chart-values.yaml" \
  --set console.prometheusURL=http://prometheus-operated.monitoring:9090 --wait --timeout 3m >/dev/null || operator_failed
step_done "Prometheus up, scraping"
# The console's reader: a service account bound to the chart's console-viewer role.
$kubectl -n eventbuilder-system create serviceaccount shift-crew --dry-run=client -o yaml | $kubectl apply -f - >/dev/null
$kubectl create clusterrolebinding shift-crew-console --clusterrole=eventbuilder-operator-console-viewer \
  --serviceaccount=eventbuilder-system:shift-crew --dry-run=client -o yaml | $kubectl apply -f - >/dev/null
echo ">> events flowed ${events_after} s after the start; the steps took:"
printf '   %s\n' "${steps[@]}"
cat <<TXT

The cluster '$name' stays up. Look at it with (kubectl is the pinned one,
$kubectl_path; the shift crew's plugin is $plugin, which kubectl runs as
\`kubectl eventbuilder\` once its folder is on PATH):
  export KUBECONFIG=$kubeconfig PATH=$(dirname "$kubectl_path"):$(dirname "$plugin"):\$PATH
  kubectl eventbuilder status sample         # the run in words
  kubectl eventbuilder ranks sample          # ranks, nodes, states
  kubectl eventbuilder why sample            # what holds it back, if anything
  kubectl get eventbuilderruns -A            # phase, units, events, rate, Gb/s
  kubectl get pods -o wide -l app.kubernetes.io/name=eventbuilder
  kubectl describe eventbuilderrun sample    # conditions and events
  kubectl logs sample-eb-0                   # one builder's progress
  kubectl -n eventbuilder-system logs deploy/eventbuilder-operator
The shift crew's console (a page per run: the fabric, ranks, event rate,
failovers; it reloads itself), over HTTPS with a bearer token of the
shift-crew service account, which the demo bound to the console-viewer role:
  kubectl -n eventbuilder-system port-forward deploy/eventbuilder-operator 8444 &
  kubectl -n eventbuilder-system create token shift-crew   # the token
  # then open https://localhost:8444/console/ in a browser sending the header
  # "Authorization: Bearer <token>" (the certificate is the operator's own), or:
  curl -sk -H "Authorization: Bearer \$(kubectl -n eventbuilder-system create token shift-crew)" https://localhost:8444/console/runs/default/sample
Prometheus scrapes every builder and the operator, and evaluates the chart's alerts.
Reach its API (its web UI is not built here: the UI's assets come from npm, not
from Prometheus's Go module) and paste a query:
  kubectl -n monitoring port-forward svc/prometheus-operated 9090 &
  promtool query instant http://localhost:9090 'sum by (eventbuilder_daq_io_run) (rate(eb_events_built_total[1m]))'
  curl -s http://localhost:9090/api/v1/alerts   # kubectl delete pod sample-eb-1 --grace-period=0 fires EventBuilderPeerLost
Remove it with: $kind delete cluster --name $name; docker network rm $name-data
TXT
