package controller

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/opmetrics"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/ranktable"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// publish makes next the run's table, published in its ConfigMap (cur's,
// or a new one), and tells of the recovery rec that made it, if any, at
// once: a step of this reconcile that fails after the publish must not
// leave a failover unannounced and uncounted. On an error cur stays the
// run's table.
func (p *runPass) publish(ctx context.Context, run *ebv1.EventBuilderRun, obs *observedRun, cur runTable,
	next planner.RankTable, rec *runplan.Recovery, planned bool, fabricKey string) (runTable, error) {
	cm, err := p.r.writeTable(ctx, run, cur.cm, cur.table, next, obs.fabric, obs.endpoints, rec, planned, fabricKey, p.now)
	if err != nil {
		return cur, err
	}
	if rec != nil {
		p.r.announceFailover(run, cm, next, rec)
	}
	return runTable{cm: cm, table: next, published: true}, nil
}

// writeTable writes table t as the run's rank table, creating the ConfigMap
// or updating cm (optimistically locked: a concurrent writer makes this
// fail and the reconcile retry from the newer table). rec, when set, is
// the recovery that produced t from failures observed at observed: its
// record (status.lastFailover) is written in the same update as the
// table, so no crash or conflict can publish one without the other. A
// fresh plan (fresh) records the Fabric it was planned on (fabricKey, ""
// without one) in that update too. The table names the streams of fabric
// (nil without one) that no RU reads since a failure (unreadStreams),
// judged against its predecessor prev, the table cm holds, unless it is a
// new plan.
func (r *EventBuilderRunReconciler) writeTable(ctx context.Context, run *ebv1.EventBuilderRun, cm *corev1.ConfigMap,
	prev, t planner.RankTable, fabric *planner.Fabric, endpoints map[string]planner.Endpoint, rec *runplan.Recovery, fresh bool, fabricKey string,
	observed time.Time) (*corev1.ConfigMap, error) {
	fabricName := ""
	if run.Spec.FabricRef != nil {
		fabricName = run.Spec.FabricRef.Name
	}
	doc := ranktable.New(run.Name, fabricName, t, builderpod.Peers(run.Name, int32(t.N())), endpoints)
	doc.ResumeEvent = runplan.ResumeEvent(run.Status, observed)
	var before []string // a new plan starts afresh; a table that follows keeps what its predecessor lost
	var follows *planner.RankTable
	if cm != nil && !(rec == nil && fresh) {
		before, follows = unreadStreams(cm), &prev
	}
	doc.UnreadStreams = runplan.LostStreams(fabric, t, follows, before)
	data, err := doc.Marshal()
	if err != nil {
		return nil, err
	}
	if cm == nil {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: ranktable.ConfigMapName(run.Name), Namespace: run.Namespace,
			Labels: builderpod.Selector(run.Name), OwnerReferences: builderpod.OwnerRefs(run),
		}}
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[annRequest] = runplan.RequestKey(&run.Spec)
	delete(cm.Annotations, annStopped)
	switch {
	case rec == nil && fresh:
		// A new plan starts afresh, on the Fabric as it is now (recorded in
		// the same update: an operator restarted in between must not take
		// the Fabric for edited and plan again).
		delete(cm.Annotations, annLastFailover)
		delete(cm.Annotations, annRejoins)
		setOrDelete(cm.Annotations, annFabric, fabricKey)
	case rec != nil:
		done := time.Now()
		raw, err := json.Marshal(ebv1.FailoverStatus{
			ObservedTime: metav1.NewMicroTime(observed), CompletedTime: metav1.NewMicroTime(done),
			Duration: metav1.Duration{Duration: done.Sub(observed)}, Epoch: t.Epoch, Outcome: rec.Outcome, Moves: rec.Moves,
		})
		if err != nil {
			return nil, err
		}
		cm.Annotations[annLastFailover] = string(raw)
		if rec.Outcome == ebv1.OutcomeStopped {
			cm.Annotations[annStopped] = rec.Summary()
		}
	}
	cm.Data = map[string]string{ranktable.Key: data}
	if cm.ResourceVersion == "" {
		err = r.Create(ctx, cm)
	} else {
		err = r.Update(ctx, cm)
	}
	if err == nil {
		logf.FromContext(ctx).Info("published rank table", "configmap", cm.Name, "epoch", t.Epoch)
	}
	return cm, err
}

// announceFailover tells of a recovery once its table (with its record)
// is published, as an Event (Failover, or
// UnitRejoined when lost units rejoin on their own ranks). The new epoch
// reaches the running builders by configure (drive), without restarting
// them; recordConfigured completes the record when it has.
func (r *EventBuilderRunReconciler) announceFailover(run *ebv1.EventBuilderRun, cm *corev1.ConfigMap, t planner.RankTable, rec *runplan.Recovery) {
	var fo ebv1.FailoverStatus
	_ = json.Unmarshal([]byte(cm.Annotations[annLastFailover]), &fo) // written by publish just now
	for _, m := range rec.Moves {
		opmetrics.Failovers.WithLabelValues(m.Reason, rec.Outcome).Inc()
	}
	reason := "Failover"
	if rec.Outcome == ebv1.OutcomeRejoined {
		reason = "UnitRejoined"
	}
	// Related: the table just published, at its new resourceVersion. The
	// events API folds Events of the same type, reason, action and objects
	// into one series keeping the first note, so without it a second
	// failover within minutes showed only as a count on the first.
	r.Recorder.Eventf(run, cm, corev1.EventTypeWarning, reason, "Failover", "epoch %d, %s in %s: %s",
		t.Epoch, rec.Outcome, fo.Duration.Duration.Round(time.Millisecond), rec.Summary())
}
