package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// FabricReconciler reports in a Fabric's status what the cluster can use
// of it: the planner's checks beyond the schema, and which endpoints'
// nodes are missing or not Ready.
type FabricReconciler struct {
	client.Client
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=eventbuilder.daq.io,resources=fabrics,verbs=get;list;watch
// +kubebuilder:rbac:groups=eventbuilder.daq.io,resources=fabrics/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch

// Reconcile refreshes one Fabric's status and announces condition changes.
func (r *FabricReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return requeueOnConflict(r.reconcile(ctx, req))
}

func (r *FabricReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fabric := &ebv1.Fabric{}
	if err := r.Get(ctx, req.NamespacedName, fabric); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return ctrl.Result{}, err
	}
	orig := fabric.DeepCopy()
	fabric.Status = runplan.FabricStatus(fabric, runplan.NodeStates(nodes.Items), runplan.CordonedNodes(nodes.Items))
	if equality.Semantic.DeepEqual(orig.Status, fabric.Status) {
		return ctrl.Result{}, nil
	}
	if err := r.Status().Patch(ctx, fabric, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, err
	}
	for _, c := range fabric.Status.Conditions {
		if was := meta.FindStatusCondition(orig.Status.Conditions, c.Type); was == nil || was.Status != c.Status || was.Reason != c.Reason {
			kind := corev1.EventTypeNormal
			if c.Status != "True" {
				kind = corev1.EventTypeWarning
			}
			logf.FromContext(ctx).Info("fabric condition", "type", c.Type, "status", c.Status, "reason", c.Reason)
			r.Recorder.Eventf(fabric, nil, kind, c.Reason, c.Type, "%s=%s: %s", c.Type, c.Status, c.Message)
		}
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler: a Fabric's spec and its
// nodes' health (see nodeHealthChanged) change its status.
func (r *FabricReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Recorder = withBoundedNotes(r.Recorder)
	return ctrl.NewControllerManagedBy(mgr).
		For(&ebv1.Fabric{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			var fabrics ebv1.FabricList
			if err := r.List(ctx, &fabrics); err != nil {
				logf.FromContext(ctx).Error(err, "listing fabrics to reconcile")
				return nil
			}
			reqs := make([]reconcile.Request, len(fabrics.Items))
			for i := range fabrics.Items {
				reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&fabrics.Items[i])}
			}
			return reqs
		}), builder.WithPredicates(nodeHealthChanged)).
		Named("fabric").
		WithOptions(queueOptions(1)).
		Complete(r)
}
