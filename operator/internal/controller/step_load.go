package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/opmetrics"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// load reads the run and, on a Fabric, the Fabric and the nodes.
func (p *runPass) load(ctx context.Context) (*loadedRun, verdict) {
	r := p.r
	run := &ebv1.EventBuilderRun{}
	if err := r.Get(ctx, p.key, run); err != nil {
		if apierrors.IsNotFound(err) {
			r.polls.Forget(p.key)
			r.commands.forget(p.key)
			opmetrics.Forget(p.key.Namespace, p.key.Name)
		}
		return nil, endWith(ctrl.Result{}, client.IgnoreNotFound(err))
	}
	if !run.DeletionTimestamp.IsZero() {
		// Pods, Service, ConfigMap and Secret carry owner references: the garbage collector removes them.
		return nil, endWith(ctrl.Result{}, nil)
	}
	in := &loadedRun{run: run, orig: run.DeepCopy()}
	ref := run.Spec.FabricRef
	if ref == nil {
		return in, goOn
	}
	fab := &ebv1.Fabric{}
	if err := r.Get(ctx, client.ObjectKey{Name: ref.Name}, fab); apierrors.IsNotFound(err) {
		setPhase(run, ebv1.PhasePending, ebv1.ReasonFabricNotFound,
			fmt.Sprintf("spec.fabricRef: Fabric %q does not exist; create it or correct spec.fabricRef.name", ref.Name))
		return nil, p.endWithStatus(ctx, in.orig, in.run) // the Fabric watch brings the run back, the resync meanwhile
	} else if err != nil {
		return nil, endWith(ctrl.Result{}, err)
	}
	var list corev1.NodeList
	if err := r.List(ctx, &list); err != nil {
		return nil, endWith(ctrl.Result{}, err)
	}
	in.nodes = list.Items
	in.cordoned = runplan.CordonedNodes(list.Items)
	in.health, in.graceLeft = runplan.NodeHealth(list.Items, p.now, r.NodeNotReadyGrace)
	f := runplan.Fabric(&fab.Spec, runplan.NodeStates(list.Items))
	in.fabric = &f
	in.fabricKey = fmt.Sprintf("%s/%d", fab.UID, fab.Generation)
	return in, goOn
}
