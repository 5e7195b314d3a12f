package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	ensureNamespace(ctx, t, key.Namespace)
	deleteRun(ctx, t, key)
	run := &ebv1alpha1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace},
		Spec: ebv1alpha1.EventBuilderRunSpec{
			Units:   4,
			Builder: ebv1alpha1.BuilderSpec{Image: env.builderImage, ImagePullPolicy: corev1.PullIfNotPresent},
		},
	}
	if err := k8sClient.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	waitFor(ctx, t, "phase Running with events built", 5*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		return run.Status.Phase == ebv1alpha1.PhaseRunning && run.Status.EventsBuilt > 0 && len(run.Status.Units) == 4, describe(run)
	})

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
