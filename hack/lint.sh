#!/usr/bin/env bash
# make lint: what a reviewer would otherwise check by eye. Fails naming each
# finding and the command that fixes it:
#   - gofmt over every Go module (operator, e2e, hack/runc-wrapper);
#   - go vet over the same;
#   - the CRDs, RBAC role and deepcopy code regenerated from the API types
#     (into a scratch copy, so the tree is not touched) equal the committed
#     ones, and so do the chart's copies of them;
#   - helm lint --strict of the chart.
# No C++ formatter runs: the builder has no clang-format style yet (noted in
# issue 35).
# Usage: hack/lint.sh CONTROLLER_GEN HELM
set -euo pipefail
controller_gen=${1:?usage: hack/lint.sh CONTROLLER_GEN HELM}
helm=${2:?usage: hack/lint.sh CONTROLLER_GEN HELM}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
modules=(operator e2e hack/runc-wrapper)
failed=0
finding() { echo "lint: $*" >&2; failed=1; }

if unformatted=$(gofmt -l "${modules[@]}") && [ -n "$unformatted" ]; then
  finding "gofmt would change these files; run: gofmt -w $(echo $unformatted)"
fi
for module in "${modules[@]}"; do
  (cd "$module" && go vet ./...) || finding "go vet reports the problems above in $module/"
done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/charts"
cp -r operator config "$scratch/"
cp -r charts/eventbuilder-operator "$scratch/charts/"
CONTROLLER_GEN=$(realpath "$controller_gen") "$scratch/operator/hack/generate.sh" all
for generated in config/crd/bases config/rbac charts/eventbuilder-operator/crds \
  charts/eventbuilder-operator/files/manager-role.yaml operator/api/v1alpha1/zz_generated.deepcopy.go; do
  diff -r "$generated" "$scratch/$generated" >/dev/null ||
    finding "$generated differs from what the API types generate; run: make manifests (and commit the result)"
done

"$helm" lint --strict --quiet charts/eventbuilder-operator >/dev/null || finding "helm lint --strict charts/eventbuilder-operator fails"

if ((failed)); then
  echo "FAIL: lint" >&2
  exit 1
fi
echo ">> lint: gofmt, go vet, generated code and helm lint clean"
