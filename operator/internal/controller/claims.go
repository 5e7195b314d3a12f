package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// checkDevices says, for a run in claims mode (spec.resources.claims), in
// condition DevicesAllocated and a Warning event when that changes,
// whether the cluster can allocate its builder pods' claims and whether
// the scheduler placed them; it returns whether pods that claim devices
// may be made. The DRA driver's DeviceClasses are asked for (uncached)
// only while a pod of the table is missing or the driver was: a run whose
// pods all exist costs the API server nothing more.
func (r *EventBuilderRunReconciler) checkDevices(ctx context.Context, run *ebv1.EventBuilderRun, t planner.RankTable,
	pods map[int32]*corev1.Pod) (bool, error) {
	claims := run.Spec.Resources.Claims
	if claims == nil {
		meta.RemoveStatusCondition(&run.Status.Conditions, ebv1.ConditionDevicesAllocated)
		return true, nil
	}
	var claiming []*corev1.Pod
	missing := false
	for _, rk := range t.Ranks {
		if rk.Role != planner.Live && rk.Role != planner.Spare {
			continue
		}
		switch pod := pods[int32(rk.Rank)]; {
		case pod == nil:
			missing = true
		case len(pod.Spec.ResourceClaims) > 0:
			claiming = append(claiming, pod)
		}
	}
	var state runplan.DRAState
	old := meta.FindStatusCondition(run.Status.Conditions, ebv1.ConditionDevicesAllocated)
	if missing || old == nil || old.Reason == ebv1.ReasonDRAUnavailable || old.Reason == ebv1.ReasonDRADriverMissing {
		var err error
		if state, err = r.draState(ctx); err != nil {
			return false, err
		}
	}
	r.setWarned(run, runplan.DevicesAllocated(state, claims.AlignOn, claiming, run.Generation), "Preflight")
	return state.Ready(), nil
}

// draState asks the API server whether it serves DRA and has the driver's
// DeviceClasses (which the chart's draDriver creates).
func (r *EventBuilderRunReconciler) draState(ctx context.Context) (runplan.DRAState, error) {
	var s runplan.DRAState
	for _, name := range []string{builderpod.RDMADeviceClass, builderpod.ReadoutDeviceClass} {
		err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, &resourceapi.DeviceClass{})
		switch {
		case meta.IsNoMatchError(err):
			return runplan.DRAState{NoAPI: true}, nil
		case apierrors.IsNotFound(err):
			s.MissingClasses = append(s.MissingClasses, name)
		case err != nil:
			return s, err
		}
	}
	return s, nil
}

// ensureClaimTemplate makes the ResourceClaimTemplate a pod about to be
// made claims its devices from, unless it exists (named by what it asks
// for, it is the same).
func (r *EventBuilderRunReconciler) ensureClaimTemplate(ctx context.Context, run *ebv1.EventBuilderRun, want *resourceapi.ResourceClaimTemplate) error {
	have := &resourceapi.ResourceClaimTemplate{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		logf.FromContext(ctx).Info("creating", "kind", "ResourceClaimTemplate", "name", want.Name)
		return client.IgnoreAlreadyExists(r.Create(ctx, want))
	case err != nil:
		return err
	case !metav1.IsControlledBy(have, run):
		return fmt.Errorf("ResourceClaimTemplate %s exists and does not belong to run %s; delete or rename it", have.Name, run.Name)
	}
	return nil
}
