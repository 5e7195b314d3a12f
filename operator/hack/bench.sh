#!/usr/bin/env bash
# The operator's scale benchmark (make bench-operator): a 326-unit run with
# 4 warm spare servers on the LHCb fabric, against a real kube-apiserver and
# etcd (envtest) with simulated nodes. Prints BENCH lines on stdout; see
# hack/bench/main.go for what each figure measures.
# Usage: KUBEBUILDER_ASSETS=<dir with kube-apiserver and etcd> hack/bench.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)   # operator/
: "${KUBEBUILDER_ASSETS:?set KUBEBUILDER_ASSETS to the directory holding kube-apiserver and etcd}"
export KUBEBUILDER_ASSETS
cd "$here"
go build -o "${TMPDIR:-/tmp}/eventbuilder-operator-bench" ./hack/bench
exec "${TMPDIR:-/tmp}/eventbuilder-operator-bench" -crds "$here/../config/crd/bases" "$@"
