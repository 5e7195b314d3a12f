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

// A run of 4 units reaches Running, builds ever more events, never delivers an
// incomplete one, takes a unit whose pod vanished back on its own rank,
// builds beside two other runs (one in its namespace, one in another),
// pauses, resumes, stops and starts by spec.state, shrinks to 3 units and
// grows back to 4, and leaves no pod behind once deleted.
func TestRunOfFourUnitsBuildsCompleteEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	key := client.ObjectKey{Namespace: "e2e-four-units", Name: "four-units"}
	run := runningRun(ctx, t, key, 4)
	first := run.Status.EventsBuilt
	t.Logf("running: %s", describe(run))

	waitFor(ctx, t, "events built to increase", 2*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		return run.Status.EventsBuilt > first, describe(run)
	})
	t.Logf("still building: %s", describe(run))

	if run.Status.EventsIncomplete != 0 {
		t.Errorf("run delivered %d incomplete events, want 0", run.Status.EventsIncomplete)
	}
	if len(run.Status.Units) != 4 {
		t.Errorf("status lists %d units, want 4", len(run.Status.Units))
	}
	for _, unit := range run.Status.Units {
		if unit.EventsBuilt == 0 || unit.EventsIncomplete != 0 {
			t.Errorf("unit %d (%s): %d events built, %d incomplete; want >0 built and 0 incomplete",
				unit.Rank, unit.Pod, unit.EventsBuilt, unit.EventsIncomplete)
		}
	}

	takesLostUnitBack(ctx, t, run)
	runsSideBySide(ctx, t, run)
	drivesState(ctx, t, run)
	resizes(ctx, t, run, 3)
	resizes(ctx, t, run, 4)

	deleteRun(ctx, t, key)
}

// takesLostUnitBack deletes the pod of one unit of a running run without a
// Fabric (so without spares): the pod is recreated in place, the survivors
// report the unit lost, and the operator takes it back on its own rank by
// the same table at a new epoch (lastFailover outcome Rejoined). Every unit
// then builds again, the survivors without a restart, none incomplete.
func takesLostUnitBack(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun) {
	t.Helper()
	key := client.ObjectKeyFromObject(run)
	before := run.DeepCopy()
	victim := before.Status.Units[1]
	var survivors []*corev1.Pod
	for _, u := range before.Status.Units {
		if u.Rank != victim.Rank {
			survivors = append(survivors, builderPod(ctx, t, key.Namespace, u.Pod))
		}
	}
	victimPod := builderPod(ctx, t, key.Namespace, victim.Pod)
	t.Logf("losing the unit on rank %d: deleting pod %s with grace period 0", victim.Rank, victim.Pod)
	deleted := deleteBuilderPod(ctx, t, victimPod)
	var seen incompleteSeen
	waitForNewEpoch(ctx, t, run, before, len(before.Status.Units), ebv1alpha1.PhaseRunning, "the lost unit to rejoin", &seen)
	rejoined := time.Now()
	after := run.DeepCopy()
	fo := after.Status.LastFailover
	if fo.Outcome != ebv1alpha1.OutcomeRejoined || len(fo.Moves) != 1 || fo.Moves[0].FailedRank != victim.Rank ||
		fo.Moves[0].Reason != "PeerLost" || fo.Moves[0].SpareRank != nil {
		t.Fatalf("lastFailover: want outcome %s with one move of rank %d, reason PeerLost, no spare; have %s",
			ebv1alpha1.OutcomeRejoined, victim.Rank, describeFailover(after))
	}
	if now := builderPod(ctx, t, key.Namespace, victim.Pod); now.UID == victimPod.UID {
		t.Fatalf("pod %s is the deleted one (UID %s), want its replacement", victim.Pod, now.UID)
	}
	t.Logf("rejoin figures: rank %d, epoch %d -> %d; %s", victim.Rank, before.Status.Epoch, fo.Epoch,
		failoverFigures(fo, deleted, rejoined))

	waitForEveryUnitToBuild(ctx, t, run, after, "after the rejoin", &seen)
	for _, pod := range survivors {
		assertNotRestarted(ctx, t, "surviving unit's", pod)
	}
}

// runningRun creates a run of units without a Fabric on the builder image
// (edit changes its spec), in its own namespace, after removing what an
// earlier, failed attempt on a reused cluster left, and waits until it is
// Running with events built and a row per unit.
func runningRun(ctx context.Context, t *testing.T, key client.ObjectKey, units int32,
	edit ...func(*ebv1alpha1.EventBuilderRunSpec)) *ebv1alpha1.EventBuilderRun {
	t.Helper()
	ensureNamespace(ctx, t, key.Namespace)
	deleteRun(ctx, t, key)
	run := &ebv1alpha1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace},
		Spec: ebv1alpha1.EventBuilderRunSpec{
			Units:   units,
			Builder: ebv1alpha1.BuilderSpec{Image: env.builderImage, ImagePullPolicy: corev1.PullIfNotPresent},
		},
	}
	for _, e := range edit {
		e(&run.Spec)
	}
	if err := k8sClient.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	waitFor(ctx, t, "phase Running with events built", 5*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		return run.Status.Phase == ebv1alpha1.PhaseRunning && run.Status.EventsBuilt > 0 && len(run.Status.Units) == int(units), describe(run)
	})
	return run
}

func describe(run *ebv1alpha1.EventBuilderRun) string {
	observed := "never"
	if at := run.Status.ObservedTime; at != nil {
		observed = time.Since(at.Time).Round(100*time.Millisecond).String() + " ago"
	}
	return fmt.Sprintf("phase=%s ready=%d/%d events=%d incomplete=%d rate=%d/s throughput=%s Gb/s observed=%s",
		run.Status.Phase, run.Status.ReadyUnits, run.Spec.Units, run.Status.EventsBuilt,
		run.Status.EventsIncomplete, run.Status.EventRate, run.Status.ThroughputGbps, observed)
}

// waitReportEvery: a wait longer than this says what it still waits for,
// and how long it took, so a slow step in CI shows which it was.
const waitReportEvery = 30 * time.Second

// waitFor polls condition every second until it holds, failing the test with
// the last observation when timeout passes.
func waitFor(ctx context.Context, t *testing.T, what string, timeout time.Duration, condition func() (bool, string)) {
	t.Helper()
	start := time.Now()
	deadline, report := start.Add(timeout), start.Add(waitReportEvery)
	var last string
	for {
		var ok bool
		if ok, last = condition(); ok {
			if took := time.Since(start); took > waitReportEvery {
				t.Logf("%s after %s", what, took.Round(time.Second))
			}
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
		}
		if time.Now().After(report) {
			t.Logf("still waiting for %s after %s; now: %s", what, time.Since(start).Round(time.Second), last)
			report = report.Add(waitReportEvery)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
