#!/usr/bin/env bash
# The operator on a farm's control plane at full size (make bench-farm), or
# its smoke version (make test-farm: -servers 20 -check): kube-apiserver,
# etcd, kube-scheduler and kube-controller-manager from KUBEBUILDER_ASSETS,
# KWOK's controller simulating the servers, the operator's own binary run
# as the chart deploys it. Prints BENCH lines on stdout; see
# hack/farm/main.go for what it does and each figure.
# Usage: KUBEBUILDER_ASSETS=<dir> KWOK=<kwok binary> HELM=<helm binary> hack/farm.sh [flags of hack/farm]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)   # operator/
: "${KUBEBUILDER_ASSETS:?set KUBEBUILDER_ASSETS to the directory holding the Kubernetes binaries}"
: "${KWOK:?set KWOK to the kwok controller binary}"
: "${HELM:?set HELM to the helm binary}"
bin=$(mktemp -d "${TMPDIR:-/tmp}/eventbuilder-farm-bin.XXXXXX")
trap 'rm -rf "$bin"' EXIT
cd "$here"
go build -o "$bin/manager" ./cmd
go build -o "$bin/farm" ./hack/farm
"$bin/farm" -assets "$KUBEBUILDER_ASSETS" -kwok "$KWOK" -helm "$HELM" -operator "$bin/manager" \
  -chart "$here/../charts/eventbuilder-operator" -crds "$here/../config/crd/bases" "$@"
