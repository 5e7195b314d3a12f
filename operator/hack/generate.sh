#!/usr/bin/env bash
# Regenerates the operator's deepcopy code, CRD and RBAC role with controller-gen.
# Usage: hack/generate.sh [generate|manifests|all]   (default: all)
# CONTROLLER_GEN overrides the controller-gen binary (default: the repo's bin/).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)   # operator/
root=$(cd "$here/.." && pwd)
cg=${CONTROLLER_GEN:-$root/bin/controller-gen-v0.20.1/controller-gen}
what=${1:-all}
case $what in generate | manifests | all) ;; *) echo "usage: $0 [generate|manifests|all]" >&2; exit 2 ;; esac
cd "$here"

if [[ $what == generate || $what == all ]]; then
	"$cg" object paths=./api/...
fi

if [[ $what == manifests || $what == all ]]; then
	"$cg" rbac:roleName=manager-role crd paths=./... \
		output:crd:artifacts:config="$root/config/crd/bases" \
		output:rbac:artifacts:config="$root/config/rbac"
	# The chart ships identical copies: Helm installs CRDs from crds/, and its
	# ClusterRole takes the manager's rules from files/manager-role.yaml.
	chart=$root/charts/eventbuilder-operator
	mkdir -p "$chart/crds" "$chart/files"
	cp "$root"/config/crd/bases/eventbuilder.daq.io_*.yaml "$chart/crds/"
	cp "$root/config/rbac/role.yaml" "$chart/files/manager-role.yaml"
fi
