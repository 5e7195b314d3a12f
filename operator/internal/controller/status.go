package controller

import (
	"context"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// setPhase records phase and the Ready condition for the current generation.
func setPhase(run *ebv1.EventBuilderRun, phase ebv1.RunPhase, reason, message string) {
	ready := metav1.ConditionFalse
	if phase == ebv1.PhaseRunning {
		ready = metav1.ConditionTrue
	}
	run.Status.Phase = phase
	run.Status.ObservedGeneration = run.Generation
	meta.SetStatusCondition(&run.Status.Conditions, metav1.Condition{
		Type:               ebv1.ConditionReady,
		Status:             ready,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: run.Generation,
	})
}

// patchStatus stamps run's status with the time and its pods' selector,
// writes it if it changed (a steady change only every
// StatusCountersInterval), then announces a change
// of phase or of the Ready condition's reason with an Event. The
// optimistic lock makes a patch computed from a stale cached run fail (and
// retry) rather than undo a newer status.
func (r *EventBuilderRunReconciler) patchStatus(ctx context.Context, orig, run *ebv1.EventBuilderRun) error {
	now := metav1.NewMicroTime(time.Now())
	run.Status.ObservedTime = &now
	run.Status.Selector = labels.SelectorFromSet(builderpod.Selector(run.Name)).String()
	if r.countersCanWait(&orig.Status, &run.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, run, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	was := meta.FindStatusCondition(orig.Status.Conditions, ebv1.ConditionReady)
	ready := meta.FindStatusCondition(run.Status.Conditions, ebv1.ConditionReady)
	if from, to := orig.Status.Phase, run.Status.Phase; from != to || was == nil || was.Reason != ready.Reason {
		kind := corev1.EventTypeNormal
		if to == ebv1.PhaseFailed || to == ebv1.PhaseDegraded {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(run, nil, kind, ready.Reason, "PhaseChange", "phase %s -> %s: %s", phaseName(from), to, ready.Message)
	}
	return nil
}

// countersCanWait says whether status may wait
// (builderstatus.CanWait with StatusCountersInterval).
func (r *EventBuilderRunReconciler) countersCanWait(written, status *ebv1.EventBuilderRunStatus) bool {
	return builderstatus.CanWait(written, status, r.StatusCountersInterval)
}

func phaseName(p ebv1.RunPhase) string {
	if p == "" {
		return "(new)"
	}
	return string(p)
}

// setWarned sets a condition, with a Warning event (its reason, the
// action, its message) when it turns False or says something new.
func (r *EventBuilderRunReconciler) setWarned(run *ebv1.EventBuilderRun, c metav1.Condition, action string) {
	if old := meta.FindStatusCondition(run.Status.Conditions, c.Type); c.Status == metav1.ConditionFalse && (old == nil || old.Message != c.Message) {
		r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, c.Reason, action, c.Message)
	}
	meta.SetStatusCondition(&run.Status.Conditions, c)
}

// clip bounds a message that an Event will carry (events.k8s.io refuses
// notes over 1024 characters).
func clip(msg string) string { return shortlist.Clip(msg, 700) }

// rankList names ranks for a message (a few, then how many more).
func rankList(ranks []int32) string {
	return shortlist.Join(ranks, ", ", func(r int32) string { return strconv.Itoa(int(r)) })
}
