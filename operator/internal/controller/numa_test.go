package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
)

// The builders' NUMA reports reach the run: each rank's placement in
// status.ranks[].numa and the NUMAAligned condition. A unit whose CPUs are
// off its endpoint's node is named; under numaPolicy Report it builds on,
// under FailOver it moves to a spare as a planned move.
func TestNUMAMisalignedUnitIsNamedThenMovedUnderFailOver(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "numa")
	run := fabricRun(ns, "numa", "numa", 5, 2)
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	pods := waitPods(t, ns, "numa", "numa-eb-0", "numa-eb-1", "numa-eb-2", "numa-eb-3", "numa-eb-4", "numa-eb-5", "numa-eb-6")
	for _, pod := range pods {
		startPod(t, &pod)
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	waitCondition(t, key, ebv1.ConditionNUMAAligned, metav1.ConditionTrue, ebv1.ReasonNUMAAligned, "5 live units")
	// The condition counts live units; the spares' reports come with their
	// own polls, maybe later on a loaded machine.
	eventually(t, "every live and spare rank's NUMA placement in status", func() error {
		for _, rk := range getRun(t, key).Status.Ranks {
			if rk.Role == ebv1.RoleDummy {
				continue
			}
			// Endpoint srvS-numaN runs on NUMA node N with device mlx5_N.
			want := int32(rk.Rank % 2)
			if n := rk.NUMA; n == nil || !n.Aligned || n.Node == nil || *n.Node != want || n.Misplaced != "" {
				return fmt.Errorf("rank %d (%s): numa %+v, want aligned on node %d with its device", rk.Rank, rk.Endpoint, n, want)
			}
		}
		return nil
	})

	// Rank 4's kubelet gave its builder CPUs of the whole machine.
	farm.SetMisaligned(string(pods["numa-eb-4"].UID), true)
	waitCondition(t, key, ebv1.ConditionNUMAAligned, metav1.ConditionFalse, ebv1.ReasonNUMAMisaligned,
		fmt.Sprintf("rank 4 (pod numa-eb-4, node %s): not on NUMA node 0: CPUs", builderpod.Node(ptr(pods["numa-eb-4"]))))
	if r := getRun(t, key); r.Status.Epoch != 1 || r.Status.Phase != ebv1.PhaseRunning {
		t.Errorf("under numaPolicy Report: epoch %d, phase %s; want epoch 1 and Running (the unit builds on)", r.Status.Epoch, r.Status.Phase)
	}

	// Under FailOver it moves to a spare, and the run is aligned again.
	r := getRun(t, key)
	patch := client.MergeFrom(r.DeepCopy())
	r.Spec.NUMAPolicy = ebv1.NUMAFailOver
	if err := k8s.Patch(ctx, r, patch); err != nil {
		t.Fatal(err)
	}
	fo := waitFailover(t, key, 2)
	if fo.Outcome != ebv1.OutcomeMovedToSpare || len(fo.Moves) != 1 || fo.Moves[0].FailedRank != 4 ||
		fo.Moves[0].Reason != ebv1.ReasonNUMAMisaligned {
		t.Errorf("lastFailover %+v, want rank 4 moved to a spare for %s", fo, ebv1.ReasonNUMAMisaligned)
	}
	waitCondition(t, key, ebv1.ConditionNUMAAligned, metav1.ConditionTrue, ebv1.ReasonNUMAAligned, "5 live units")
}

// numaPolicy FailOver needs a Fabric: NUMA nodes and spares come from one.
func TestNUMAFailOverWithoutAFabricIsRefused(t *testing.T) {
	requireEnvtest(t)
	ns := newNamespace(t)
	run := &ebv1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: "numa", Namespace: ns},
		Spec: ebv1.EventBuilderRunSpec{Units: 2, NUMAPolicy: ebv1.NUMAFailOver,
			Builder: ebv1.BuilderSpec{Image: "eventbuilder/builder:test"}},
	}
	err := k8s.Create(context.Background(), run)
	if err == nil || !strings.Contains(err.Error(), "spec.numaPolicy FailOver") || !strings.Contains(err.Error(), "set spec.fabricRef") {
		t.Errorf("create: %v, want a refusal naming spec.numaPolicy and the fix", err)
	}
}
