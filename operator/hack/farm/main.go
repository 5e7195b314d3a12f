// Command farm is make bench-farm: the operator as the chart deploys it,
// driving a run on a farm's control plane at full size. kube-apiserver,
// etcd, kube-scheduler and kube-controller-manager are the binaries make
// builds in bin/; KWOK (sigs.k8s.io/kwok) simulates the event-builder
// servers of the LHCb fabric as Nodes (a farm server's allocatable: CPUs,
// memory, 1 GiB huge pages, rdma/hca_numa{0,1}, daq.io/tell40-numa{0,1})
// and plays the pods' lifecycle (kwok.yaml); the operator is its own
// binary (operator/cmd) run as the chart's Deployment runs it: its
// replicas, arguments, service account and RBAC, rendered by helm
// template. Each builder pod's control API is an emulated builder
// (internal/builderemu) answering at the pod's own IP, taken from its
// server's pod CIDR in 127.0.0.0/8 (the loopback device answers all of
// it), so the operator's polls, commands and failovers go over real
// sockets. A lost server is one KWOK turns NotReady at the moment its
// builders go silent.
//
// It prints BENCH lines on standard output and, with -check, exits 1 if a
// figure misses its target; progress and logs go to standard error and
// the work directory.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"daq.io/eventbuilder/operator/hack/lhcb"
)

type options struct {
	servers             int
	assets, kwok, helm  string
	chart, crds         string
	operatorBinary, dir string
	steady              time.Duration
	failures            int
	check               bool
}

func main() {
	var o options
	flag.IntVar(&o.servers, "servers", 0, "servers of a small fabric of the same kind (a smoke test); 0: the LHCb farm (167 servers)")
	flag.StringVar(&o.assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"), "directory of kube-apiserver, etcd, kube-scheduler, kube-controller-manager and kubectl")
	flag.StringVar(&o.kwok, "kwok", "", "KWOK's controller binary")
	flag.StringVar(&o.helm, "helm", "helm", "helm binary")
	flag.StringVar(&o.chart, "chart", filepath.Join("..", "charts", "eventbuilder-operator"), "the operator's chart")
	flag.StringVar(&o.crds, "crds", filepath.Join("..", "config", "crd", "bases"), "directory of the CRDs")
	flag.StringVar(&o.operatorBinary, "operator", "", "the operator's manager binary (go build ./cmd)")
	flag.StringVar(&o.dir, "dir", "", "work directory for logs and kubeconfigs (default: a new temporary one, removed when every target was met)")
	flag.DurationVar(&o.steady, "steady", 30*time.Second, "how long the steady run is watched for the operator's API requests, CPU and memory")
	flag.IntVar(&o.failures, "failures", 3, "servers lost one after another in the first run (their median and maximum are printed)")
	flag.BoolVar(&o.check, "check", false, "exit 1 if a figure misses its target")
	flag.Parse()
	for name, v := range map[string]string{"-kwok": o.kwok, "-operator": o.operatorBinary, "-assets": o.assets} {
		if v == "" {
			fmt.Fprintf(os.Stderr, "farm: %s is required\n", name)
			os.Exit(2)
		}
	}
	ownDir := o.dir == ""
	if ownDir {
		dir, err := os.MkdirTemp("", "eventbuilder-farm-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "farm:", err)
			os.Exit(1)
		}
		o.dir = dir
	}
	shape := lhcb.Farm
	if o.servers > 0 {
		shape = lhcb.Small(o.servers)
	}
	ctx, cancel := context.WithCancel(context.Background())
	missed, err := bench(ctx, o, shape)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "farm: %v (logs in %s)\n", err, o.dir)
		os.Exit(1)
	}
	if len(missed) > 0 {
		fmt.Fprintf(os.Stderr, "farm: targets missed (logs in %s):\n", o.dir)
		for _, m := range missed {
			fmt.Fprintln(os.Stderr, "  "+m)
		}
		if o.check {
			os.Exit(1)
		}
		return
	}
	if ownDir { // nothing to look at: every target met
		_ = os.RemoveAll(o.dir)
	}
}
