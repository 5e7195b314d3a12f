package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
)

// ensureObjects keeps the run's Service, NetworkPolicy and control Secret
// as they should be, and returns the Secret.
func (p *runPass) ensureObjects(ctx context.Context, run *ebv1.EventBuilderRun) (*corev1.Secret, verdict) {
	r := p.r
	if err := r.ensureService(ctx, run); err != nil {
		return nil, endWith(ctrl.Result{}, err)
	}
	if err := r.syncNetworkPolicy(ctx, run); err != nil {
		return nil, endWith(ctrl.Result{}, err)
	}
	secret, err := r.ensureSecret(ctx, run)
	if err != nil {
		return nil, endWith(ctrl.Result{}, err)
	}
	return secret, goOn
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

// ensureSecret returns the run's control-token Secret, creating it with
// a fresh random token if it is missing. The builders read the token from
// it at start; the operator sends it as its bearer token.
func (r *EventBuilderRunReconciler) ensureSecret(ctx context.Context, run *ebv1.EventBuilderRun) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: run.Namespace, Name: builderpod.ControlSecretName(run.Name)}
	sec := &corev1.Secret{}
	err := r.Get(ctx, key, sec) // the cache holds the builders' Secrets only
	if apierrors.IsNotFound(err) {
		raw := make([]byte, builderpod.ControlTokenBytes+builderpod.DataKeyBytes)
		if _, err := rand.Read(raw); err != nil {
			return nil, err
		}
		sec = builderpod.ControlSecret(run, hex.EncodeToString(raw[:builderpod.ControlTokenBytes]),
			hex.EncodeToString(raw[builderpod.ControlTokenBytes:]))
		err = r.Create(ctx, sec)
		switch {
		case err == nil:
			logf.FromContext(ctx).Info("created control token", "secret", sec.Name)
			r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, "ControlSecretCreated", "CreateSecret",
				"Secret %s holds the builders' control token and data key", sec.Name)
		case apierrors.IsAlreadyExists(err):
			// Not in the cache yet, or not labelled as the run's.
			sec = &corev1.Secret{}
			err = r.APIReader.Get(ctx, key, sec)
		}
	}
	if err != nil {
		return nil, err
	}
	if !metav1.IsControlledBy(sec, run) {
		return nil, fmt.Errorf("Secret %s exists and does not belong to run %s; delete or rename it", key.Name, run.Name)
	}
	for _, k := range []string{builderpod.ControlTokenKey, builderpod.DataKeyKey} {
		if len(sec.Data[k]) == 0 {
			// A Secret made by an operator before data keys: immutable, so replaced.
			return nil, fmt.Errorf("Secret %s has no %q: delete it and the operator creates a new one", key.Name, k)
		}
	}
	return sec, nil
}
