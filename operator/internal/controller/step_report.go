package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/opmetrics"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/runplan"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// report folds the poll into the status, says the run's phase, and when
// to look again: polls wake the run; timers of its own (a node's grace, a
// rejoin's back-off) and, as a safety net, a slow resync.
func (p *runPass) report(ctx context.Context, in *loadedRun, obs *observedRun, plan *plannedRun, placed *placedRun,
	driven *drivenRun) (ctrl.Result, error) {
	r, run, table, poll := p.r, in.run, placed.table, plan.poll
	var units []builderstatus.Unit
	for _, rk := range table.Ranks {
		if rk.Role != planner.Live {
			continue
		}
		u := builderstatus.Unit{Rank: int32(rk.Rank)}
		if pod := obs.pods[u.Rank]; pod != nil {
			u.Pod, u.Node, u.Ready = pod.Name, pod.Spec.NodeName, runplan.PodReady(pod)
		}
		units = append(units, u)
	}
	s := builderstatus.Aggregate(&run.Status, units, poll, run.Spec.State, r.StallAfter)
	st := &run.Status
	st.Units, st.ReadyUnits = s.Units, s.ReadyUnits
	st.EventsBuilt, st.EventsIncomplete, st.EventsDropped, st.BytesBuilt = s.EventsBuilt, s.EventsIncomplete, s.EventsDropped, s.BytesBuilt
	st.Consumed = s.Consumed
	st.EventRate, st.ThroughputGbps, st.LastSampleTime = s.EventRate, s.ThroughputGbps, s.LastSampleTime
	st.Epoch, st.RankCount, st.LiveUnits = table.Epoch, int32(table.N()), runplan.LiveUnits(table)
	st.RunNumber, st.Partition = run.Spec.RunNumber, run.Spec.Partition
	st.SparesLeft = runplan.SparesLeft(table, obs.endpoints)
	st.Ranks = rankStatus(table, obs.endpoints, obs.pods, poll, in.orig.Status.Ranks)
	if c, ok := runplan.NUMAAlignment(st.Ranks, run.Generation); ok {
		meta.SetStatusCondition(&st.Conditions, c)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, ebv1.ConditionNUMAAligned)
	}
	if poll != nil {
		if c, ok := runplan.OutputsFlowing(table, poll.Reports, runplan.OutputStallAfter(&run.Spec), run.Spec.OutputStallPolicy, run.Generation); ok {
			meta.SetStatusCondition(&st.Conditions, c)
		}
	}
	streamsLost := r.checkReadout(run, obs.fabric, table, placed.cm)
	var err error
	if st.LastFailover, err = record[*ebv1.FailoverStatus](placed.cm, annLastFailover); err != nil {
		return ctrl.Result{}, err
	}
	reportPhase(run, s, phaseCauses{stopped: plan.stopped, cm: placed.cm, controlErr: driven.controlErr, waiting: placed.waiting,
		streamsLost: streamsLost})
	opmetrics.Run(run.Namespace, run.Name, opmetrics.RunState{Epoch: st.Epoch, Spares: run.Spec.Spares,
		SparesLeft: st.SparesLeft, Phase: string(st.Phase), MinEventRate: run.Spec.MinEventRate})

	if err := r.patchStatus(ctx, in.orig, run); err != nil {
		return ctrl.Result{}, err
	}
	requeue := resyncPolls * r.PollInterval
	if in.graceLeft > 0 && in.graceLeft < requeue {
		requeue = in.graceLeft
	}
	for _, w := range placed.waiting {
		requeue = min(requeue, w.Until.Sub(p.now))
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// phaseCauses are what, besides the builders, decides a run's phase.
type phaseCauses struct {
	stopped     bool              // by failurePolicy Stop, as cm records
	cm          *corev1.ConfigMap // the rank table's
	controlErr  error
	waiting     []runplan.Deferral
	streamsLost string // why the readout is incomplete (checkReadout); "" when it is not
}

// reportPhase says the run's phase: the builders' (s), unless the run is
// stopped, its control failed, units or readout streams are missing.
func reportPhase(run *ebv1.EventBuilderRun, s builderstatus.Summary, c phaseCauses) {
	st := &run.Status
	var berrs *builderapi.Errors
	switch {
	case c.stopped:
		setPhase(run, ebv1.PhaseFailed, ebv1.ReasonNoSpareLeft, fmt.Sprintf(
			"units failed with no spare left and spec.failurePolicy is Stop, so the run is stopped (%s); "+
				"bring nodes back or add spares, then delete ConfigMap %s or change spec.units or spec.spares to replan",
			c.cm.Annotations[annStopped], c.cm.Name))
	case c.controlErr != nil && s.Phase != ebv1.PhaseFailed && errors.As(c.controlErr, &berrs) && berrs.Unauthorized():
		setPhase(run, ebv1.PhaseFailed, ebv1.ReasonControlUnauthorized, clip(c.controlErr.Error())+fmt.Sprintf(
			"; the builders must run with the token of Secret %s (--token-file %s): delete their pods to restart them with it",
			builderpod.ControlSecretName(run.Name), builderpod.ControlTokenPath))
	case c.controlErr != nil && s.Phase != ebv1.PhaseFailed:
		setPhase(run, ebv1.PhasePending, ebv1.ReasonControlFailed, clip(c.controlErr.Error()))
	case s.Phase == ebv1.PhaseRunning && st.LiveUnits < run.Spec.Units:
		setPhase(run, ebv1.PhaseDegraded, ebv1.ReasonUnitsLost, fmt.Sprintf(
			"%d of spec.units %d units are building; the others failed with no spare left (spec.failurePolicy RunDegraded)",
			st.LiveUnits, run.Spec.Units))
	case s.Phase == ebv1.PhaseRunning && c.streamsLost != "":
		setPhase(run, ebv1.PhaseDegraded, ebv1.ReasonStreamsUnread, clip(c.streamsLost))
	default:
		setPhase(run, s.Phase, s.Reason, s.Message+waitingNote(c.waiting))
	}
}

// checkReadout says, in condition ReadoutComplete and a Warning event when
// that changes, which readout streams of the run's Fabric no RU reads; it
// returns why the run is Degraded when a failure left streams unread. cm
// holds table t, and the streams it lists unread.
func (r *EventBuilderRunReconciler) checkReadout(run *ebv1.EventBuilderRun, fabric *planner.Fabric, t planner.RankTable, cm *corev1.ConfigMap) string {
	c, degraded, ok := runplan.Readout(fabric, t, unreadStreams(cm), run.Spec.Builder.IncompleteEvents, run.Generation)
	if !ok {
		meta.RemoveStatusCondition(&run.Status.Conditions, ebv1.ConditionReadoutComplete)
		return ""
	}
	r.setWarned(run, c, "Readout")
	return degraded
}

// waitingNote is what the Ready condition says of ranks whose rejoin waits.
func waitingNote(waiting []runplan.Deferral) string {
	if len(waiting) == 0 {
		return ""
	}
	return "; " + shortlist.Join(waiting, "; ", runplan.Deferral.String)
}

// rankStatus is the rank table as the status shows it, with the pod,
// builder state and RDMA port of every live and spare rank (carried over
// from prev when the builders were not polled).
func rankStatus(t planner.RankTable, endpoints map[string]planner.Endpoint, pods map[int32]*corev1.Pod,
	poll *builderstatus.Poll, prev []ebv1.RankStatus) []ebv1.RankStatus {
	last := map[int32]ebv1.RankStatus{}
	for _, p := range prev {
		last[p.Rank] = p
	}
	out := runplan.Ranks(t, endpoints)
	for i := range out {
		rk := &out[i]
		pod := pods[rk.Rank]
		if rk.Role == ebv1.RoleDummy || pod == nil {
			continue
		}
		rk.Pod, rk.State, rk.Transport, rk.NUMA = pod.Name, last[rk.Rank].State, last[rk.Rank].Transport, last[rk.Rank].NUMA
		if poll != nil {
			rep, ok := poll.Reports[rk.Rank]
			rk.State, rk.Transport = rep.State, rep.RankTransport()
			if ok { // where a builder runs does not change while it runs
				rk.NUMA = rep.RankNUMA()
			}
		}
	}
	return out
}
