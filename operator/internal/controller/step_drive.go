package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/lifecycle"
	"daq.io/eventbuilder/operator/internal/opmetrics"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/ranktable"
)

// driveBuilders configures the builders behind the table's epoch, then
// takes them to spec.state, in a batch in the background (commands.go)
// decided on this poll; a later reconcile reads what it did. A new table
// is handed over by the reconcile that published it, so a failover
// reaches the running builders without waiting for a poll.
func (p *runPass) driveBuilders(ctx context.Context, in *loadedRun, secret *corev1.Secret, obs *observedRun, plan *plannedRun,
	placed *placedRun) (*drivenRun, verdict) {
	out := &drivenRun{}
	if plan.stopped {
		return out, goOn
	}
	r, run, table, cm := p.r, in.run, placed.table, placed.cm
	ips := dataIPs(run, table, obs.pods, nil) // the pods left after syncPods
	decideOn, blind := plan.poll, false
	if placed.published {
		// A new table goes to every running builder at once, without
		// waiting for a poll: their answers to configure are the poll
		// (fresh whenever the batch runs, even queued behind another).
		decideOn, blind = &builderstatus.Poll{Time: p.now, Reports: map[int32]builderapi.Report{}}, true
	}
	// On a data network peers dial its addresses only (a pod's name
	// resolves on the pod network): nothing is configured until every
	// live rank has one (NetworksFound names those that do not).
	if run.Spec.Resources.Network != "" && slices.ContainsFunc(liveRanks(table), func(rank int32) bool { return ips[rank] == "" }) {
		decideOn = nil
	}
	if decideOn != nil && (placed.published || r.commands.accepts(p.key, decideOn.Time)) {
		doc, err := ranktable.Parse(cm.Data[ranktable.Key])
		if err != nil {
			return nil, endWith(ctrl.Result{}, fmt.Errorf("ConfigMap %s: %w", cm.Name, err))
		}
		// The addresses recorded are those drive puts in the table it sends.
		if g, changed := obs.given.Give(table.Epoch, ranktable.Dialable(ips), podUIDs(obs.pods)); changed {
			setRecord(cm, annAddresses, g)
			if err := r.Update(ctx, cm); err != nil {
				return nil, endWith(ctrl.Result{}, err)
			}
		}
		snapshot, token, epoch, pods, held := run.DeepCopy(), controlToken(secret), table.Epoch, obs.pods, placed.held
		decideOn = &builderstatus.Poll{Time: decideOn.Time, Pods: maps.Clone(decideOn.Pods), Reports: maps.Clone(decideOn.Reports)}
		batch := func(ctx context.Context) commandResult {
			configured, missing, sent, err := r.drive(ctx, snapshot, table, doc, pods, ips, held, decideOn, blind, token)
			return commandResult{kind: driveBatch, epoch: epoch, configured: configured, missing: missing, sent: sent, err: err}
		}
		if placed.published { // a new table: at once, or right after the batch running
			r.commands.queue(p.key, batch)
		} else {
			r.commands.submit(p.key, decideOn.Time, batch)
		}
	}
	// What the last drive of this table did (a later reconcile sees it).
	res, ok := r.commands.result(p.key)
	if !ok || res.kind != driveBatch || res.epoch != table.Epoch {
		setConfigured(run, table.Epoch, false, liveRanks(table))
		return out, goOn
	}
	out.controlErr = res.err
	setConfigured(run, table.Epoch, res.configured, res.missing)
	if res.configured {
		if err := r.recordConfigured(ctx, run, cm, table.Epoch, res.done); err != nil {
			return nil, endWith(ctrl.Result{}, err)
		}
	}
	return out, goOn
}

// drive sends the control commands the builders of table need (pure
// decisions in internal/lifecycle): configure to those behind its epoch
// (blind: to every running builder, whose state is not known), then what
// takes them to spec.state, to the builders whose pod runs (ips, by
// dataIPs). The builders' answers update poll's reports.
// It says whether every live builder now holds the epoch, which live
// ranks do not, and which builders refused or did not answer.
func (r *EventBuilderRunReconciler) drive(ctx context.Context, run *ebv1.EventBuilderRun, table planner.RankTable,
	doc ranktable.Document, pods map[int32]*corev1.Pod, ips map[int32]string, held map[int32]bool, poll *builderstatus.Poll, blind bool,
	token string) (configured bool, missing []int32, sent bool, err error) {
	var builders []lifecycle.Builder
	var live []int32
	urls := map[int32]string{}
	for _, rk := range table.Ranks {
		rank := int32(rk.Rank)
		if rk.Role == planner.Live {
			live = append(live, rank)
		}
		// A held pod (a planned move's, a dummy now) takes the new table
		// too: the set it builds with switches once every unit holds it.
		_, running := ips[rank]
		if pod := pods[rank]; !running && !(held[rank] && pod != nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "") {
			continue
		}
		b := lifecycle.Builder{Rank: rank, Live: rk.Role == planner.Live}
		if rep, ok := poll.Reports[rank]; ok {
			b.Report = &rep
		}
		builders = append(builders, b)
		urls[rank] = r.StatusURL(pods[rank])
	}
	doc = doc.WithIPs(ips)
	targets := func(ranks []int32) []builderapi.Builder {
		out := make([]builderapi.Builder, len(ranks))
		for i, rank := range ranks {
			out[i] = builderapi.Builder{Rank: rank, URL: urls[rank]}
		}
		return out
	}
	// merge takes the builders' answers as their latest reports.
	merge := func(reps builderapi.Reports) {
		for i := range builders {
			if rep, ok := reps[builders[i].Rank]; ok {
				builders[i].Report = &rep
				poll.Reports[builders[i].Rank] = rep
			}
		}
	}
	var errs []error
	announce := func(cmd builderapi.Command, reps builderapi.Reports, what string) {
		if len(reps) == 0 {
			return
		}
		ranks := slices.Sorted(maps.Keys(reps))
		r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, commandReason[cmd], string(cmd), "%s%s to %d builders (ranks %s)",
			cmd, what, len(reps), rankList(ranks))
	}

	ranks := lifecycle.ToConfigure(table.Epoch, builders)
	if blind {
		ranks = ranks[:0]
		for _, b := range builders {
			ranks = append(ranks, b.Rank)
		}
	}
	if len(ranks) > 0 {
		reps, err := r.Control.Configure(ctx, token, targets(ranks), doc)
		sent = true
		merge(reps)
		announce(builderapi.Configure, reps, fmt.Sprintf(" epoch %d", table.Epoch))
		errs = append(errs, err)
	}
	for _, step := range lifecycle.Drive(run.Spec.State, table.Epoch, builders, live) {
		reps, err := r.Control.Send(ctx, token, step.Command, targets(step.Ranks))
		sent = true
		merge(reps)
		announce(step.Command, reps, "")
		errs = append(errs, err)
	}
	configured, missing = lifecycle.Configured(table.Epoch, builders, live)
	return configured, missing, sent, errors.Join(errs...)
}

// setConfigured records whether every live builder holds the epoch.
func setConfigured(run *ebv1.EventBuilderRun, epoch int64, ok bool, missing []int32) {
	c := metav1.Condition{Type: ebv1.ConditionConfigured, Status: metav1.ConditionTrue, Reason: ebv1.ReasonEpochConfigured,
		Message: fmt.Sprintf("every live builder holds rank table epoch %d", epoch), ObservedGeneration: run.Generation}
	if !ok {
		c.Status, c.Reason = metav1.ConditionFalse, ebv1.ReasonConfiguring
		c.Message = fmt.Sprintf("builders of live ranks %s do not hold rank table epoch %d yet",
			rankList(missing), epoch)
	}
	meta.SetStatusCondition(&run.Status.Conditions, c)
}

// recordConfigured completes the last failover's record, if it is of
// epoch and not complete yet, with when every live builder had accepted
// the new table (done, when the batch that configured them ended): the
// failover's end to end duration.
func (r *EventBuilderRunReconciler) recordConfigured(ctx context.Context, run *ebv1.EventBuilderRun, cm *corev1.ConfigMap, epoch int64,
	done time.Time) error {
	fo, err := record[*ebv1.FailoverStatus](cm, annLastFailover)
	if err != nil || fo == nil {
		return err
	}
	if fo.Epoch != epoch || fo.ConfiguredTime != nil || fo.Outcome == ebv1.OutcomeStopped {
		return nil
	}
	t := metav1.NewMicroTime(done)
	fo.ConfiguredTime, fo.ConfiguredDuration = &t, &metav1.Duration{Duration: done.Sub(fo.ObservedTime.Time)}
	b, err := json.Marshal(fo)
	if err != nil {
		return err
	}
	cm.Annotations[annLastFailover] = string(b)
	if err := r.Update(ctx, cm); err != nil {
		return err
	}
	opmetrics.Configured(fo.ConfiguredDuration.Duration)
	r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, "FailoverConfigured", "Failover",
		"epoch %d configured on every live builder %s after the failure was observed; running builders switch to it without restarting",
		epoch, fo.ConfiguredDuration.Duration.Round(time.Millisecond))
	return nil
}

// liveRanks are the live ranks of t, in rank order.
func liveRanks(t planner.RankTable) []int32 {
	var out []int32
	for _, rk := range t.Ranks {
		if rk.Role == planner.Live {
			out = append(out, int32(rk.Rank))
		}
	}
	return out
}
