package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/buildercontrol"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/lifecycle"
	"daq.io/eventbuilder/operator/internal/opmetrics"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/ranktable"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// runPass is one reconcile of one run, step by step (reconcile): what it
// observed, the table it went on under, and what it drove, for the status.
// The decisions are runplan's and lifecycle's pure functions; the steps
// only gather their inputs and carry out their answers.
type runPass struct {
	r   *EventBuilderRunReconciler
	key types.NamespacedName
	now time.Time // when whatever this reconcile acts on was observed

	run, orig *ebv1.EventBuilderRun

	// The run's Fabric as its nodes are, less the spares whose pods the
	// kubelet refused (nil for a run without one).
	fabric    *planner.Fabric
	fabricKey string // the Fabric's UID and generation: an edit replans
	nodeList  []corev1.Node
	health    runplan.Nodes
	cordoned  map[string]bool
	graceLeft time.Duration // until a node in its NotReady grace period fails
	endpoints map[string]planner.Endpoint

	secret   *corev1.Secret
	pods     map[int32]*corev1.Pod
	cm       *corev1.ConfigMap // the rank table's; nil before the first plan
	table    planner.RankTable
	attempts runplan.RejoinAttempts
	given    runplan.GivenAddresses
	poll     *builderstatus.Poll // a poll to decide on; nil for none
	pollDue  bool                // a poll came that no reconcile has seen yet

	published     bool // this pass published table
	replanFailed  bool
	failedRejoins []int // ranks whose last rejoin this reconcile found did not hold
	stopped       bool  // failed with no spare left under failurePolicy Stop
	waiting       []runplan.Deferral
	held          map[int32]bool // ranks whose old pods build on until the set switched
	controlErr    error          // what the last drive of this table met
}

// A step's verdict: go on to the next step, or end the reconcile with
// result and err.
type verdict struct {
	end    bool
	result ctrl.Result
	err    error
}

var goOn = verdict{}

func endWith(result ctrl.Result, err error) verdict {
	return verdict{end: true, result: result, err: err}
}

// endWithStatus ends the reconcile once the status says what stopped it.
// Watches bring the run back when that changes; the resync keeps its
// observedTime current meanwhile (a run with no pods has no polls).
func (p *runPass) endWithStatus(ctx context.Context) verdict {
	return endWith(ctrl.Result{RequeueAfter: resyncPolls * p.r.PollInterval}, p.r.patchStatus(ctx, p.orig, p.run))
}

func (p *runPass) token() string { return string(p.secret.Data[builderpod.ControlTokenKey]) }

// load reads the run and, on a Fabric, the Fabric and the nodes.
func (p *runPass) load(ctx context.Context) verdict {
	r := p.r
	p.run = &ebv1.EventBuilderRun{}
	if err := r.Get(ctx, p.key, p.run); err != nil {
		if apierrors.IsNotFound(err) {
			r.polls.Forget(p.key)
			r.commands.forget(p.key)
			opmetrics.Forget(p.key.Namespace, p.key.Name)
		}
		return endWith(ctrl.Result{}, client.IgnoreNotFound(err))
	}
	if !p.run.DeletionTimestamp.IsZero() {
		// Pods, Service, ConfigMap and Secret carry owner references: the garbage collector removes them.
		return endWith(ctrl.Result{}, nil)
	}
	p.orig = p.run.DeepCopy()
	ref := p.run.Spec.FabricRef
	if ref == nil {
		return goOn
	}
	fab := &ebv1.Fabric{}
	if err := r.Get(ctx, client.ObjectKey{Name: ref.Name}, fab); apierrors.IsNotFound(err) {
		setPhase(p.run, ebv1.PhasePending, ebv1.ReasonFabricNotFound,
			fmt.Sprintf("spec.fabricRef: Fabric %q does not exist; create it or correct spec.fabricRef.name", ref.Name))
		return p.endWithStatus(ctx) // the Fabric watch brings the run back, the resync meanwhile
	} else if err != nil {
		return endWith(ctrl.Result{}, err)
	}
	var list corev1.NodeList
	if err := r.List(ctx, &list); err != nil {
		return endWith(ctrl.Result{}, err)
	}
	p.nodeList = list.Items
	nodes := runplan.NodeStates(list.Items)
	p.cordoned = runplan.CordonedNodes(list.Items)
	p.health, p.graceLeft = runplan.NodeHealth(list.Items, p.now, r.NodeNotReadyGrace)
	f := runplan.Fabric(&fab.Spec, nodes)
	p.fabric = &f
	p.fabricKey = fmt.Sprintf("%s/%d", fab.UID, fab.Generation)
	return goOn
}

// ensureObjects keeps the run's Service, NetworkPolicy and control Secret
// as they should be.
func (p *runPass) ensureObjects(ctx context.Context) verdict {
	r := p.r
	if err := r.ensureService(ctx, p.run); err != nil {
		return endWith(ctrl.Result{}, err)
	}
	if err := r.syncNetworkPolicy(ctx, p.run); err != nil {
		return endWith(ctrl.Result{}, err)
	}
	secret, err := r.ensureSecret(ctx, p.run)
	if err != nil {
		return endWith(ctrl.Result{}, err)
	}
	p.secret = secret
	return goOn
}

// observe reads the run's pods, its rank table and the records beside it,
// and the builders' poll to decide on.
func (p *runPass) observe(ctx context.Context) verdict {
	r := p.r
	pods, err := r.listPods(ctx, p.run)
	if err != nil {
		return endWith(ctrl.Result{}, err)
	}
	p.pods = pods
	r.polls.Track(p.key, r.pollTargets(pods), r.pollEvery(p.run))
	if p.cm, p.table, err = r.loadTable(ctx, p.run); err != nil {
		return endWith(ctrl.Result{}, err)
	}
	// Hand-edited or corrupt records must not wedge the run: each that
	// cannot be read is removed, and a Warning says what that costs.
	if p.attempts, err = record[runplan.RejoinAttempts](p.cm, annRejoins); err != nil {
		if err := r.dropRecord(ctx, p.run, p.cm, annRejoins, err, "RejoinRecordInvalid", "Rejoin",
			"the rejoins of lost ranks back off afresh"); err != nil {
			return endWith(ctrl.Result{}, err)
		}
	}
	if p.given, err = record[runplan.GivenAddresses](p.cm, annAddresses); err != nil {
		if err := r.dropRecord(ctx, p.run, p.cm, annAddresses, err, "AddressRecordInvalid", "Configure",
			"a pod that changes IP within this epoch is not noticed until the next"); err != nil {
			return endWith(ctrl.Result{}, err)
		}
	}
	if _, err := record[*ebv1.FailoverStatus](p.cm, annLastFailover); err != nil {
		if err := r.dropRecord(ctx, p.run, p.cm, annLastFailover, err, "FailoverRecordInvalid", "Failover",
			"status.lastFailover is empty until the next failover"); err != nil {
			return endWith(ctrl.Result{}, err)
		}
	}
	if p.fabric != nil {
		// A spare whose pod the kubelet refused cannot take a unit over.
		f := runplan.WithoutEndpoints(*p.fabric, runplan.FailedSpares(p.table, pods))
		p.fabric = &f
		p.endpoints = runplan.Endpoints(f)
	}
	// The builders are polled in the background (r.polls), and each poll
	// wakes the run: a reconcile folds a poll it has not seen yet into the
	// status, and decides on it.
	p.poll = r.fresh(p.key, pods)
	p.pollDue = p.poll != nil
	return goOn
}

// publish makes next the run's table, published in its ConfigMap.
func (p *runPass) publish(ctx context.Context, next planner.RankTable, rec *runplan.Recovery, planned bool, fabricKey string) error {
	cm, err := p.r.publish(ctx, p.run, p.cm, next, p.fabric, p.endpoints, rec, planned, fabricKey, p.now)
	if err != nil {
		return err
	}
	p.cm, p.table, p.published = cm, next, true
	if rec != nil {
		// Told at once: a step of this reconcile that fails after the
		// publish must not leave a failover unannounced and uncounted.
		p.r.announceFailover(p.run, cm, next, rec)
	}
	return nil
}

// plan decides the table the run goes on under: planned afresh (a new
// spec or Fabric), failed over to spares, with servers that came back
// offered as spares again, rejoined, or the same.
func (p *runPass) plan(ctx context.Context) verdict {
	r, run := p.r, p.run
	// A table planned before the operator recorded its Fabric is taken as
	// planned on the Fabric as it is.
	requested := p.cm == nil || p.cm.Annotations[annRequest] != runplan.RequestKey(&run.Spec)
	fabricEdited := p.fabric != nil && p.cm != nil && p.cm.Annotations[annFabric] != "" && p.cm.Annotations[annFabric] != p.fabricKey
	var planned planner.RankTable
	var planErr error
	if requested || fabricEdited {
		// Epochs never go back, even when the ConfigMap was deleted:
		// the status remembers the last one.
		planned, planErr = runplan.Plan(&run.Spec, p.fabric, max(p.table.Epoch, run.Status.Epoch))
	}
	// An edit the planner refuses must not stop watching over the run: it
	// goes on under its table, and the next edit is tried afresh.
	p.replanFailed = fabricEdited && !requested && planErr != nil
	if p.replanFailed {
		msg := fmt.Sprintf("Fabric %s changed (generation %d) but cannot be planned on: %v; the run goes on under rank table epoch %d: correct the Fabric",
			run.Spec.FabricRef.Name, fabricGeneration(p.fabricKey), planErr, p.table.Epoch)
		meta.SetStatusCondition(&run.Status.Conditions, metav1.Condition{Type: ebv1.ConditionFabricChanged,
			Status: metav1.ConditionFalse, Reason: ebv1.ReasonReplanFailed, Message: clip(msg), ObservedGeneration: run.Generation})
	}
	if p.fabric == nil && p.poll == nil && p.attempts.Due(p.now, r.RejoinBackoff) {
		p.poll = r.latest(p.key, p.pods) // a rejoin's back-off ended: decide on the latest poll
	}
	var v verdict
	switch {
	case requested || (fabricEdited && !p.replanFailed):
		v = p.replan(ctx, planned, planErr, fabricEdited)
	case p.fabric != nil && p.cm.Annotations[annStopped] == "":
		v = p.failOver(ctx)
	case p.fabric == nil && p.poll != nil && r.commands.accepts(p.key, p.poll.Time):
		v = p.rejoin(ctx)
	}
	if v.end {
		return v
	}
	if msg := p.cm.Annotations[annFabricReplan]; msg != "" && !p.replanFailed {
		meta.SetStatusCondition(&run.Status.Conditions, metav1.Condition{Type: ebv1.ConditionFabricChanged,
			Status: metav1.ConditionTrue, Reason: ebv1.ReasonReplanned, Message: msg, ObservedGeneration: run.Generation})
	}
	if p.cm.Annotations[annFabric] != p.fabricKey && !p.replanFailed {
		setOrDelete(p.cm.Annotations, annFabric, p.fabricKey)
		if err := r.Update(ctx, p.cm); err != nil {
			return endWith(ctrl.Result{}, err)
		}
	}
	p.stopped = p.cm.Annotations[annStopped] != ""
	return goOn
}

// replan publishes the table planned for a new spec or an edited Fabric;
// builders running a table of another size are stopped for it first.
func (p *runPass) replan(ctx context.Context, planned planner.RankTable, planErr error, fabricEdited bool) verdict {
	r, run := p.r, p.run
	if planErr != nil {
		setPhase(run, ebv1.PhasePending, ebv1.ReasonPlanFailed,
			"cannot plan spec.units and spec.spares on spec.fabricRef: "+planErr.Error()+"; lower spec.units or spec.spares, or bring the missing nodes back")
		return p.endWithStatus(ctx) // node and Fabric watches bring the run back
	}
	if p.cm != nil {
		// Builders may run the old table: one of another size reaches
		// them stopped. Decided on a poll taken since the last command.
		if p.poll == nil || !r.commands.accepts(p.key, p.poll.Time) {
			return endWith(ctrl.Result{}, nil) // the next poll (after the batch running) wakes the run
		}
		if resize := lifecycle.ResizeTo(planned.N(), reported(p.poll)); !resize.Ready() {
			return endWith(r.stopForResize(ctx, p.orig, run, p.table.N(), planned.N(), resize, p.pods, p.poll.Time, p.token()))
		}
	}
	msg := ""
	if fabricEdited {
		msg = fmt.Sprintf("Fabric %s changed (generation %d): the rank table was planned afresh at epoch %d",
			run.Spec.FabricRef.Name, fabricGeneration(p.fabricKey), planned.Epoch)
		p.cm.Annotations[annFabricReplan] = msg // p.cm exists: only a published table is edited
	}
	if err := p.publish(ctx, planned, nil, true, p.fabricKey); err != nil {
		return endWith(ctrl.Result{}, err)
	}
	p.attempts = runplan.RejoinAttempts{} // a new plan starts afresh
	if fabricEdited {
		r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, ebv1.ConditionFabricChanged, "Plan", msg)
	}
	r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, "RankTablePublished", "Plan",
		"rank table epoch %d: %d ranks, %d live, %d spare, %d dummy", p.table.Epoch, p.table.N(),
		p.table.Count(planner.Live), p.table.Count(planner.Spare), p.table.Count(planner.Dummy))
	return goOn
}

// failOver moves the units that failed, or are about to, to spares, and
// offers servers that came back as spares again.
func (p *runPass) failOver(ctx context.Context) verdict {
	r, run, table := p.r, p.run, p.table
	// Nodes and pods first: a failure there fails over without
	// waiting for a poll. Then lost peers, from the builders' reports;
	// then builders silent for long, which no peer may be left to report.
	failures := runplan.Failures(table, p.endpoints, p.health, p.pods, nil)
	if len(failures) == 0 && p.pollDue {
		failures = runplan.Failures(table, p.endpoints, p.health, p.pods, p.poll.Reports)
		if len(failures) == 0 {
			failures = runplan.Unreachable(table, r.polls.Silences(p.key), p.now, r.UnreachableAfter,
				runplan.UpPeers(table, p.poll.Reports))
		}
	}
	// Units on a cordoned node move before a drain may evict them (the
	// run's PodDisruptionBudget holds it meanwhile), each planned move
	// once the set switched to the last failover's table, or that had
	// its time (a paused set switches nothing).
	lastMove, _ := record[*ebv1.FailoverStatus](p.cm, annLastFailover) // checked in observe
	if !runplan.SwitchPending(table, lastMove, run.Status.Units, p.now, switchHold) {
		failures = append(failures, runplan.Draining(table, p.endpoints, p.cordoned, failures)...)
		if run.Spec.NUMAPolicy == ebv1.NUMAFailOver && p.pollDue {
			failures = append(failures, runplan.Misaligned(table, p.poll.Reports, failures)...)
		}
		if run.Spec.OutputStallPolicy == ebv1.OutputStallMoveBU && p.pollDue {
			failures = append(failures, runplan.OutputStalls(table, p.poll.Reports, runplan.OutputStallAfter(&run.Spec), failures)...)
		}
	}
	next, err := runplan.Recover(*p.fabric, table, failures, run.Spec.FailurePolicy)
	if err != nil {
		// Said in the status, not only in the log: nothing fails over
		// until the Fabric describes the table again (retried meanwhile).
		setPhase(run, ebv1.PhaseDegraded, ebv1.ReasonFailoverFailed, clip(fmt.Sprintf(
			"units failed but cannot be moved: correct Fabric %s so that it describes the run's table again, or change the run to replan it: %s",
			run.Spec.FabricRef.Name, strings.ReplaceAll(err.Error(), "\n", "; "))))
		return endWith(ctrl.Result{}, errors.Join(err, p.r.patchStatus(ctx, p.orig, run)))
	}
	r.announceHeld(run, next.Held)
	if len(next.Moves) > 0 {
		err = p.publish(ctx, next.Table, &next, false, "")
	} else if more, added := r.replenish(*p.fabric, table, run, p.cm, p.nodeList, p.endpoints, p.cordoned); len(added) > 0 {
		err = p.publish(ctx, more, nil, false, "")
	}
	if err != nil {
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
func (p *runPass) rejoin(ctx context.Context) verdict {
	r, run := p.r, p.run
	d := runplan.DecideRejoins(p.table, p.poll.Reports, p.attempts, p.now, r.RejoinBackoff)
	p.attempts = d.Attempts
	switch {
	case len(d.Now) > 0 && len(d.Reset) > 0:
		// Nothing is published: the rejoin epoch must not reach a
		// builder still in its session. The reset goes out in the
		// background; a poll after it decides again.
		r.resetLost(p.key, run, d.Reset, p.pods, p.poll.Time, p.token())
		if res, ok := r.commands.result(p.key); ok && res.kind == resetBatch && res.err != nil {
			setPhase(run, ebv1.PhasePending, ebv1.ReasonControlFailed, clip(res.err.Error())+
				"; the rejoin waits until every lost builder still running its session is reset")
			return p.endWithStatus(ctx)
		}
		return endWith(ctrl.Result{}, nil)
	case len(d.Now) > 0:
		next := runplan.Rejoin(p.table, d.Now)
		setRejoinAttempts(p.cm, p.attempts)
		if err := p.publish(ctx, next.Table, &next, false, ""); err != nil {
			return endWith(ctrl.Result{}, err)
		}
	case d.Changed:
		setRejoinAttempts(p.cm, p.attempts)
		if err := r.Update(ctx, p.cm); err != nil {
			return endWith(ctrl.Result{}, err)
		}
	}
	p.failedRejoins = d.Failed
	return goOn
}

// placePods takes back, by a new epoch, ranks whose pods answer from
// another address than their peers were given, checks what the table needs
// of nodes and networks, keeps the disruption budget at the table's size,
// and makes the pods the table asks for.
func (p *runPass) placePods(ctx context.Context) verdict {
	r, run := p.r, p.run
	unattached := map[int32]error{} // running pods without a data address, and why
	found := dataIPs(run, p.table, p.pods, unattached)
	// A rank whose pod answers from another IP than its peers were given
	// (a node restart recreates its pods' sandboxes) is taken back by a new
	// epoch carrying the addresses as they are: the others dial the old one.
	if p.poll != nil && !p.published && !p.stopped && r.commands.accepts(p.key, p.poll.Time) {
		if moved := runplan.MovedAddresses(p.table, p.given, ranktable.Dialable(found), podUIDs(p.pods), p.poll.Reports); len(moved) > 0 {
			next := runplan.Readdress(p.table, moved)
			if err := p.publish(ctx, next.Table, &next, false, ""); err != nil {
				return endWith(ctrl.Result{}, err)
			}
		}
	}
	p.waiting = p.attempts.Waiting(p.now, r.RejoinBackoff)
	r.announceDeferrals(run, p.waiting, p.failedRejoins)

	if p.fabric != nil {
		r.checkResources(run, p.table, p.endpoints, p.nodeList)
	}
	if err := r.checkNetworks(ctx, run, p.table, p.endpoints, p.pods, unattached); err != nil {
		return endWith(ctrl.Result{}, err)
	}
	if err := r.syncDisruptionBudget(ctx, run, p.fabric != nil, int32(p.table.N())); err != nil {
		return endWith(ctrl.Result{}, err)
	}
	// A planned move's old pods build on until the set switched.
	lastMove, _ := record[*ebv1.FailoverStatus](p.cm, annLastFailover) // checked in observe
	p.held = runplan.HeldForSwitch(p.table, lastMove, run.Status.Units, p.now, switchHold)
	if err := r.syncPods(ctx, run, p.table, p.endpoints, p.cordoned, p.pods, p.held, !p.stopped, string(p.secret.UID)); err != nil {
		var create *podCreateError
		if errors.As(err, &create) {
			// Quota, admission policy or an invalid resource name: say so
			// in the status, not only in the operator's log.
			setPhase(run, ebv1.PhasePending, ebv1.ReasonPodCreateFailed, create.Error())
			if perr := r.patchStatus(ctx, p.orig, run); perr != nil {
				return endWith(ctrl.Result{}, errors.Join(err, perr))
			}
		}
		return endWith(ctrl.Result{}, err)
	}
	return goOn
}

// driveBuilders configures the builders behind the table's epoch, then
// takes them to spec.state, in a batch in the background (commands.go)
// decided on this poll; a later reconcile reads what it did. A new table
// is handed over by the reconcile that published it, so a failover
// reaches the running builders without waiting for a poll.
func (p *runPass) driveBuilders(ctx context.Context) verdict {
	if p.stopped {
		return goOn
	}
	r, run, table := p.r, p.run, p.table
	ips := dataIPs(run, table, p.pods, nil) // the pods left after syncPods
	decideOn, blind := p.poll, false
	if p.published {
		// A new table goes to every running builder at once, without
		// waiting for a poll: their answers to configure are the poll
		// (fresh whenever the batch runs, even queued behind another).
		decideOn, blind = &builderstatus.Poll{Time: p.now, Reports: map[int32]builderstatus.Report{}}, true
	}
	// On a data network peers dial its addresses only (a pod's name
	// resolves on the pod network): nothing is configured until every
	// live rank has one (NetworksFound names those that do not).
	if run.Spec.Resources.Network != "" && slices.ContainsFunc(liveRanks(table), func(rank int32) bool { return ips[rank] == "" }) {
		decideOn = nil
	}
	if decideOn != nil && (p.published || r.commands.accepts(p.key, decideOn.Time)) {
		doc, err := ranktable.Parse(p.cm.Data[ranktable.Key])
		if err != nil {
			return endWith(ctrl.Result{}, fmt.Errorf("ConfigMap %s: %w", p.cm.Name, err))
		}
		// The addresses recorded are those drive puts in the table it sends.
		if g, changed := p.given.Give(table.Epoch, ranktable.Dialable(ips), podUIDs(p.pods)); changed {
			setRecord(p.cm, annAddresses, g)
			if err := r.Update(ctx, p.cm); err != nil {
				return endWith(ctrl.Result{}, err)
			}
		}
		snapshot, token, epoch, pods, held := run.DeepCopy(), p.token(), table.Epoch, p.pods, p.held
		decideOn = &builderstatus.Poll{Time: decideOn.Time, Pods: maps.Clone(decideOn.Pods), Reports: maps.Clone(decideOn.Reports)}
		batch := func(ctx context.Context) commandResult {
			configured, missing, sent, err := r.drive(ctx, snapshot, table, doc, pods, ips, held, decideOn, blind, token)
			return commandResult{kind: driveBatch, epoch: epoch, configured: configured, missing: missing, sent: sent, err: err}
		}
		if p.published { // a new table: at once, or right after the batch running
			r.commands.queue(p.key, batch)
		} else {
			r.commands.submit(p.key, decideOn.Time, batch)
		}
	}
	// What the last drive of this table did (a later reconcile sees it).
	res, ok := r.commands.result(p.key)
	if !ok || res.kind != driveBatch || res.epoch != table.Epoch {
		setConfigured(run, table.Epoch, false, liveRanks(table))
		return goOn
	}
	p.controlErr = res.err
	setConfigured(run, table.Epoch, res.configured, res.missing)
	if res.configured {
		if err := r.recordConfigured(ctx, run, p.cm, table.Epoch, res.done); err != nil {
			return endWith(ctrl.Result{}, err)
		}
	}
	return goOn
}

// report folds the poll into the status, says the run's phase, and when
// to look again: polls wake the run; timers of its own (a node's grace, a
// rejoin's back-off) and, as a safety net, a slow resync.
func (p *runPass) report(ctx context.Context) (ctrl.Result, error) {
	r, run, table := p.r, p.run, p.table
	var units []builderstatus.Unit
	for _, rk := range table.Ranks {
		if rk.Role != planner.Live {
			continue
		}
		u := builderstatus.Unit{Rank: int32(rk.Rank)}
		if pod := p.pods[u.Rank]; pod != nil {
			u.Pod, u.Node, u.Ready = pod.Name, pod.Spec.NodeName, podReady(pod)
		}
		units = append(units, u)
	}
	s := builderstatus.Aggregate(&run.Status, units, p.poll, run.Spec.State, r.StallAfter)
	st := &run.Status
	st.Units, st.ReadyUnits = s.Units, s.ReadyUnits
	st.EventsBuilt, st.EventsIncomplete, st.EventsDropped, st.BytesBuilt = s.EventsBuilt, s.EventsIncomplete, s.EventsDropped, s.BytesBuilt
	st.Consumed = s.Consumed
	st.EventRate, st.ThroughputGbps, st.LastSampleTime = s.EventRate, s.ThroughputGbps, s.LastSampleTime
	st.Epoch, st.RankCount, st.LiveUnits = table.Epoch, int32(table.N()), runplan.LiveUnits(table)
	st.RunNumber, st.Partition = run.Spec.RunNumber, run.Spec.Partition
	st.SparesLeft = runplan.SparesLeft(table, p.endpoints)
	st.Ranks = rankStatus(table, p.endpoints, p.pods, p.poll, p.orig.Status.Ranks)
	if c, ok := runplan.NUMAAlignment(st.Ranks, run.Generation); ok {
		meta.SetStatusCondition(&st.Conditions, c)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, ebv1.ConditionNUMAAligned)
	}
	if p.poll != nil {
		if c, ok := runplan.OutputsFlowing(table, p.poll.Reports, runplan.OutputStallAfter(&run.Spec), run.Spec.OutputStallPolicy, run.Generation); ok {
			meta.SetStatusCondition(&st.Conditions, c)
		}
	}
	streamsLost := r.checkReadout(run, p.fabric, table, p.cm)
	var err error
	if st.LastFailover, err = record[*ebv1.FailoverStatus](p.cm, annLastFailover); err != nil {
		return ctrl.Result{}, err
	}
	p.setPhase(s, streamsLost)
	opmetrics.Run(run.Namespace, run.Name, opmetrics.RunState{Epoch: st.Epoch, Spares: run.Spec.Spares,
		SparesLeft: st.SparesLeft, Phase: string(st.Phase), MinEventRate: run.Spec.MinEventRate})

	if err := r.patchStatus(ctx, p.orig, run); err != nil {
		return ctrl.Result{}, err
	}
	requeue := resyncPolls * r.PollInterval
	if p.graceLeft > 0 && p.graceLeft < requeue {
		requeue = p.graceLeft
	}
	for _, w := range p.waiting {
		requeue = min(requeue, w.Until.Sub(p.now))
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// setPhase says the run's phase: the builders' (s), unless the run is
// stopped, its control failed, units or readout streams are missing.
func (p *runPass) setPhase(s builderstatus.Summary, streamsLost string) {
	run, st := p.run, &p.run.Status
	var berrs *buildercontrol.Errors
	switch {
	case p.stopped:
		setPhase(run, ebv1.PhaseFailed, ebv1.ReasonNoSpareLeft, fmt.Sprintf(
			"units failed with no spare left and spec.failurePolicy is Stop, so the run is stopped (%s); "+
				"bring nodes back or add spares, then delete ConfigMap %s or change spec.units or spec.spares to replan",
			p.cm.Annotations[annStopped], p.cm.Name))
	case p.controlErr != nil && s.Phase != ebv1.PhaseFailed && errors.As(p.controlErr, &berrs) && berrs.Unauthorized():
		setPhase(run, ebv1.PhaseFailed, ebv1.ReasonControlUnauthorized, clip(p.controlErr.Error())+fmt.Sprintf(
			"; the builders must run with the token of Secret %s (--token-file %s): delete their pods to restart them with it",
			builderpod.ControlSecretName(run.Name), builderpod.ControlTokenPath))
	case p.controlErr != nil && s.Phase != ebv1.PhaseFailed:
		setPhase(run, ebv1.PhasePending, ebv1.ReasonControlFailed, clip(p.controlErr.Error()))
	case s.Phase == ebv1.PhaseRunning && st.LiveUnits < run.Spec.Units:
		setPhase(run, ebv1.PhaseDegraded, ebv1.ReasonUnitsLost, fmt.Sprintf(
			"%d of spec.units %d units are building; the others failed with no spare left (spec.failurePolicy RunDegraded)",
			st.LiveUnits, run.Spec.Units))
	case s.Phase == ebv1.PhaseRunning && streamsLost != "":
		setPhase(run, ebv1.PhaseDegraded, ebv1.ReasonStreamsUnread, clip(streamsLost))
	default:
		setPhase(run, s.Phase, s.Reason, s.Message+waitingNote(p.waiting))
	}
}
