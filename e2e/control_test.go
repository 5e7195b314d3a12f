package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// patchRun applies edit to the run as a merge patch and returns when the
// patch was accepted.
func patchRun(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun, edit func(*ebv1alpha1.EventBuilderRun)) time.Time {
	t.Helper()
	patch := client.MergeFrom(run.DeepCopy())
	edit(run)
	if err := k8sClient.Patch(ctx, run, patch); err != nil {
		t.Fatalf("patch run %s: %v", run.Name, err)
	}
	return time.Now()
}

// waitForMoreEvents waits until the run has built more events than it has
// now, in phase Running.
func waitForMoreEvents(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun, what string) {
	t.Helper()
	key := client.ObjectKeyFromObject(run)
	if err := k8sClient.Get(ctx, key, run); err != nil {
		t.Fatal(err)
	}
	first := run.Status.EventsBuilt
	waitFor(ctx, t, what, 3*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		return run.Status.Phase == ebv1alpha1.PhaseRunning && run.Status.EventsBuilt > first, describe(run)
	})
}

// drivesState takes a running run through spec.state: Paused (phase
// Paused, no event built any more), Running (building again), Stopped
// (phase Stopped, the pods kept), Running (building again, the same
// pods).
func drivesState(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun) {
	t.Helper()
	key := client.ObjectKeyFromObject(run)
	pods := map[string]*corev1.Pod{}
	for _, u := range run.Status.Units {
		pods[u.Pod] = builderPod(ctx, t, key.Namespace, u.Pod)
	}
	for _, step := range []struct {
		state ebv1alpha1.RunState
		phase ebv1alpha1.RunPhase
	}{{ebv1alpha1.StatePaused, ebv1alpha1.PhasePaused}, {ebv1alpha1.StateRunning, ebv1alpha1.PhaseRunning},
		{ebv1alpha1.StateStopped, ebv1alpha1.PhaseStopped}, {ebv1alpha1.StateRunning, ebv1alpha1.PhaseRunning}} {
		asked := patchRun(ctx, t, run, func(r *ebv1alpha1.EventBuilderRun) { r.Spec.State = step.state })
		if step.state == ebv1alpha1.StateRunning {
			waitForMoreEvents(ctx, t, run, "events built again after spec.state Running")
			t.Logf("spec.state Running: building again %s later: %s", time.Since(asked).Round(time.Millisecond), describe(run))
			continue
		}
		// Still: in the phase, no event built between two of the operator's
		// polls (eventRate is their counters' difference; a change to 0 is
		// written at once, unlike the counters themselves, which a steady
		// run's status carries only every --status-counters-interval).
		waitFor(ctx, t, fmt.Sprintf("phase %s with no event built any more", step.phase), 2*time.Minute, func() (bool, string) {
			if err := k8sClient.Get(ctx, key, run); err != nil {
				return false, err.Error()
			}
			return run.Status.Phase == step.phase && run.Status.LastSampleTime != nil && run.Status.EventRate == 0, describe(run)
		})
		t.Logf("spec.state %s: phase %s %s later: %s", step.state, step.phase, time.Since(asked).Round(time.Millisecond), describe(run))
	}
	for _, pod := range pods {
		assertNotRestarted(ctx, t, "a paused, stopped and started unit's", pod)
	}
}

// resizes changes spec.units of a running run without a Fabric to units:
// the operator stops the set, publishes a table of the new size and starts
// the set again. It waits for every unit of the new table to build, checks
// that no pod of a rank that stays was restarted and that no event was
// delivered incomplete, and prints how long the run built nothing.
func resizes(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun, units int32) {
	t.Helper()
	key := client.ObjectKeyFromObject(run)
	before := run.DeepCopy()
	kept := map[int32]*corev1.Pod{}
	for _, u := range before.Status.Units {
		if u.Rank < units {
			kept[u.Rank] = builderPod(ctx, t, key.Namespace, u.Pod)
		}
	}
	asked := patchRun(ctx, t, run, func(r *ebv1alpha1.EventBuilderRun) { r.Spec.Units = units })
	var seen incompleteSeen
	waitFor(ctx, t, fmt.Sprintf("every one of %d units building on a new epoch", units), 3*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		seen.note(run)
		if run.Status.Epoch <= before.Status.Epoch || run.Status.RankCount != units || len(run.Status.Units) != int(units) {
			return false, describeFailover(run)
		}
		for _, u := range run.Status.Units {
			if u.Epoch != run.Status.Epoch || u.EventsBuilt == 0 {
				return false, describeFailover(run)
			}
		}
		return run.Status.Phase == ebv1alpha1.PhaseRunning, describeFailover(run)
	})
	building := time.Now()
	// Building again: every unit's count moves on from here.
	waitForEveryUnitToBuild(ctx, t, run, run.DeepCopy(), fmt.Sprintf("after the resize to %d units", units), &seen)
	t.Logf("resize %d -> %d units: epoch %d -> %d; from the patch to every unit building on the new table: %s (the run built nothing for at most that long)",
		len(before.Status.Units), units, before.Status.Epoch, run.Status.Epoch, building.Sub(asked).Round(time.Millisecond))
	for _, pod := range kept {
		assertNotRestarted(ctx, t, "a kept rank's", pod)
	}
}

// runsSideBySide starts two more runs while `run` builds: one of 2 units
// in its namespace, one in another namespace. All three build at once;
// each has its own pods, table and control Secret.
func runsSideBySide(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun) {
	t.Helper()
	others := []client.ObjectKey{{Namespace: run.Namespace, Name: "beside"}, {Namespace: "e2e-other-namespace", Name: "beside"}}
	for _, key := range others {
		ensureNamespace(ctx, t, key.Namespace)
		deleteRun(ctx, t, key)
		other := &ebv1alpha1.EventBuilderRun{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace},
			Spec: ebv1alpha1.EventBuilderRunSpec{Units: 2, Builder: ebv1alpha1.BuilderSpec{
				Image: env.builderImage, ImagePullPolicy: corev1.PullIfNotPresent}},
		}
		if err := k8sClient.Create(ctx, other); err != nil {
			t.Fatalf("create run %s: %v", key, err)
		}
	}
	for _, key := range others {
		other := &ebv1alpha1.EventBuilderRun{}
		if err := k8sClient.Get(ctx, key, other); err != nil {
			t.Fatal(err)
		}
		waitForMoreEvents(ctx, t, other, "run "+key.String()+" building beside "+run.Name)
		if other.Status.EventsIncomplete != 0 || len(other.Status.Units) != 2 {
			t.Errorf("run %s: %s, %d units; want 2 and no incomplete event", key, describe(other), len(other.Status.Units))
		}
		t.Logf("run %s building: %s", key, describe(other))
	}
	waitForMoreEvents(ctx, t, run, run.Name+" still building beside the others")
	for _, key := range others {
		deleteRun(ctx, t, key)
	}
}
