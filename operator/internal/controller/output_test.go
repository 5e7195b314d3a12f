package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// A unit whose consumer is gone drops every MEP it builds (the set goes
// on): the run names it in OutputsFlowing, and under outputStallPolicy
// MoveBU moves its BU alone to a spare on another server, as a planned
// move. The unit's RU reads on at its rank; the spare builds the unit's
// share into its own consumer, and the outputs flow again.
func TestAStalledOutputMovesTheBUAlone(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "out")
	run := fabricRun(ns, "out", "out", 5, 2)
	run.Spec.OutputStallPolicy = ebv1.OutputStallMoveBU
	run.Spec.OutputStallAfter = &metav1.Duration{Duration: 5 * time.Second}
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	pods := waitPods(t, ns, "out", "out-eb-0", "out-eb-1", "out-eb-2", "out-eb-3", "out-eb-4", "out-eb-5", "out-eb-6")
	for _, pod := range pods {
		startPod(t, &pod)
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	waitCondition(t, key, ebv1.ConditionOutputsFlowing, metav1.ConditionTrue, ebv1.ReasonOutputsFlowing, "the outputs of 5 live BUs")
	before, err := rankTable(ctx, ns, "out")
	if err != nil {
		t.Fatal(err)
	}

	// Rank 1's consumer is gone: its BU finds no room in its output.
	stalledAt := time.Now()
	farm.SetOutputStalled(string(pods["out-eb-1"].UID), true)
	fo := waitFailover(t, key, 2)
	t.Logf("BU moved %s after the output stalled (outputStallAfter 5s): %s", time.Since(stalledAt).Round(time.Millisecond), moves(fo))
	if len(fo.Moves) != 1 || fo.Moves[0].FailedRank != 1 || fo.Moves[0].Reason != ebv1.ReasonOutputStalled ||
		fo.Moves[0].Function != "BU" || fo.Moves[0].SpareRank == nil {
		t.Fatalf("lastFailover %+v (%s), want rank 1's BU moved to a spare for %s", fo, moves(fo), ebv1.ReasonOutputStalled)
	}
	spare := *fo.Moves[0].SpareRank
	doc, err := rankTable(ctx, ns, "out")
	if err != nil {
		t.Fatal(err)
	}
	ru, bu := doc.Ranks[1], doc.Ranks[spare]
	if ru.State != "live" || ru.Function != "RU" || *ru.Unit != *before.Ranks[1].Unit || ru.Endpoint != before.Ranks[1].Endpoint {
		t.Errorf("rank 1 after the move %+v, want the unit's RU on its endpoint %s", ru, before.Ranks[1].Endpoint)
	}
	if bu.State != "live" || bu.Function != "BU" || *bu.Unit != *ru.Unit || bu.Node == ru.Node || bu.SourceUnread {
		t.Errorf("spare rank %d after the move %+v, want unit %d's BU on another server", spare, bu, *ru.Unit)
	}
	waitCondition(t, key, ebv1.ConditionOutputsFlowing, metav1.ConditionTrue, ebv1.ReasonOutputsFlowing, "the outputs of 5 live BUs")
	// The spare's builder answers a poll or two after the outputs flow
	// (Degraded, "not answering", until then on a loaded machine).
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	if st := getRun(t, key).Status; st.LiveUnits != 5 {
		t.Errorf("after the move: %d live units, want 5", st.LiveUnits)
	}
	expectEvent(t, ns, "out", "Failover")
}

// Under Report a stalled output is only named.
func TestAStalledOutputIsNamedUnderReport(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	run := &ebv1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: "outr", Namespace: ns},
		Spec: ebv1.EventBuilderRunSpec{Units: 2, OutputStallAfter: &metav1.Duration{Duration: 5 * time.Second},
			Builder: ebv1.BuilderSpec{Image: "eventbuilder/builder:test"}},
	}
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	pods := waitPods(t, ns, "outr", "outr-eb-0", "outr-eb-1")
	for _, pod := range pods {
		startPod(t, &pod)
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	farm.SetOutputStalled(string(pods["outr-eb-0"].UID), true)
	waitCondition(t, key, ebv1.ConditionOutputsFlowing, metav1.ConditionFalse, ebv1.ReasonOutputStalled, "rank 0 (no endpoint): no MEP taken for")
	r := getRun(t, key)
	if c := meta.FindStatusCondition(r.Status.Conditions, ebv1.ConditionOutputsFlowing); r.Status.Epoch != 1 ||
		!strings.Contains(c.Message, "spec.outputStallPolicy is Report") {
		t.Errorf("under Report: epoch %d, condition %+v; want epoch 1 and the policy named", r.Status.Epoch, c)
	}
}
