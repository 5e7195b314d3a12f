// Package controller holds the EventBuilderRun reconciler. It stays thin:
// what objects to create comes from builderpod, what the status says from
// builderstatus; here are only the API calls that join them.
package controller

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
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
	"daq.io/eventbuilder/operator/internal/builderclient"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderpoll"
	"daq.io/eventbuilder/operator/internal/opmetrics"
	"daq.io/eventbuilder/operator/internal/runplan"
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
	Builders  *builderclient.Client
	// Control is the builders' run-control API.
	Control builderclient.Control
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
	// it. Zero turns it off. A builder that falls silent is polled again
	// at once, then every half PollInterval while it stays silent.
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
	// VacancyRest is how long an endpoint vacated by a failure waits, its
	// node Ready, before it is offered as a spare again though its server
	// neither turned NotReady nor rebooted (its pod or process failed, a
	// hang, a blip): longer each time it fails again soon; zero: never.
	VacancyRest runplan.VacancyRest
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
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaimtemplates,verbs=get;create
// +kubebuilder:rbac:groups=resource.k8s.io,resources=deviceclasses,verbs=get
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
// one after the other unless one ends the pass early, each handing what
// it found to those after it.
func (r *EventBuilderRunReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &runPass{r: r, key: req.NamespacedName, now: time.Now()}
	opmetrics.Beat()
	in, v := p.load(ctx) // the run; its Fabric and nodes
	if v.end {
		return v.result, v.err
	}
	secret, v := p.ensureObjects(ctx, in.run) // its Service, NetworkPolicy, control Secret
	if v.end {
		return v.result, v.err
	}
	obs, v := p.observe(ctx, in) // its pods, rank table, records and the builders' poll
	if v.end {
		return v.result, v.err
	}
	plan, v := p.plan(ctx, in, secret, obs) // the table it goes on under: planned, failed over, rejoined
	if v.end {
		return v.result, v.err
	}
	placed, v := p.placePods(ctx, in, secret, obs, plan) // readdressed ranks, node and network checks, the pods
	if v.end {
		return v.result, v.err
	}
	driven, v := p.driveBuilders(ctx, in, secret, obs, plan, placed) // configure and start or stop the builders, in the background
	if v.end {
		return v.result, v.err
	}
	return p.report(ctx, in, obs, plan, placed, driven) // status, phase and metrics; when to look again
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
