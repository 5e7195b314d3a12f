package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// What the builders run cannot change under a Running run (each change
// would replace every pod mid-run): the API server refuses it, naming the
// field and saying to stop the run first; stopped, the same change goes
// through. The run's identity shows in its status.
func TestFrozenFieldsWhileRunning(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	key, _, _ := startRun(t, "frozen", 2)
	run := getRun(t, key)
	if run.Spec.Builder.Output == nil || run.Spec.Builder.Output.Check == nil || run.Spec.Builder.IncompleteEvents != ebv1.IncompleteDrop {
		t.Errorf("defaults: output %+v, incompleteEvents %q; want check and Drop", run.Spec.Builder.Output, run.Spec.Builder.IncompleteEvents)
	}
	memory := resource.MustParse("1Gi")
	for _, tc := range []struct {
		field string
		edit  func(*ebv1.EventBuilderRun)
	}{
		{"spec.builder.image", func(r *ebv1.EventBuilderRun) { r.Spec.Builder.Image = "eventbuilder/builder:next" }},
		{"spec.resources", func(r *ebv1.EventBuilderRun) { r.Spec.Resources = ebv1.UnitResources{CPUs: 2, Memory: &memory} }},
		{"spec.builder.source", func(r *ebv1.EventBuilderRun) { r.Spec.Builder.Source.Generator.FragmentSize = 256 }},
		{"spec.builder.output", func(r *ebv1.EventBuilderRun) {
			r.Spec.Builder.Output = &ebv1.OutputSpec{Discard: &ebv1.DiscardOutput{}}
		}},
		{"spec.runNumber", func(r *ebv1.EventBuilderRun) { n := int64(4242); r.Spec.RunNumber = &n }},
		{"spec.partition", func(r *ebv1.EventBuilderRun) { r.Spec.Partition = "VELO" }},
		{"spec.tolerations", func(r *ebv1.EventBuilderRun) {
			r.Spec.Tolerations = []corev1.Toleration{{Key: "daq.io/eventbuilder", Operator: corev1.TolerationOpExists}}
		}},
		{"spec.builder (transport, packingFactor, incompleteEvents, timeouts and the rest: each is on every builder's command line)", func(r *ebv1.EventBuilderRun) { r.Spec.Builder.PackingFactor = 500 }},
	} {
		// A merge patch carries no resourceVersion: the operator's status
		// writes cannot make it conflict.
		orig := getRun(t, key)
		changed := orig.DeepCopy()
		tc.edit(changed)
		err := k8s.Patch(ctx, changed, client.MergeFrom(orig))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field+" cannot change while the run is Running, Degraded or Paused") ||
			!strings.Contains(err.Error(), "set spec.state to Stopped") {
			t.Errorf("%s changed while Running: %v; want it refused, naming the field and saying to stop first", tc.field, err)
		}
	}
	// Scaling and state stay free.
	orig := getRun(t, key)
	stopped := orig.DeepCopy()
	stopped.Spec.State = ebv1.StateStopped
	if err := k8s.Patch(ctx, stopped, client.MergeFrom(orig)); err != nil {
		t.Fatalf("stop the run: %v", err)
	}
	waitPhase(t, key, ebv1.PhaseStopped, ebv1.ReasonRunStopped)
	orig = getRun(t, key)
	changed := orig.DeepCopy()
	n := int64(4242)
	changed.Spec.RunNumber, changed.Spec.Partition = &n, "VELO"
	changed.Spec.Builder.Output = &ebv1.OutputSpec{Discard: &ebv1.DiscardOutput{}}
	if err := k8s.Patch(ctx, changed, client.MergeFrom(orig)); err != nil {
		t.Fatalf("the same changes on a stopped run: %v", err)
	}
	eventually(t, "the run's identity in its status", func() error {
		st := getRun(t, key).Status
		if st.RunNumber == nil || *st.RunNumber != 4242 || st.Partition != "VELO" {
			return fmt.Errorf("runNumber %v partition %q", st.RunNumber, st.Partition)
		}
		return nil
	})
}
