package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
)

// The objects a run owns besides its pods and rank table: its headless
// Service, its PodDisruptionBudget (on a Fabric), its NetworkPolicy.

// syncDisruptionBudget keeps the run's PodDisruptionBudget, holding a pod
// for every rank of its table, while it is on a Fabric (where the operator
// moves units off a drained node itself), and removes it when
// spec.fabricRef is removed: a run without a Fabric lets drains evict its
// pods, which are recreated elsewhere.
func (r *EventBuilderRunReconciler) syncDisruptionBudget(ctx context.Context, run *ebv1.EventBuilderRun, onFabric bool, ranks int32) error {
	pdb := &policyv1.PodDisruptionBudget{}
	err := r.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: builderpod.DisruptionBudgetName(run.Name)}, pdb)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return err
	case !onFabric && err == nil:
		return client.IgnoreNotFound(r.Delete(ctx, pdb))
	case !onFabric:
		return nil
	}
	want := builderpod.DisruptionBudget(run, ranks)
	if apierrors.IsNotFound(err) {
		logf.FromContext(ctx).Info("creating", "kind", "PodDisruptionBudget", "name", want.Name)
		return client.IgnoreAlreadyExists(r.Create(ctx, want))
	}
	if equality.Semantic.DeepEqual(pdb.Spec.MinAvailable, want.Spec.MinAvailable) && pdb.Spec.MaxUnavailable == nil {
		return nil
	}
	pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable = want.Spec.MinAvailable, nil
	return r.Update(ctx, pdb)
}

// ensureService creates the run's headless Service if it is missing.
func (r *EventBuilderRunReconciler) ensureService(ctx context.Context, run *ebv1.EventBuilderRun) error {
	return r.ensure(ctx, builderpod.Service(run), &corev1.Service{})
}

// ensure creates want unless an object of its name exists (read into have).
func (r *EventBuilderRunReconciler) ensure(ctx context.Context, want, have client.Object) error {
	err := r.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		logf.FromContext(ctx).Info("creating", "kind", fmt.Sprintf("%T", have), "name", want.GetName())
		err = r.Create(ctx, want)
	}
	return client.IgnoreAlreadyExists(err)
}

// syncNetworkPolicy keeps the run's NetworkPolicy as ControlClients say
// (updated when the operator was redeployed with other clients), or
// removes it when the operator runs without one.
func (r *EventBuilderRunReconciler) syncNetworkPolicy(ctx context.Context, run *ebv1.EventBuilderRun) error {
	have := &networkingv1.NetworkPolicy{}
	err := r.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: builderpod.NetworkPolicyName(run.Name)}, have)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	exists := err == nil
	switch {
	case r.ControlClients == nil && exists:
		return client.IgnoreNotFound(r.Delete(ctx, have))
	case r.ControlClients == nil:
		return nil
	}
	want := builderpod.NetworkPolicy(run, *r.ControlClients)
	if !exists {
		logf.FromContext(ctx).Info("creating", "kind", "NetworkPolicy", "name", want.Name)
		return client.IgnoreAlreadyExists(r.Create(ctx, want))
	}
	if equality.Semantic.DeepEqual(have.Spec, want.Spec) {
		return nil
	}
	have.Spec = want.Spec
	return r.Update(ctx, have)
}
