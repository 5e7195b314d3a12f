package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// A worker is stopped under a run without a Fabric (no spare to move its
// units to): the run turns Degraded, its Ready condition naming the lost
// ranks. Started again, the worker's pods come back with new IPs, the pod
// network (flannel) restores the node's routes, and the operator takes the
// units back at a new epoch with their new addresses: every unit builds
// again. Each step prints its time.
func TestWorkerRestartedUnderARunWithoutAFabric(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	key := client.ObjectKey{Namespace: "e2e-worker-restart", Name: "restart"}
	run := runningRun(ctx, t, key, 4)

	// The victim: a worker with units and without the operator (losing the
	// operator with its node is another case).
	onNode := map[string][]int32{}
	for _, u := range run.Status.Units {
		node := builderPod(ctx, t, key.Namespace, u.Pod).Spec.NodeName
		onNode[node] = append(onNode[node], u.Rank)
	}
	operator, victim := operatorNode(ctx, t), ""
	for _, w := range workerNodes(ctx, t) {
		if w != operator && len(onNode[w]) > 0 {
			victim = w
		}
	}
	if victim == "" {
		t.Fatalf("no worker holds units without the operator (%s): units by node %v", operator, onNode)
	}
	lost := onNode[victim]
	before := run.DeepCopy()
	ipsBefore := map[int32]string{}
	for _, u := range run.Status.Units {
		ipsBefore[u.Rank] = builderPod(ctx, t, key.Namespace, u.Pod).Status.PodIP
	}

	stopped := time.Now()
	docker(t, "stop", victim)
	t.Logf("stopped worker %s with the units of ranks %v", victim, lost)
	waitFor(ctx, t, "the run Degraded, naming the lost ranks", 3*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		ready := readyCondition(run)
		if run.Status.Phase != ebv1alpha1.PhaseDegraded || ready == nil {
			return false, describe(run)
		}
		for _, rank := range lost {
			if !strings.Contains(ready.Message, fmt.Sprintf("rank %d", rank)) && !strings.Contains(ready.Message, fmt.Sprintf("ranks %d", rank)) {
				return false, "Ready message does not name rank " + fmt.Sprint(rank) + ": " + ready.Message
			}
		}
		return true, ready.Reason + ": " + ready.Message
	})
	t.Logf("Degraded %s after the stop: %s: %s", time.Since(stopped).Round(time.Millisecond), readyCondition(run).Reason, readyCondition(run).Message)

	started := time.Now()
	docker(t, "start", victim)
	var seen incompleteSeen
	waitForNewEpoch(ctx, t, run, before, 4, "the worker's units to rejoin", &seen)
	rejoined := time.Since(started)
	waitForEveryUnitToBuild(ctx, t, run, run.DeepCopy(), "after the worker came back", &seen)
	t.Logf("worker back: every unit on a new epoch %s after docker start, every unit building %s after it: %s",
		rejoined.Round(time.Millisecond), time.Since(started).Round(time.Millisecond), describeFailover(run))
	// The case the operator must handle: the victim's pods came back at
	// other IPs (their sandboxes were recreated), which the builders
	// configured before cannot know.
	for _, u := range run.Status.Units {
		pod := builderPod(ctx, t, key.Namespace, u.Pod)
		if slices.Contains(lost, u.Rank) && pod.Status.PodIP == ipsBefore[u.Rank] {
			t.Errorf("rank %d's pod %s kept its IP %s across the node restart: the moved-address case was not exercised", u.Rank, pod.Name, pod.Status.PodIP)
		}
	}
	if fo := run.Status.LastFailover; fo == nil || fo.Outcome != ebv1alpha1.OutcomeRejoined {
		t.Errorf("lastFailover %+v, want the victim's units Rejoined", fo)
	}
	deleteRun(ctx, t, key)
}

func readyCondition(run *ebv1alpha1.EventBuilderRun) *metav1.Condition {
	for i := range run.Status.Conditions {
		if run.Status.Conditions[i].Type == ebv1alpha1.ConditionReady {
			return &run.Status.Conditions[i]
		}
	}
	return nil
}
