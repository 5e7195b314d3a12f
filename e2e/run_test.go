package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// A run of 4 units reaches Running, builds ever more events, never delivers an
// incomplete one, and leaves no pod behind once deleted.
func TestRunOfFourUnitsBuildsCompleteEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-four-units"}}
	if err := k8sClient.Create(ctx, namespace); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace: %v", err)
	}
	run := &ebv1alpha1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: "four-units", Namespace: namespace.Name},
		Spec: ebv1alpha1.EventBuilderRunSpec{
			Units: 4,
			Builder: ebv1alpha1.BuilderSpec{
				Image:           env.builderImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
			},
		},
	}
	if err := k8sClient.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	key := client.ObjectKeyFromObject(run)

	waitFor(ctx, t, "phase Running with events built", 5*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		return run.Status.Phase == ebv1alpha1.PhaseRunning && run.Status.EventsBuilt > 0, describe(run)
	})
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

	if err := k8sClient.Delete(ctx, run); err != nil {
		t.Fatalf("delete run: %v", err)
	}
	waitFor(ctx, t, "the run's pods to be gone", 3*time.Minute, func() (bool, string) {
		var pods corev1.PodList
		if err := k8sClient.List(ctx, &pods, client.InNamespace(namespace.Name),
			client.MatchingLabels{"eventbuilder.daq.io/run": run.Name}); err != nil {
			return false, err.Error()
		}
		names := make([]string, 0, len(pods.Items))
		for _, pod := range pods.Items {
			names = append(names, pod.Name)
		}
		return len(pods.Items) == 0, fmt.Sprintf("pods left: %v", names)
	})
}

func describe(run *ebv1alpha1.EventBuilderRun) string {
	return fmt.Sprintf("phase=%s ready=%d/%d events=%d incomplete=%d rate=%d/s throughput=%s Gb/s",
		run.Status.Phase, run.Status.ReadyUnits, run.Spec.Units, run.Status.EventsBuilt,
		run.Status.EventsIncomplete, run.Status.EventRate, run.Status.ThroughputGbps)
}

// waitFor polls condition every second until it holds, failing the test with
// the last observation when timeout passes.
func waitFor(ctx context.Context, t *testing.T, what string, timeout time.Duration, condition func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		var ok bool
		if ok, last = condition(); ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
