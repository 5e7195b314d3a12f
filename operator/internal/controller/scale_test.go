package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// scaleRun is kubectl scale ebrun --replicas n: a merge patch of the
// run's scale subresource (no resourceVersion: the operator writes the
// status meanwhile).
func scaleRun(ctx context.Context, key client.ObjectKey, n int32) error {
	run := &ebv1.EventBuilderRun{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
	return k8s.SubResource("scale").Patch(ctx, run, patch)
}

// The scale subresource is spec.units: it reads the units live and the
// run's pod selector, resizes the run as an edit of spec.units does
// (pods and rank table follow), and refuses what the field refuses,
// naming it.
func TestScaleIsSpecUnits(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	key, _, _ := startRun(t, "scaled", 2)
	ns := key.Namespace
	eventually(t, "the scale of 2 units live, with the run's pod selector", func() error {
		scale := &autoscalingv1.Scale{}
		if err := k8s.SubResource("scale").Get(ctx, getRun(t, key), scale); err != nil {
			return err
		}
		if want := "app.kubernetes.io/name=eventbuilder,eventbuilder.daq.io/run=scaled"; scale.Spec.Replicas != 2 ||
			scale.Status.Replicas != 2 || scale.Status.Selector != want {
			return fmt.Errorf("spec.replicas %d, status.replicas %d, selector %q; want 2, 2 and %q",
				scale.Spec.Replicas, scale.Status.Replicas, scale.Status.Selector, want)
		}
		return nil
	})

	if err := scaleRun(ctx, key, 3); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, key).Spec.Units; got != 3 {
		t.Errorf("spec.units %d after scaling to 3", got)
	}
	waitPods(t, ns, "scaled", "scaled-eb-0", "scaled-eb-1", "scaled-eb-2")
	eventually(t, "a rank table of 3 ranks", func() error {
		doc, err := rankTable(ctx, ns, "scaled")
		if err == nil && len(doc.Ranks) != 3 {
			err = fmt.Errorf("%d ranks at epoch %d", len(doc.Ranks), doc.Epoch)
		}
		return err
	})

	for _, n := range []int32{0, 1025} {
		err := scaleRun(ctx, key, n)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.units") {
			t.Errorf("scale to %d: %v; want it refused as invalid, naming spec.units", n, err)
		}
	}
	if got := getRun(t, key).Spec.Units; got != 3 {
		t.Errorf("spec.units %d after refused scales, want 3", got)
	}
}
