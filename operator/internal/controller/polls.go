package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpoll"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/opmetrics"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// The reconciler's side of the background poller (builderpoll): what to
// poll, how often, and the polls as a reconcile may use them.

// wakeBuffer is how many wakes may wait for the controller's queue; a wake
// that finds it full is dropped (the run's next poll wakes it again).
const wakeBuffer = 1024

// resyncPolls: a run that no poll woke is reconciled every this many poll
// intervals anyway.
const resyncPolls = 5

// pollTargets are the pods whose builders may answer: running, with an
// address, not being deleted.
func (r *EventBuilderRunReconciler) pollTargets(pods map[int32]*corev1.Pod) []builderpoll.Target {
	targets := make([]builderpoll.Target, 0, len(pods))
	for rank, pod := range pods {
		if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		targets = append(targets, builderpoll.Target{Rank: rank, Pod: string(pod.UID), URL: r.StatusURL(pod), Ready: runplan.PodReady(pod)})
	}
	return targets
}

// pollEvery is how often run's builders are polled: every PollInterval,
// every quarter of it while the run converges (configure, start, a new
// table); the poller halves it while a builder is silent.
func (r *EventBuilderRunReconciler) pollEvery(run *ebv1.EventBuilderRun) time.Duration {
	if converging(run) {
		return r.PollInterval / 4
	}
	return r.PollInterval
}

// polled counts a poll's silent builders and wakes the run.
func (r *EventBuilderRunReconciler) polled(key types.NamespacedName, p *builderstatus.Poll) {
	opmetrics.PollsFailed.WithLabelValues(key.Namespace, key.Name).Add(float64(len(p.Pods) - len(p.Reports)))
	r.wakeRun(key)
}

// wakeRun queues a reconcile of the run.
func (r *EventBuilderRunReconciler) wakeRun(key types.NamespacedName) {
	select {
	case r.wake <- event.GenericEvent{Object: &ebv1.EventBuilderRun{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
	default:
	}
}

// commandsEnded follows a run's command batch: a poll at once, which wakes
// the run, when commands went out (the polls begun before are stale); else
// a wake, to read what the batch found.
func (r *EventBuilderRunReconciler) commandsEnded(key types.NamespacedName, res commandResult) {
	if res.sent {
		r.polls.Changed(key)
		return
	}
	r.wakeRun(key)
}

// fresh is the run's latest poll if no reconcile used it yet, with only
// the reports of pods that are still the ranks' pods; nil otherwise.
func (r *EventBuilderRunReconciler) fresh(key types.NamespacedName, pods map[int32]*corev1.Pod) *builderstatus.Poll {
	return current(r.polls.Fresh(key), pods)
}

// latest is the run's latest poll (nil before the first), as fresh.
func (r *EventBuilderRunReconciler) latest(key types.NamespacedName, pods map[int32]*corev1.Pod) *builderstatus.Poll {
	return current(r.polls.Latest(key), pods)
}

// heard are the nodes where a builder of the run answered its latest poll
// (runplan.Heard); none before the first.
func (r *EventBuilderRunReconciler) heard(key types.NamespacedName, pods map[int32]*corev1.Pod) map[string]bool {
	p := r.latest(key, pods)
	if p == nil {
		return nil
	}
	return runplan.Heard(pods, p.Reports)
}

// current drops from p the reports of pods that are no longer their
// ranks' pods (replaced, or gone since the poll).
func current(p *builderstatus.Poll, pods map[int32]*corev1.Pod) *builderstatus.Poll {
	if p == nil {
		return nil
	}
	for rank, uid := range p.Pods {
		if pod := pods[rank]; pod == nil || string(pod.UID) != uid {
			delete(p.Pods, rank)
			delete(p.Reports, rank)
		}
	}
	return p
}

// converging: the run is not (yet) where its spec asks, so every
// reconcile polls its builders and drives them.
func converging(run *ebv1.EventBuilderRun) bool {
	st := &run.Status
	if st.ObservedGeneration != run.Generation || !meta.IsStatusConditionTrue(st.Conditions, ebv1.ConditionConfigured) {
		return true
	}
	switch st.Phase {
	case ebv1.PhaseRunning, ebv1.PhaseDegraded, ebv1.PhasePaused, ebv1.PhaseStopped:
		return false
	}
	return true
}
