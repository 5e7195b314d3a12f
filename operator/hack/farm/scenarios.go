package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/hack/lhcb"
)

const (
	namespace  = "farm"
	fabricName = "lhcb"
	lostLabel  = "eventbuilder.daq.io/farm-lost"
)

// Targets (issue 33).
const (
	targetScheduled    = 10 * time.Second
	targetRunning      = 20 * time.Second
	targetServerLost   = 5 * time.Second
	targetLeafLost     = 10 * time.Second
	targetRequestRate  = 50.0
	targetRSS          = 300 << 20
	targetStatusBytes  = 256 << 10
	deadlineRunning    = 2 * time.Minute
	deadlineFailover   = time.Minute
	deadlineCleanupRun = 2 * time.Minute
)

// farmBench holds the cluster, the operator and the builders.
type farmBench struct {
	ctx    context.Context
	o      options
	shape  lhcb.Shape
	cp     *controlPlane
	c      client.Client
	cs     kubernetes.Interface
	op     *operator
	b      *builders
	fabric *ebv1.Fabric
	nodes  []string
	leafOf map[string]int // node -> leaf
	missed []string
	units  int32
	spares int32
	// appliedScheduled and appliedRunning: each run's apply to every pod
	// scheduled, and to Running.
	appliedScheduled, appliedRunning []time.Duration
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s farm: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func benchLine(name string, value float64, unit string) {
	fmt.Printf("BENCH name=farm_%s value=%.3f unit=%s\n", name, value, unit)
}

// target prints a figure against its target and notes a miss.
func (f *farmBench) target(name string, value, limit float64, unit string) {
	benchLine(name, value, unit)
	if value >= limit {
		f.missed = append(f.missed, fmt.Sprintf("%s %.3f %s, target under %.3f", name, value, unit, limit))
	}
}

func bench(ctx context.Context, o options, shape lhcb.Shape) ([]string, error) {
	f := &farmBench{ctx: ctx, o: o, shape: shape, units: shape.Units(), spares: shape.Spares(), leafOf: map[string]int{}}
	logf("%d servers on %d leaves (%d units, %d spares); logs and kubeconfigs in %s", shape.Servers(), len(shape.ServersPerLeaf), f.units, f.spares, o.dir)
	logf("starting kube-apiserver, etcd, kube-scheduler, kube-controller-manager and kwok")
	start := time.Now()
	cp, err := startControlPlane(o.dir, o.assets, o.kwok, o.crds)
	if err != nil {
		return nil, err
	}
	defer cp.stop()
	f.cp = cp
	if f.c, err = client.New(cp.env.Config, client.Options{Scheme: cp.env.Scheme}); err != nil {
		return nil, err
	}
	if f.cs, err = kubernetes.NewForConfig(cp.env.Config); err != nil {
		return nil, err
	}
	if err := f.setUp(); err != nil {
		return nil, err
	}
	logf("control plane up, %d nodes Ready (KWOK), in %v", len(f.nodes), time.Since(start).Round(time.Millisecond))
	chart, err := renderChart(o.helm, o.chart)
	if err != nil {
		return nil, err
	}
	if f.op, err = startOperator(ctx, f.c, cp.env.Config, o.dir, o.operatorBinary, chart); err != nil {
		return nil, err
	}
	defer f.op.stop()
	if err := f.waitFor("the operator to elect a leader", time.Minute, func() (bool, error) {
		_, err := f.op.leader(ctx)
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	logf("operator: %d replicas with the chart's arguments and RBAC; a leader elected", len(f.op.replicas))
	if f.b, err = newBuilders(ctx, f.cs, namespace); err != nil {
		return nil, err
	}
	defer f.b.close()

	// Run 1: apply, the steady state, servers lost one after another, stop and delete.
	if err := f.apply("run1"); err != nil {
		return nil, err
	}
	if err := f.steady("run1"); err != nil {
		return nil, err
	}
	var lost []time.Duration
	for i := range o.failures {
		took, err := f.loseServer("run1", i)
		if err != nil {
			return nil, err
		}
		lost = append(lost, took)
	}
	if len(lost) > 0 {
		f.target("server_lost_median", median(lost).Seconds(), targetServerLost.Seconds(), "s")
		f.target("server_lost_max", slices.Max(lost).Seconds(), 2*targetServerLost.Seconds(), "s")
	}
	if err := f.stopAndDelete("run1"); err != nil {
		return nil, err
	}
	// Run 2: apply, a server drained, a leaf lost, delete.
	if err := f.apply("run2"); err != nil {
		return nil, err
	}
	if err := f.drain("run2"); err != nil {
		return nil, err
	}
	if err := f.loseLeaf("run2"); err != nil {
		return nil, err
	}
	if err := f.stopAndDelete("run2"); err != nil {
		return nil, err
	}
	// Run 3: apply and delete, for a median of three applies.
	if err := f.apply("run3"); err != nil {
		return nil, err
	}
	if err := f.stopAndDelete("run3"); err != nil {
		return nil, err
	}
	f.target("apply_to_scheduled_median", median(f.appliedScheduled).Seconds(), targetScheduled.Seconds(), "s")
	f.target("apply_to_running_median", median(f.appliedRunning).Seconds(), targetRunning.Seconds(), "s")
	// Error level is for what needs a person: none of this should.
	errorLines, first, err := f.op.errorLogs()
	if err != nil {
		return nil, err
	}
	benchLine("operator_error_logs", float64(errorLines), "lines")
	if errorLines > 0 {
		f.missed = append(f.missed, fmt.Sprintf("operator_error_logs %d, the first: %s", errorLines, first))
	}
	return f.missed, errors.Join(f.b.err(), f.op.check(), f.cp.check())
}
