// Package controller holds the EventBuilderRun reconciler. It stays thin:
// what objects to create comes from builderpod, what the status says from
// builderstatus; here are only the API calls that join them.
package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/buildercontrol"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderpoll"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/lifecycle"
	"daq.io/eventbuilder/operator/internal/opmetrics"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/ranktable"
	"daq.io/eventbuilder/operator/internal/runplan"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// switchHold bounds how long a planned move's old pods wait for the set to
// switch to the table that moved them (runplan.HeldForSwitch): the
// configure, a cycle boundary and the joiners' connections take seconds.
const switchHold = 30 * time.Second

// maxConcurrentCreates bounds the pods created at once per run: a
// 326-unit run must come up in seconds, without flooding the API server.
const maxConcurrentCreates = 32

// Annotations on the rank-table ConfigMap: what the table was planned for,
// whether the failure policy stopped the run, the last failover, and the
// rejoins of lost ranks that have not held yet (runplan.RejoinAttempts,
// JSON), and the pod IPs the epoch's builders were given
// (runplan.GivenAddresses, JSON). The ConfigMap is the operator's durable
// record of the run's table.
const (
	annRequest      = "eventbuilder.daq.io/planned-for"
	annStopped      = "eventbuilder.daq.io/stopped"
	annLastFailover = "eventbuilder.daq.io/last-failover"
	annRejoins      = "eventbuilder.daq.io/rejoin-attempts"
	annAddresses    = "eventbuilder.daq.io/given-addresses"
	// annFabric: the Fabric (UID and generation) the table was planned on.
	annFabric = "eventbuilder.daq.io/planned-on-fabric"
	// annFabricReplan: what the last replan for a Fabric edit did, the
	// message of condition FabricChanged. Published with the table it
	// describes, so a status write lost after it (a conflict) cannot lose
	// the condition: every reconcile sets it from here.
	annFabricReplan = "eventbuilder.daq.io/fabric-replan"
)

// EventBuilderRunReconciler plans a run's ranks (on its Fabric, if any),
// publishes the rank table, keeps one builder pod per live and spare rank,
// the run's headless Service and its control-token Secret, drives the
// builders through their control API (configure with the table's epoch,
// then start, pause, resume or stop as spec.state asks), moves failed
// units to warm spares by publishing and configuring a new epoch (without
// a fabric: takes lost units back on their own ranks by a new epoch of
// the same table), and folds the builders' reports into the run's status.
type EventBuilderRunReconciler struct {
	client.Client
	// APIReader reads the rank-table ConfigMap uncached: a failover must
	// start from the table last published, never from a stale copy.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Builders  *builderstatus.Client
	// Control is the builders' run-control API.
	Control buildercontrol.Control
	// NodeNotReadyGrace is how long a node's Ready condition may be False
	// before its units fail over; a node with Ready Unknown, being
	// deleted, or gone fails them at once.
	NodeNotReadyGrace time.Duration
	// StatusURL gives the base URL of a builder pod's HTTP API; tests
	// point it at emulated builders.
	StatusURL func(*corev1.Pod) string
	// PollInterval is how often the builders of a run are polled.
	PollInterval time.Duration
	// UnreachableAfter is how long a live unit's builder may leave the
	// operator's polls unanswered (runplan.MinUnreachablePolls in a row at
	// least), with no majority of its peers reporting it up, before it
	// fails over: its server may be gone with every peer that could report
	// it. Zero turns it off. While a builder is silent its run is polled
	// every half PollInterval.
	UnreachableAfter time.Duration
	// StallAfter is how long a live unit's event stream (its next_event)
	// may stand still while every builder is RUNNING before the run is
	// Degraded, reason UnitsNotBuilding, Ready False.
	StallAfter time.Duration
	// MaxConcurrent runs are reconciled at once (at least 1): a run whose
	// builders do not answer holds one worker for its timeouts.
	MaxConcurrent int
	// RejoinBackoff spaces the rejoins of a lost rank (runs without a
	// fabric) whose rejoins do not hold; zero fields are
	// runplan.DefaultRejoinBackoff's.
	RejoinBackoff runplan.RejoinBackoff
	// StatusCountersInterval is how often a steady run's status is written
	// when only its counters, rates and sample times changed
	// (builderstatus.SteadyChange); any other change is written at once.
	// Zero writes every change, and so every reconcile (observedTime).
	StatusCountersInterval time.Duration
	// ControlClients, when set, are the only pods a NetworkPolicy per run
	// lets reach the builders' HTTP port (the run's own pods alone reach
	// the data port); nil: no NetworkPolicy.
	ControlClients *builderpod.ControlClients

	// polls polls every run's builders in the background and wakes the
	// run after each poll (through wake).
	polls *builderpoll.Poller
	wake  chan event.GenericEvent
	// commands runs every run's control calls in the background (commands.go).
	commands *commander
}

// +kubebuilder:rbac:groups=eventbuilder.daq.io,resources=eventbuilderruns,verbs=get;list;watch
// +kubebuilder:rbac:groups=eventbuilder.daq.io,resources=eventbuilderruns/status,verbs=patch
// Owner references with blockOwnerDeletion need update on the owner's finalizers
// where the OwnerReferencesPermissionEnforcement admission plugin is on.
// +kubebuilder:rbac:groups=eventbuilder.daq.io,resources=eventbuilderruns/finalizers,verbs=update
// +kubebuilder:rbac:groups=eventbuilder.daq.io,resources=fabrics,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch;create
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list;watch;create;update;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=list;watch;create;update;delete
// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=network-attachment-definitions,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile drives one run towards its spec and refreshes its status. It
// requeues itself every PollInterval for as long as the run exists, since
// builders' counters change without any Kubernetes event.
func (r *EventBuilderRunReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	result, err := r.reconcile(ctx, req)
	if deletedDuringPass(err, req.NamespacedName) {
		return ctrl.Result{}, nil
	}
	return requeueOnConflict(result, err)
}

// reconcile loads what the run's decisions rest on, decides (runplan and
// lifecycle, pure), acts on the answers and reports: the steps of runPass,
// one after the other unless one ends the pass early.
func (r *EventBuilderRunReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &runPass{r: r, key: req.NamespacedName, now: time.Now()}
	opmetrics.Beat()
	for _, step := range []func(context.Context) verdict{
		p.load,          // the run; its Fabric and nodes
		p.ensureObjects, // its Service, PodDisruptionBudget, NetworkPolicy, control Secret
		p.observe,       // its pods, rank table, records and the builders' poll
		p.plan,          // the table it goes on under: planned, failed over, rejoined
		p.placePods,     // readdressed ranks, node and network checks, the pods
		p.driveBuilders, // configure and start or stop the builders, in the background
	} {
		if v := step(ctx); v.end {
			return v.result, v.err
		}
	}
	return p.report(ctx) // status, phase and metrics; when to look again
}

// replenish offers again as warm spares the endpoints of servers that came
// back after the run's last failover (runplan.Replenish), and says so.
func (r *EventBuilderRunReconciler) replenish(fabric planner.Fabric, t planner.RankTable, run *ebv1.EventBuilderRun,
	cm *corev1.ConfigMap, nodes []corev1.Node, endpoints map[string]planner.Endpoint, cordoned map[string]bool) (planner.RankTable, []string) {
	fo, err := record[*ebv1.FailoverStatus](cm, annLastFailover)
	if err != nil || fo == nil {
		return t, nil
	}
	back := runplan.NodesBackSince(nodes, fo.ObservedTime.Time)
	maps.Copy(back, runplan.Uncordoned(fo, endpoints, cordoned))
	next, added := runplan.Replenish(fabric, t, run.Spec.Spares, back)
	if len(added) > 0 {
		r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, "SparesReplenished", "Plan",
			"rank table epoch %d: endpoints %s, whose servers came back, are warm spares again", next.Epoch, shortlist.Join(added, ", ", func(s string) string { return s }))
	}
	return next, added
}

// fabricGeneration is the generation in a Fabric key ("uid/generation").
func fabricGeneration(key string) int64 {
	_, gen, _ := strings.Cut(key, "/")
	n, _ := strconv.ParseInt(gen, 10, 64)
	return n
}

// setOrDelete sets m[k] to v, or deletes k when v is empty.
func setOrDelete(m map[string]string, k, v string) {
	if v == "" {
		delete(m, k)
		return
	}
	m[k] = v
}

// checkResources says, in condition ResourcesOffered and a Warning event
// when that changes, whether every endpoint's node offers what the builder
// pod placed there asks for (runplan.Shortfalls): otherwise its pods would
// wait unscheduled, saying so only in their own events.
func (r *EventBuilderRunReconciler) checkResources(run *ebv1.EventBuilderRun, t planner.RankTable,
	endpoints map[string]planner.Endpoint, nodes []corev1.Node) {
	placed := runplan.Placements(t, endpoints)
	physical := cabled(endpoints)
	short := runplan.Shortfalls(placed, func(ep planner.Endpoint) corev1.ResourceList {
		return builderpod.Requests(run, placement(ep, physical))
	}, runplan.Allocatable(nodes))
	c := metav1.Condition{Type: ebv1.ConditionResourcesOffered, Status: metav1.ConditionTrue, Reason: ebv1.ReasonAllResourcesOffered,
		Message: fmt.Sprintf("the nodes of all %d endpoints in use offer what their builder pods ask for", len(placed)), ObservedGeneration: run.Generation}
	if len(short) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, ebv1.ReasonResourcesMissing
		c.Message = clip(shortlist.Join(short, "; ", runplan.Shortfall.String) +
			": their pods cannot be scheduled; start the device plugin that advertises them on those nodes, or correct spec.resources")
	}
	r.setWarned(run, c, "Preflight")
}

// setWarned sets a condition, with a Warning event (its reason, the
// action, its message) when it turns False or says something new.
func (r *EventBuilderRunReconciler) setWarned(run *ebv1.EventBuilderRun, c metav1.Condition, action string) {
	if old := meta.FindStatusCondition(run.Status.Conditions, c.Type); c.Status == metav1.ConditionFalse && (old == nil || old.Message != c.Message) {
		r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, c.Reason, action, c.Message)
	}
	meta.SetStatusCondition(&run.Status.Conditions, c)
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

// checkNetworks says, in condition NetworksFound and a Warning event when
// that changes, whether every NetworkAttachmentDefinition the run's pods
// attach (spec.resources.network, per NUMA node) exists: otherwise Multus
// leaves them ContainerCreating, saying so only in their own events. Then
// whether every running pod has its address on the network, which is its
// data address (unattached: those that have none, and why, from dataIPs).
func (r *EventBuilderRunReconciler) checkNetworks(ctx context.Context, run *ebv1.EventBuilderRun, t planner.RankTable,
	endpoints map[string]planner.Endpoint, pods map[int32]*corev1.Pod, unattached map[int32]error) error {
	if run.Spec.Resources.Network == "" {
		meta.RemoveStatusCondition(&run.Status.Conditions, ebv1.ConditionNetworksFound)
		return nil
	}
	numas := map[int]bool{}
	for _, p := range runplan.Placements(t, endpoints) {
		numas[p.Endpoint.NUMA] = true
	}
	if len(endpoints) == 0 {
		numas[0] = true // without a fabric the name has no {numa}
	}
	var names, missing []string
	noAPI := false
	for numa := range numas {
		ns, name := builderpod.Network(run.Spec.Resources.Network, numa)
		if ns == "" {
			ns = run.Namespace
		}
		nad := &unstructured.Unstructured{}
		nad.SetGroupVersionKind(schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"})
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, nad)
		switch {
		case meta.IsNoMatchError(err):
			noAPI = true
		case apierrors.IsNotFound(err):
			missing = append(missing, ns+"/"+name)
		case err != nil:
			return err
		}
		names = append(names, ns+"/"+name)
	}
	slices.Sort(names)
	slices.Sort(missing)
	c := metav1.Condition{Type: ebv1.ConditionNetworksFound, Status: metav1.ConditionTrue, Reason: ebv1.ReasonAllNetworksFound,
		Message: "every NetworkAttachmentDefinition the builder pods attach exists: " + strings.Join(names, ", "), ObservedGeneration: run.Generation}
	switch {
	case noAPI:
		c.Status, c.Reason = metav1.ConditionFalse, ebv1.ReasonNetworkMissing
		c.Message = "the cluster serves no NetworkAttachmentDefinition API (k8s.cni.cncf.io/v1) for spec.resources.network " +
			run.Spec.Resources.Network + ": install Multus, or leave spec.resources.network unset"
	case len(missing) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ebv1.ReasonNetworkMissing
		c.Message = "no NetworkAttachmentDefinition " + strings.Join(missing, ", ") +
			": the builder pods that attach it cannot start; create it, or correct spec.resources.network"
	case len(unattached) > 0:
		var named []string
		for _, rank := range slices.Sorted(maps.Keys(unattached)) {
			named = append(named, fmt.Sprintf("rank %d (pod %s): %v", rank, pods[rank].Name, unattached[rank]))
		}
		c.Status, c.Reason = metav1.ConditionFalse, ebv1.ReasonNetworkNotAttached
		c.Message = clip(fmt.Sprintf("%d running builder pods have no address on their data network, so no peer can dial them: %s",
			len(named), strings.Join(named, "; ")))
	default:
		c.Message += "; every running builder pod has its data address there"
	}
	r.setWarned(run, c, "Preflight")
	return nil
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
			return fmt.Sprintf("unit %d (rank %d, endpoint %s)", m.Unit, m.FailedRank, m.FailedEndpoint)
		}), builderpod.DisruptionBudgetName(run.Name))
}

// targets are the builders of ranks whose pods run, for a control call.
func (r *EventBuilderRunReconciler) targets(pods map[int32]*corev1.Pod, ranks []int32) []buildercontrol.Builder {
	var out []buildercontrol.Builder
	for _, rank := range ranks {
		if pod := pods[rank]; pod != nil {
			out = append(out, buildercontrol.Builder{Rank: rank, URL: r.StatusURL(pod)})
		}
	}
	return out
}

// rankList names ranks for a message (a few, then how many more).
func rankList(ranks []int32) string {
	return shortlist.Join(ranks, ", ", func(r int32) string { return strconv.Itoa(int(r)) })
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
			reps, err := r.Control.Send(ctx, token, buildercontrol.Stop, targets)
			if len(reps) > 0 {
				r.Recorder.Eventf(snapshot, nil, corev1.EventTypeNormal, commandReason[buildercontrol.Stop], string(buildercontrol.Stop),
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

// dropRecord removes a record annotation that cannot be read (readErr)
// from the rank-table ConfigMap, with a Warning event naming it, the
// parse error and what is lost with it.
func (r *EventBuilderRunReconciler) dropRecord(ctx context.Context, run *ebv1.EventBuilderRun, cm *corev1.ConfigMap,
	annotation string, readErr error, reason, action, consequence string) error {
	r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, reason, action, "%s: ignored and removed; %s", clip(readErr.Error()), consequence)
	delete(cm.Annotations, annotation)
	return r.Update(ctx, cm)
}

// podUIDs are the UIDs of the ranks' pods, by rank.
func podUIDs(pods map[int32]*corev1.Pod) map[int32]string {
	uids := make(map[int32]string, len(pods))
	for rank, pod := range pods {
		if pod != nil {
			uids[rank] = string(pod.UID)
		}
	}
	return uids
}

// dataIPs are the data addresses of the table's live and spare ranks whose
// pod runs, by rank: the pod IP, or with spec.resources.network the pod's
// address on that network (builderpod.DataAddress: the control API stays
// on the pod IP). A running pod without one is left out, and why goes in
// unattached (when not nil).
func dataIPs(run *ebv1.EventBuilderRun, table planner.RankTable, pods map[int32]*corev1.Pod, unattached map[int32]error) map[int32]string {
	ips := map[int32]string{}
	for _, rk := range table.Ranks {
		rank, pod := int32(rk.Rank), pods[int32(rk.Rank)]
		if rk.Role == planner.Dummy || pod == nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		if run.Spec.Resources.Network == "" {
			ips[rank] = pod.Status.PodIP
			continue
		}
		ip, err := builderpod.DataAddress(pod)
		if err != nil {
			if unattached != nil {
				unattached[rank] = err
			}
			continue
		}
		ips[rank] = ip
	}
	return ips
}

// record reads a JSON record annotation of the rank-table ConfigMap (the
// zero value without one); one that does not parse is an error naming it.
func record[T any](cm *corev1.ConfigMap, annotation string) (T, error) {
	var v T
	if cm == nil || cm.Annotations[annotation] == "" {
		return v, nil
	}
	if err := json.Unmarshal([]byte(cm.Annotations[annotation]), &v); err != nil {
		var zero T
		return zero, fmt.Errorf("ConfigMap %s annotation %s: %w", cm.Name, annotation, err)
	}
	return v, nil
}

// setRecord writes a JSON record annotation of the rank-table ConfigMap.
func setRecord(cm *corev1.ConfigMap, annotation string, v any) {
	b, _ := json.Marshal(v) // plain data: cannot fail
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[annotation] = string(b)
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
		reps, err := r.Control.Send(ctx, token, buildercontrol.Reset, targets)
		if len(reps) > 0 {
			r.Recorder.Eventf(snapshot, nil, corev1.EventTypeNormal, commandReason[buildercontrol.Reset], string(buildercontrol.Reset),
				"reset to %d builders (ranks %s): lost by their set, they still ran their session; they rejoin as new processes",
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

// announceDeferrals tells, once per rejoin that did not hold (failed, as
// DecideRejoins found them now), how long its rank waits before the next.
func (r *EventBuilderRunReconciler) announceDeferrals(run *ebv1.EventBuilderRun, waiting []runplan.Deferral, failed []int) {
	for _, w := range waiting {
		if slices.Contains(failed, w.Rank) {
			r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, "RejoinDeferred", "Rejoin",
				"rank %d was reported lost again after rejoining (failed rejoins: %d): the next waits %s, until %s",
				w.Rank, w.Attempts, r.RejoinBackoff.Delay(w.Attempts), w.Until.UTC().Format(time.RFC3339))
		}
	}
}

// waitingNote is what the Ready condition says of ranks whose rejoin waits.
func waitingNote(waiting []runplan.Deferral) string {
	if len(waiting) == 0 {
		return ""
	}
	return "; " + shortlist.Join(waiting, "; ", runplan.Deferral.String)
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

// clip bounds a message that an Event will carry (events.k8s.io refuses
// notes over 1024 characters).
func clip(msg string) string { return shortlist.Clip(msg, 700) }

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
	targets := func(ranks []int32) []buildercontrol.Builder {
		out := make([]buildercontrol.Builder, len(ranks))
		for i, rank := range ranks {
			out[i] = buildercontrol.Builder{Rank: rank, URL: urls[rank]}
		}
		return out
	}
	// merge takes the builders' answers as their latest reports.
	merge := func(reps buildercontrol.Reports) {
		for i := range builders {
			if rep, ok := reps[builders[i].Rank]; ok {
				builders[i].Report = &rep
				poll.Reports[builders[i].Rank] = rep
			}
		}
	}
	var errs []error
	announce := func(cmd buildercontrol.Command, reps buildercontrol.Reports, what string) {
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
		announce(buildercontrol.Configure, reps, fmt.Sprintf(" epoch %d", table.Epoch))
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

// commandReason is the Event reason of a command sent.
var commandReason = map[buildercontrol.Command]string{
	buildercontrol.Configure: "BuildersConfigured",
	buildercontrol.Start:     "BuildersStarted",
	buildercontrol.Pause:     "BuildersPaused",
	buildercontrol.Resume:    "BuildersResumed",
	buildercontrol.Stop:      "BuildersStopped",
	buildercontrol.Reset:     "BuildersReset",
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

// unreadStreams are the streams the rank table in cm lists as no RU
// reading them since a failure (none without one).
func unreadStreams(cm *corev1.ConfigMap) []string {
	if cm == nil {
		return nil
	}
	doc, _ := ranktable.Parse(cm.Data[ranktable.Key]) // loadTable parsed it already, and fails on errors
	return doc.UnreadStreams
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

// publish writes table t as the run's rank table, creating the ConfigMap
// or updating cm (optimistically locked: a concurrent writer makes this
// fail and the reconcile retry from the newer table). rec, when set, is
// the recovery that produced t from failures observed at observed: its
// record (status.lastFailover) is written in the same update as the
// table, so no crash or conflict can publish one without the other. A
// fresh plan (fresh) records the Fabric it was planned on (fabricKey, ""
// without one) in that update too. The table names the streams of fabric
// (nil without one) that no RU reads since a failure (unreadStreams),
// those its predecessor in cm named among them unless it is a new plan.
func (r *EventBuilderRunReconciler) publish(ctx context.Context, run *ebv1.EventBuilderRun, cm *corev1.ConfigMap,
	t planner.RankTable, fabric *planner.Fabric, endpoints map[string]planner.Endpoint, rec *runplan.Recovery, fresh bool, fabricKey string,
	observed time.Time) (*corev1.ConfigMap, error) {
	fabricName := ""
	if run.Spec.FabricRef != nil {
		fabricName = run.Spec.FabricRef.Name
	}
	doc := ranktable.New(run.Name, fabricName, t, builderpod.Peers(run.Name, int32(t.N())), endpoints)
	doc.ResumeEvent = runplan.ResumeEvent(run.Status, observed)
	var before []string // a new plan starts afresh; a table that follows keeps what its predecessor lost
	if cm != nil && !(rec == nil && fresh) {
		before = unreadStreams(cm)
	}
	doc.UnreadStreams = runplan.LostStreams(fabric, t, before)
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
	r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, reason, "Failover", "epoch %d, %s in %s: %s",
		t.Epoch, rec.Outcome, fo.Duration.Duration.Round(time.Millisecond), rec.Summary())
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

// podCreateError is the API server refusing a builder pod.
type podCreateError struct {
	pod string
	err error
}

func (e *podCreateError) Error() string { return "creating pod " + e.pod + ": " + e.err.Error() }
func (e *podCreateError) Unwrap() error { return e.err }

// syncPods makes pods match the table: one pod per live and spare rank
// (if start), on its endpoint's node, but none for a spare on a cordoned
// node (so that a drain can go on); it deletes the others (but the running
// pods of held ranks: a planned move's, until the set switched), pods that
// ended (evicted or refused at admission: they never restart in place),
// pods on the wrong node and pods whose spec hash differs from what the
// run renders now (image, resources, control Secret: never the table,
// which reaches running builders by configure). A spare's failed pod is
// kept: the spare is not used (runplan.FailedSpares) and the pod shows
// why, until someone deletes it. pods is updated to what remains.
func (r *EventBuilderRunReconciler) syncPods(ctx context.Context, run *ebv1.EventBuilderRun, t planner.RankTable,
	endpoints map[string]planner.Endpoint, cordoned map[string]bool, pods map[int32]*corev1.Pod, held map[int32]bool, start bool,
	secretUID string) error {
	log := logf.FromContext(ctx)
	want := map[int32]*corev1.Pod{}
	spare := map[int32]bool{}
	physical := cabled(endpoints)
	for _, rk := range t.Ranks {
		if !start || (rk.Role != planner.Live && rk.Role != planner.Spare) {
			continue
		}
		var place *builderpod.Placement
		ep, ok := endpoints[rk.Endpoint]
		if ok && rk.Role == planner.Spare && cordoned[ep.Node] {
			continue
		}
		if ok {
			place = placement(ep, physical)
		}
		want[int32(rk.Rank)] = builderpod.Pod(run, int32(rk.Rank), place, secretUID)
		spare[int32(rk.Rank)] = rk.Role == planner.Spare
	}

	for rank, pod := range pods {
		next, keep := want[rank]
		ended := pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
		failedSpare := keep && spare[rank] && pod.Status.Phase == corev1.PodFailed
		// Only fabric pods are placed by the operator; others go where the scheduler binds them.
		misplaced := keep && builderpod.Node(next) != "" && builderpod.Node(pod) != builderpod.Node(next)
		stale := keep && pod.Annotations[builderpod.SpecHashAnnotation] != next.Annotations[builderpod.SpecHashAnnotation]
		if keep && (!ended || failedSpare) && !misplaced && !stale {
			continue
		}
		if !keep && held[rank] && !ended {
			continue
		}
		if pod.DeletionTimestamp.IsZero() {
			log.Info("deleting pod", "pod", pod.Name, "rank", rank, "phase", pod.Status.Phase, "stale", stale, "misplaced", misplaced)
			if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		delete(pods, rank)
	}

	var g errgroup.Group
	g.SetLimit(maxConcurrentCreates)
	for rank, pod := range want {
		if pods[rank] != nil {
			continue
		}
		g.Go(func() error {
			log.V(1).Info("creating pod", "pod", pod.Name, "rank", rank, "node", builderpod.Node(pod))
			// AlreadyExists: our cache has not seen the pod yet, or its
			// predecessor is still terminating; a later reconcile retries.
			if err := client.IgnoreAlreadyExists(r.Create(ctx, pod)); err != nil {
				return &podCreateError{pod: pod.Name, err: err}
			}
			return nil
		})
	}
	return g.Wait()
}

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

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// CacheOptions limits the manager's pod, service, configmap and secret
// caches to builder objects, so the operator does not hold every pod (or
// read every Secret) of the cluster. Nodes are cached whole: runs on a
// fabric watch their health.
func CacheOptions() cache.Options {
	builders := labels.SelectorFromSet(labels.Set{builderpod.LabelName: builderpod.AppName})
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:                   {Label: builders},
		&corev1.Service{}:               {Label: builders},
		&corev1.ConfigMap{}:             {Label: builders},
		&corev1.Secret{}:                {Label: builders},
		&policyv1.PodDisruptionBudget{}: {Label: builders},
		&networkingv1.NetworkPolicy{}:   {Label: builders},
	}}
}

// fabricRefField indexes runs by the Fabric they name.
const fabricRefField = "spec.fabricRef.name"

// nodeHealthChanged passes node events that can change what a fabric can
// use: creation, deletion, a change of readiness, a cordon or uncordon, and
// what it offers (a device plugin registering its resources).
// Heartbeats and other status updates do not reconcile anything.
var nodeHealthChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, cur := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
		return runplan.NodeReady(old) != runplan.NodeReady(cur) || old.DeletionTimestamp.IsZero() != cur.DeletionTimestamp.IsZero() ||
			old.Spec.Unschedulable != cur.Spec.Unschedulable || !equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable)
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// SetupWithManager registers the reconciler and its poller. Status writes
// do not bump the generation, so the predicate keeps the run's own status
// patches from triggering reconciles; each poll of a run's builders wakes
// it instead.
func (r *EventBuilderRunReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Recorder = withBoundedNotes(r.Recorder)
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &ebv1.EventBuilderRun{}, fabricRefField, func(o client.Object) []string {
		if ref := o.(*ebv1.EventBuilderRun).Spec.FabricRef; ref != nil {
			return []string{ref.Name}
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.wake = make(chan event.GenericEvent, wakeBuffer)
	r.polls = builderpoll.New(r.Builders.Get, r.polled)
	r.commands = newCommander(r.commandsEnded)
	if err := errors.Join(mgr.Add(r.polls), mgr.Add(r.commands)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&ebv1.EventBuilderRun{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.wake, &handler.EnqueueRequestForObject{})).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&ebv1.Fabric{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.runs(ctx, client.MatchingFields{fabricRefField: o.GetName()})
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			// Few runs, few fabrics: every run on a fabric takes a look.
			return r.runs(ctx)
		}), builder.WithPredicates(nodeHealthChanged)).
		Named("eventbuilderrun").
		WithOptions(queueOptions(r.MaxConcurrent)).
		Complete(r)
}

// runs lists the runs on a fabric matching opts, as requests.
func (r *EventBuilderRunReconciler) runs(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var runs ebv1.EventBuilderRunList
	if err := r.List(ctx, &runs, opts...); err != nil {
		logf.FromContext(ctx).Error(err, "listing runs to reconcile")
		return nil
	}
	var reqs []reconcile.Request
	for i := range runs.Items {
		if runs.Items[i].Spec.FabricRef != nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&runs.Items[i])})
		}
	}
	return reqs
}

// cabled says whether the Fabric lists readout streams on some endpoint:
// its readout is physical, and an endpoint without any has no fibres.
func cabled(endpoints map[string]planner.Endpoint) bool {
	for _, ep := range endpoints {
		if len(ep.Streams) > 0 {
			return true
		}
	}
	return false
}

// placement is where a unit on endpoint ep runs, as its pod is rendered;
// physical: the Fabric lists readout streams (cabled).
func placement(ep planner.Endpoint, physical bool) *builderpod.Placement {
	return &builderpod.Placement{Endpoint: ep.Name, Node: ep.Node, NUMA: ep.NUMA, RDMADevice: ep.RDMADevice, Netdev: ep.Netdev,
		Streams: len(ep.Streams), WithoutFibres: physical && len(ep.Streams) == 0}
}
