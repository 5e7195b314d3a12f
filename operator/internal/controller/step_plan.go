package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/lifecycle"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/runplan"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// plan decides the table the run goes on under: planned afresh (a new
// spec or Fabric), failed over to spares, with servers that came back
// offered as spares again, rejoined, or the same.
func (p *runPass) plan(ctx context.Context, in *loadedRun, secret *corev1.Secret, obs *observedRun) (*plannedRun, verdict) {
	r, run := p.r, in.run
	out := &plannedRun{runTable: obs.runTable, attempts: obs.attempts, poll: obs.poll}
	// A table planned before the operator recorded its Fabric is taken as
	// planned on the Fabric as it is.
	requested := obs.cm == nil || obs.cm.Annotations[annRequest] != runplan.RequestKey(&run.Spec)
	fabricEdited := obs.fabric != nil && obs.cm != nil && obs.cm.Annotations[annFabric] != "" && obs.cm.Annotations[annFabric] != in.fabricKey
	var planned planner.RankTable
	var planErr error
	if requested || fabricEdited {
		// Epochs never go back, even when the ConfigMap was deleted:
		// the status remembers the last one.
		planned, planErr = runplan.Plan(&run.Spec, obs.fabric, max(obs.table.Epoch, run.Status.Epoch))
	}
	// An edit the planner refuses must not stop watching over the run: it
	// goes on under its table, and the next edit is tried afresh.
	replanFailed := fabricEdited && !requested && planErr != nil
	if replanFailed {
		msg := fmt.Sprintf("Fabric %s changed (generation %d) but cannot be planned on: %v; the run goes on under rank table epoch %d: correct the Fabric",
			run.Spec.FabricRef.Name, fabricGeneration(in.fabricKey), planErr, obs.table.Epoch)
		meta.SetStatusCondition(&run.Status.Conditions, metav1.Condition{Type: ebv1.ConditionFabricChanged,
			Status: metav1.ConditionFalse, Reason: ebv1.ReasonReplanFailed, Message: clip(msg), ObservedGeneration: run.Generation})
	}
	if obs.fabric == nil && out.poll == nil && out.attempts.Due(p.now, r.RejoinBackoff) {
		out.poll = r.latest(p.key, obs.pods) // a rejoin's back-off ended: decide on the latest poll
	}
	var v verdict
	switch {
	case requested || (fabricEdited && !replanFailed):
		v = p.replan(ctx, in, secret, obs, out, planned, planErr, fabricEdited)
	case obs.fabric != nil && obs.cm.Annotations[annStopped] == "":
		v = p.failOver(ctx, in, obs, out)
	case obs.fabric == nil && out.poll != nil && r.commands.accepts(p.key, out.poll.Time):
		v = p.rejoin(ctx, in, secret, obs, out)
	}
	if v.end {
		return nil, v
	}
	if msg := out.cm.Annotations[annFabricReplan]; msg != "" && !replanFailed {
		meta.SetStatusCondition(&run.Status.Conditions, metav1.Condition{Type: ebv1.ConditionFabricChanged,
			Status: metav1.ConditionTrue, Reason: ebv1.ReasonReplanned, Message: msg, ObservedGeneration: run.Generation})
	}
	if out.cm.Annotations[annFabric] != in.fabricKey && !replanFailed {
		setOrDelete(out.cm.Annotations, annFabric, in.fabricKey)
		if err := r.Update(ctx, out.cm); err != nil {
			return nil, endWith(ctrl.Result{}, err)
		}
	}
	out.stopped = out.cm.Annotations[annStopped] != ""
	return out, goOn
}

// replan publishes the table planned for a new spec or an edited Fabric;
// builders running a table of another size are stopped for it first.
func (p *runPass) replan(ctx context.Context, in *loadedRun, secret *corev1.Secret, obs *observedRun, out *plannedRun,
	planned planner.RankTable, planErr error, fabricEdited bool) verdict {
	r, run := p.r, in.run
	if planErr != nil {
		setPhase(run, ebv1.PhasePending, ebv1.ReasonPlanFailed,
			"cannot plan spec.units and spec.spares on spec.fabricRef: "+planErr.Error()+"; lower spec.units or spec.spares, or bring the missing nodes back")
		return p.endWithStatus(ctx, in.orig, in.run) // node and Fabric watches bring the run back
	}
	if out.cm != nil {
		// Builders may run the old table: one of another size reaches
		// them stopped. Decided on a poll taken since the last command.
		if out.poll == nil || !r.commands.accepts(p.key, out.poll.Time) {
			return endWith(ctrl.Result{}, nil) // the next poll (after the batch running) wakes the run
		}
		if resize := lifecycle.ResizeTo(planned.N(), reported(out.poll)); !resize.Ready() {
			return endWith(r.stopForResize(ctx, in.orig, run, out.table.N(), planned.N(), resize, obs.pods, out.poll.Time, controlToken(secret)))
		}
	}
	msg := ""
	if fabricEdited {
		msg = fmt.Sprintf("Fabric %s changed (generation %d): the rank table was planned afresh at epoch %d",
			run.Spec.FabricRef.Name, fabricGeneration(in.fabricKey), planned.Epoch)
		out.cm.Annotations[annFabricReplan] = msg // out.cm exists: only a published table is edited
	}
	var err error
	if out.runTable, err = p.publish(ctx, run, obs, out.runTable, planned, nil, true, in.fabricKey); err != nil {
		return endWith(ctrl.Result{}, err)
	}
	out.attempts = runplan.RejoinAttempts{} // a new plan starts afresh
	if fabricEdited {
		r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, ebv1.ConditionFabricChanged, "Plan", msg)
	}
	r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, "RankTablePublished", "Plan",
		"rank table epoch %d: %d ranks, %d live, %d spare, %d dummy", out.table.Epoch, out.table.N(),
		out.table.Count(planner.Live), out.table.Count(planner.Spare), out.table.Count(planner.Dummy))
	return goOn
}

// failOver moves the units that failed, or are about to, to spares, and
// offers servers that came back as spares again.
func (p *runPass) failOver(ctx context.Context, in *loadedRun, obs *observedRun, out *plannedRun) verdict {
	r, run, table := p.r, in.run, out.table
	lastMove, _ := record[*ebv1.FailoverStatus](out.cm, annLastFailover) // checked in observe
	// Nodes and pods first: a failure there fails over without
	// waiting for a poll. Then lost peers, from the builders' reports
	// (units all lost to each other one at a time); then builders silent
	// for long, which no peer may be left to report.
	failures := runplan.Failures(table, obs.endpoints, in.health, obs.pods, nil)
	if len(failures) == 0 && obs.pollDue {
		failures = runplan.OneOfMutualLoss(table, obs.poll.Reports,
			runplan.Failures(table, obs.endpoints, in.health, obs.pods, obs.poll.Reports), lastMove)
		if len(failures) == 0 {
			failures = runplan.Unreachable(table, r.polls.Silences(p.key), p.now, r.UnreachableAfter,
				runplan.UpPeers(table, obs.poll.Reports))
		}
	}
	// Units on a cordoned node move before a drain may evict them (the
	// run's PodDisruptionBudget holds it meanwhile), each planned move
	// once the set switched to the last failover's table, or that had
	// its time (a paused set switches nothing).
	if !runplan.SwitchPending(table, lastMove, run.Status.Units, p.now, switchHold) {
		failures = append(failures, runplan.Draining(table, obs.endpoints, in.cordoned, failures)...)
		if run.Spec.NUMAPolicy == ebv1.NUMAFailOver && obs.pollDue {
			failures = append(failures, runplan.Misaligned(table, obs.poll.Reports, failures)...)
		}
		if run.Spec.OutputStallPolicy == ebv1.OutputStallMoveBU && obs.pollDue {
			failures = append(failures, runplan.OutputStalls(table, obs.poll.Reports, runplan.OutputStallAfter(&run.Spec), failures)...)
		}
	}
	next, err := runplan.Recover(*obs.fabric, table, failures, run.Spec.FailurePolicy)
	if err != nil {
		// Said in the status, not only in the log: nothing fails over
		// until the Fabric describes the table again (retried meanwhile).
		setPhase(run, ebv1.PhaseDegraded, ebv1.ReasonFailoverFailed, clip(fmt.Sprintf(
			"units failed but cannot be moved: correct Fabric %s so that it describes the run's table again, or change the run to replan it: %s",
			run.Spec.FabricRef.Name, strings.ReplaceAll(err.Error(), "\n", "; "))))
		return endWith(ctrl.Result{}, errors.Join(err, r.patchStatus(ctx, in.orig, run)))
	}
	r.announceHeld(run, next.Held)
	publish, rec := planner.RankTable{}, (*runplan.Recovery)(nil)
	if len(next.Moves) > 0 {
		publish, rec = next.Table, &next
	} else if more, added := r.replenish(*obs.fabric, table, run, out.cm, in.nodes, obs.endpoints, in.cordoned, r.heard(p.key, obs.pods), p.now); len(added) > 0 {
		publish = more
	} else if more, rehomed, err := r.rehome(*obs.fabric, table, run, obs.pods, runplan.SwitchPending(table, lastMove, run.Status.Units, p.now, switchHold)); err != nil {
		return endWith(ctrl.Result{}, err)
	} else if len(rehomed) > 0 {
		publish = more // before a restore, which could take a unit's home
	} else if more, restored, err := r.restore(*obs.fabric, table, run, obs.pods); err != nil {
		return endWith(ctrl.Result{}, err)
	} else if len(restored) > 0 {
		publish = more
	}
	if publish.Ranks == nil {
		return goOn
	}
	// Published with the table: the endpoints it vacates, with their
	// servers' boot IDs (runplan.Rebooted) and since when (runplan.Rested).
	prev, _ := record[map[string]runplan.Vacancy](out.cm, annVacancies)
	setRecord(out.cm, annVacancies, runplan.Vacancies(*obs.fabric, publish, runplan.BootIDs(in.nodes), prev, p.now, r.VacancyRest))
	if out.runTable, err = p.publish(ctx, run, obs, out.runTable, publish, rec, false, ""); err != nil {
		return endWith(ctrl.Result{}, err)
	}
	return goOn
}

// rejoin: with no spare to move to, a unit its peers lost rejoins on its
// own rank once its builder answers again, by the same table at the next
// epoch configured on every builder; again and again, backing off while
// its rejoins do not hold (each costs the set a join timeout of dropped
// events). A lost unit still in its session (a partition) is reset first,
// to join as a new process.
func (p *runPass) rejoin(ctx context.Context, in *loadedRun, secret *corev1.Secret, obs *observedRun, out *plannedRun) verdict {
	r, run := p.r, in.run
	d := runplan.DecideRejoins(out.table, out.poll.Reports, out.attempts, p.now, r.RejoinBackoff)
	out.attempts = d.Attempts
	switch {
	case len(d.Now) > 0 && len(d.Reset) > 0:
		// Nothing is published: the rejoin epoch must not reach a
		// builder still in its session. The reset goes out in the
		// background; a poll after it decides again.
		r.resetLost(p.key, run, d.Reset, obs.pods, out.poll.Time, controlToken(secret))
		if res, ok := r.commands.result(p.key); ok && res.kind == resetBatch && res.err != nil {
			setPhase(run, ebv1.PhasePending, ebv1.ReasonControlFailed, clip(res.err.Error())+
				"; the rejoin waits until every lost builder still running its session is reset")
			return p.endWithStatus(ctx, in.orig, in.run)
		}
		return endWith(ctrl.Result{}, nil)
	case len(d.Now) > 0:
		next := runplan.Rejoin(out.table, d.Now)
		setRejoinAttempts(out.cm, out.attempts)
		var err error
		if out.runTable, err = p.publish(ctx, run, obs, out.runTable, next.Table, &next, false, ""); err != nil {
			return endWith(ctrl.Result{}, err)
		}
	case d.Changed:
		setRejoinAttempts(out.cm, out.attempts)
		if err := r.Update(ctx, out.cm); err != nil {
			return endWith(ctrl.Result{}, err)
		}
	}
	out.failedRejoins = d.Failed
	return goOn
}

// replenish offers again as warm spares the endpoints of servers that came
// back after the run's last failover (runplan.Replenish): Ready again, or
// rebooted (a new boot ID) faster than they turned NotReady, or Ready and
// vacated for their rest (VacancyRest; the short one where a builder of
// the run answers: heard), or uncordoned; and says so.
func (r *EventBuilderRunReconciler) replenish(fabric planner.Fabric, t planner.RankTable, run *ebv1.EventBuilderRun,
	cm *corev1.ConfigMap, nodes []corev1.Node, endpoints map[string]planner.Endpoint, cordoned, heard map[string]bool, now time.Time) (planner.RankTable, []string) {
	fo, err := record[*ebv1.FailoverStatus](cm, annLastFailover)
	if err != nil || fo == nil {
		return t, nil
	}
	back := runplan.NodesBackSince(nodes, fo.ObservedTime.Time)
	maps.Copy(back, runplan.Uncordoned(fo, endpoints, cordoned))
	vacancies, _ := record[map[string]runplan.Vacancy](cm, annVacancies) // an unreadable record finds none back
	maps.Copy(back, runplan.Rebooted(fabric, vacancies, nodes))
	maps.Copy(back, runplan.Rested(fabric, vacancies, nodes, heard, now, r.VacancyRest))
	next, added := runplan.Replenish(fabric, t, run.Spec.Spares, back)
	if len(added) > 0 {
		r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, "SparesReplenished", "Plan",
			"rank table epoch %d: endpoints %s, whose servers came back, are warm spares again", next.Epoch, shortlist.Join(added, ", ", func(s string) string { return s }))
	}
	return next, added
}

// restore puts the units that failed with no spare left (RunDegraded)
// back onto warm spares that came since (planner.Restore: a server back,
// offered again by replenish, its spare pod Ready), and says so. A
// stopped run (failurePolicy Stop) restores nothing: its pods are gone.
func (r *EventBuilderRunReconciler) restore(fabric planner.Fabric, t planner.RankTable, run *ebv1.EventBuilderRun,
	pods map[int32]*corev1.Pod) (planner.RankTable, []planner.FailoverResult, error) {
	if run.Spec.FailurePolicy == ebv1.FailureStop || runplan.LiveUnits(t) >= run.Spec.Units || t.Count(planner.Spare) == 0 {
		return t, nil, nil
	}
	next, done, err := planner.Restore(runplan.WithoutEndpoints(fabric, runplan.ColdSpares(t, pods)), t, int(run.Spec.Units))
	if err != nil || len(done) == 0 {
		return t, nil, err
	}
	r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, "UnitsRestored", "Plan",
		"rank table epoch %d: units that had failed with no spare left run again: %s", next.Epoch,
		shortlist.Join(done, "; ", func(d planner.FailoverResult) string {
			return fmt.Sprintf("unit %d (%s) on spare %s (rank %d)", d.Unit, d.Function, d.SpareEndpoint, d.SpareRank)
		}))
	return next, done, nil
}

// rehome puts the units a failure moved off their readout back onto their
// own endpoints once those are warm spares again, their spare pods Ready
// (planner.Rehome: until then every event lacks their streams), and says
// so. Like a drain's move, it waits until the set switched to the last
// failover's table (pending), and a stopped run (failurePolicy Stop)
// moves nothing.
func (r *EventBuilderRunReconciler) rehome(fabric planner.Fabric, t planner.RankTable, run *ebv1.EventBuilderRun,
	pods map[int32]*corev1.Pod, pending bool) (planner.RankTable, []planner.FailoverResult, error) {
	if pending || run.Spec.FailurePolicy == ebv1.FailureStop || t.Count(planner.Spare) == 0 {
		return t, nil, nil
	}
	next, done, err := planner.Rehome(runplan.WithoutEndpoints(fabric, runplan.ColdSpares(t, pods)), t)
	if err != nil || len(done) == 0 {
		return t, nil, err
	}
	r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, "UnitsRehomed", "Plan",
		"rank table epoch %d: units read their own readout streams again: %s", next.Epoch,
		shortlist.Join(done, "; ", func(d planner.FailoverResult) string {
			return fmt.Sprintf("unit %d back on %s (rank %d) from %s (rank %d, a warm spare again)", d.Unit, d.SpareEndpoint,
				d.SpareRank, d.FailedEndpoint, d.FailedRank)
		}))
	return next, done, nil
}

// fabricGeneration is the generation in a Fabric key ("uid/generation").
func fabricGeneration(key string) int64 {
	_, gen, _ := strings.Cut(key, "/")
	n, _ := strconv.ParseInt(gen, 10, 64)
	return n
}

// announceHeld warns of units that should leave a cordoned node but have
// no spare to move to: the drain waits on the run's PodDisruptionBudget.
func (r *EventBuilderRunReconciler) announceHeld(run *ebv1.EventBuilderRun, held []ebv1.UnitMove) {
	if len(held) == 0 {
		return
	}
	r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, "DrainHeld", "Failover",
		"units on cordoned nodes have no spare to move to and keep running there: %s; PodDisruptionBudget %s holds the drain "+
			"until spec.spares gives them one, the node is uncordoned, or the run is deleted",
		shortlist.Join(held, ", ", func(m ebv1.UnitMove) string {
			return fmt.Sprintf("unit %d (rank %d, endpoint %s: %s)", m.Unit, m.FailedRank, m.FailedEndpoint, m.NoSpare)
		}), builderpod.DisruptionBudgetName(run.Name))
}

// reported are the builders that answered a poll, with their reports.
func reported(poll *builderstatus.Poll) []lifecycle.Builder {
	var out []lifecycle.Builder
	for rank, rep := range poll.Reports {
		out = append(out, lifecycle.Builder{Rank: rank, Report: &rep})
	}
	return out
}

// stopForResize stops the set (a batch in the background) before a table
// of another number of ranks is published (lifecycle.ResizeTo): the
// publish, the configure of the stopped builders and their start follow,
// on a poll after the stop, once every builder has ended its session.
func (r *EventBuilderRunReconciler) stopForResize(ctx context.Context, orig, run *ebv1.EventBuilderRun, from, to int,
	resize lifecycle.Resize, pods map[int32]*corev1.Pod, basis time.Time, token string) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(run)
	if targets := r.targets(pods, resize.Stop); len(targets) > 0 {
		snapshot := run.DeepCopy()
		r.commands.submit(key, basis, func(ctx context.Context) commandResult {
			reps, err := r.Control.Send(ctx, token, builderapi.Stop, targets)
			if len(reps) > 0 {
				r.Recorder.Eventf(snapshot, nil, corev1.EventTypeNormal, commandReason[builderapi.Stop], string(builderapi.Stop),
					"stop to %d builders (ranks %s): the set is started again on a table of %d ranks", len(reps), rankList(resize.Stop), to)
			}
			return commandResult{kind: resizeBatch, sent: true, err: err}
		})
	}
	waiting := append(slices.Clone(resize.Stop), resize.Ending...)
	slices.Sort(waiting)
	msg := fmt.Sprintf("stopping the set of %d ranks to start it again on a table of %d ranks: a running set cannot change its number of ranks; "+
		"waiting for ranks %s to end their session", from, to, rankList(waiting))
	if res, ok := r.commands.result(key); ok && res.kind == resizeBatch && res.err != nil {
		msg += "; the last stop failed: " + clip(res.err.Error())
	}
	setPhase(run, ebv1.PhasePending, ebv1.ReasonResizing, msg)
	return ctrl.Result{}, r.patchStatus(ctx, orig, run) // the stop's end (or the next poll) wakes the run
}

// resetLost sends reset to the builders of lost ranks that still run
// their session (runplan.RejoinDecision.Reset), in a batch in the
// background, before a rejoin epoch is configured on them: a poll after
// it finds them NOT_READY, the rejoin is published, and drive configures
// and starts them as it does a restarted process. A batch that failed is
// reported by the next reconcile, and the reset is tried again.
func (r *EventBuilderRunReconciler) resetLost(key client.ObjectKey, run *ebv1.EventBuilderRun, ranks []int,
	pods map[int32]*corev1.Pod, basis time.Time, token string) {
	lost := make([]int32, len(ranks))
	for i, rank := range ranks {
		lost[i] = int32(rank)
	}
	targets := r.targets(pods, lost)
	if len(targets) == 0 {
		return
	}
	snapshot := run.DeepCopy()
	r.commands.submit(key, basis, func(ctx context.Context) commandResult {
		reps, err := r.Control.Send(ctx, token, builderapi.Reset, targets)
		if len(reps) > 0 {
			r.Recorder.Eventf(snapshot, nil, corev1.EventTypeNormal, commandReason[builderapi.Reset], string(builderapi.Reset),
				"reset to %d builders (ranks %s): lost by their set, or alone having lost it, they still ran their session; they rejoin as new processes",
				len(reps), rankList(slices.Sorted(maps.Keys(reps))))
		}
		return commandResult{kind: resetBatch, sent: true, err: err}
	})
}

// setRejoinAttempts writes the record into cm's annotations (the caller
// updates cm); an empty record removes the annotation.
func setRejoinAttempts(cm *corev1.ConfigMap, attempts runplan.RejoinAttempts) {
	if len(attempts) == 0 {
		delete(cm.Annotations, annRejoins)
		return
	}
	setRecord(cm, annRejoins, attempts)
}
