package controller

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/ranktable"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// observe reads the run's pods, its rank table and the records beside it,
// and the builders' poll to decide on.
func (p *runPass) observe(ctx context.Context, in *loadedRun) (*observedRun, verdict) {
	r, run := p.r, in.run
	pods, err := r.listPods(ctx, run)
	if err != nil {
		return nil, endWith(ctrl.Result{}, err)
	}
	obs := &observedRun{pods: pods}
	r.polls.Track(p.key, r.pollTargets(pods), r.pollEvery(run))
	if obs.cm, obs.table, err = r.loadTable(ctx, run); err != nil {
		return nil, endWith(ctrl.Result{}, err)
	}
	// Hand-edited or corrupt records must not wedge the run: each that
	// cannot be read is removed, and a Warning says what that costs.
	if obs.attempts, err = record[runplan.RejoinAttempts](obs.cm, annRejoins); err != nil {
		if err := r.dropRecord(ctx, run, obs.cm, annRejoins, err, "RejoinRecordInvalid", "Rejoin",
			"the rejoins of lost ranks back off afresh"); err != nil {
			return nil, endWith(ctrl.Result{}, err)
		}
	}
	if obs.given, err = record[runplan.GivenAddresses](obs.cm, annAddresses); err != nil {
		if err := r.dropRecord(ctx, run, obs.cm, annAddresses, err, "AddressRecordInvalid", "Configure",
			"a pod that changes IP within this epoch is not noticed until the next"); err != nil {
			return nil, endWith(ctrl.Result{}, err)
		}
	}
	if _, err := record[*ebv1.FailoverStatus](obs.cm, annLastFailover); err != nil {
		if err := r.dropRecord(ctx, run, obs.cm, annLastFailover, err, "FailoverRecordInvalid", "Failover",
			"status.lastFailover is empty until the next failover"); err != nil {
			return nil, endWith(ctrl.Result{}, err)
		}
	}
	if in.fabric != nil {
		// A spare whose pod the kubelet refused, or whose builder fell
		// silent, cannot take a unit over.
		unusable := runplan.FailedSpares(obs.table, pods)
		maps.Copy(unusable, runplan.SilentSpares(obs.table, r.polls.Silences(p.key), p.now, r.UnreachableAfter))
		f := runplan.WithoutEndpoints(*in.fabric, unusable)
		obs.fabric = &f
		obs.endpoints = runplan.Endpoints(f)
	}
	// The builders are polled in the background (r.polls), and each poll
	// wakes the run: a reconcile folds a poll it has not seen yet into the
	// status, and decides on it.
	obs.poll = r.fresh(p.key, pods)
	obs.pollDue = obs.poll != nil
	return obs, goOn
}

// loadTable reads the run's published rank table; a nil ConfigMap and an
// empty table (epoch 0) when there is none yet.
func (r *EventBuilderRunReconciler) loadTable(ctx context.Context, run *ebv1.EventBuilderRun) (*corev1.ConfigMap, planner.RankTable, error) {
	cm := &corev1.ConfigMap{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: ranktable.ConfigMapName(run.Name)}, cm)
	if apierrors.IsNotFound(err) {
		return nil, planner.RankTable{}, nil
	}
	if err != nil {
		return nil, planner.RankTable{}, err
	}
	doc, err := ranktable.Parse(cm.Data[ranktable.Key])
	if err != nil {
		return nil, planner.RankTable{}, fmt.Errorf("ConfigMap %s: %w", cm.Name, err)
	}
	t, err := doc.Table()
	if err != nil {
		return nil, planner.RankTable{}, fmt.Errorf("ConfigMap %s: %w", cm.Name, err)
	}
	return cm, t, nil
}

// listPods returns the run's pods by rank.
func (r *EventBuilderRunReconciler) listPods(ctx context.Context, run *ebv1.EventBuilderRun) (map[int32]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(run.Namespace), client.MatchingLabels(builderpod.Selector(run.Name))); err != nil {
		return nil, err
	}
	pods := make(map[int32]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pod := &list.Items[i]
		if rank, ok := builderpod.Rank(pod); ok && metav1.IsControlledBy(pod, run) {
			pods[rank] = pod
		}
	}
	return pods, nil
}

// dropRecord removes a record annotation that cannot be read (readErr)
// from the rank-table ConfigMap, with a Warning event naming it, the
// parse error and what is lost with it.
func (r *EventBuilderRunReconciler) dropRecord(ctx context.Context, run *ebv1.EventBuilderRun, cm *corev1.ConfigMap,
	annotation string, readErr error, reason, action, consequence string) error {
	r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, reason, action, "%s: ignored and removed; %s", clip(readErr.Error()), consequence)
	delete(cm.Annotations, annotation)
	return r.Update(ctx, cm)
}
