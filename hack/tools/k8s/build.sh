#!/usr/bin/env bash
# Builds the Kubernetes server binaries and etcd pinned by go.mod into $1, stamped
# with the real version so kubeadm, kind and skew checks see it.
set -euo pipefail
out=$1
cd "$(dirname "$0")"
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=${version#v1.}; minor=${minor%%.*}
stamp="-X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
stamp="$stamp ${stamp//k8s.io\/component-base\/version/k8s.io/client-go/pkg/version}"
mkdir -p "$out"
for cmd in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl; do
  echo ">> building $cmd $version"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $stamp" -o "$out/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd"
  mv "$out/$cmd.tmp" "$out/$cmd"
done
echo ">> building etcd"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" ./etcd
mv "$out/etcd.tmp" "$out/etcd"
