// Package controller holds the EventBuilderRun reconciler. It stays thin:
// what objects to create comes from builderpod, what the status says from
// builderstatus; here are only the API calls that join them.
package controller

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderstatus"
)

// maxConcurrentPolls bounds the builders polled at once per run.
const maxConcurrentPolls = 64

// EventBuilderRunReconciler keeps one builder pod per rank of a run and the
// run's headless Service, and folds the builders' reports into its status.
type EventBuilderRunReconciler struct {
	client.Client
	Recorder events.EventRecorder
	Builders *builderstatus.Client
	// StatusURL gives the base URL of a builder pod's HTTP API; tests
	// point it at local servers.
	StatusURL func(*corev1.Pod) string
	// PollInterval is how often the builders of a run are polled.
	PollInterval time.Duration
}

// +kubebuilder:rbac:groups=eventbuilder.daq.io,resources=eventbuilderruns,verbs=get;list;watch
// +kubebuilder:rbac:groups=eventbuilder.daq.io,resources=eventbuilderruns/status,verbs=patch
// Owner references with blockOwnerDeletion need update on the owner's finalizers
// where the OwnerReferencesPermissionEnforcement admission plugin is on.
// +kubebuilder:rbac:groups=eventbuilder.daq.io,resources=eventbuilderruns/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile drives one run towards its spec and refreshes its status. It
// requeues itself every PollInterval for as long as the run exists, since
// builders' counters change without any Kubernetes event.
func (r *EventBuilderRunReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	run := &ebv1.EventBuilderRun{}
	if err := r.Get(ctx, req.NamespacedName, run); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !run.DeletionTimestamp.IsZero() {
		// Pods and Service carry owner references: the garbage collector removes them.
		return ctrl.Result{}, nil
	}
	orig := run.DeepCopy()

	if run.Spec.Builder.Transport == ebv1.TransportVerbs {
		setPhase(run, ebv1.PhaseFailed, ebv1.ReasonUnsupportedTransport,
			"spec.builder.transport: verbs (RDMA) is not supported by this operator version yet; set it to tcp")
		// Nothing to poll; a spec change brings the run back here.
		return ctrl.Result{}, r.patchStatus(ctx, orig, run)
	}

	if err := r.ensureService(ctx, run); err != nil {
		return ctrl.Result{}, err
	}
	pods, err := r.syncPods(ctx, run)
	if err != nil {
		return ctrl.Result{}, err
	}

	// Pod events also trigger reconciles; polling at most about once per
	// interval keeps rates averaged over comparable windows.
	var poll *builderstatus.Poll
	now := time.Now()
	if last := run.Status.LastSampleTime; last == nil || now.Sub(last.Time) >= r.PollInterval/2 {
		poll = r.poll(ctx, pods, now)
	}

	units := make([]builderstatus.Unit, run.Spec.Units)
	for rank := range run.Spec.Units {
		units[rank].Rank = rank
		if pod := pods[rank]; pod != nil {
			units[rank].Pod, units[rank].Ready = pod.Name, podReady(pod)
		}
	}
	s := builderstatus.Aggregate(&run.Status, units, poll)
	st := &run.Status
	st.Units, st.ReadyUnits = s.Units, s.ReadyUnits
	st.EventsBuilt, st.EventsIncomplete, st.BytesBuilt = s.EventsBuilt, s.EventsIncomplete, s.BytesBuilt
	st.EventRate, st.ThroughputGbps, st.LastSampleTime = s.EventRate, s.ThroughputGbps, s.LastSampleTime
	setPhase(run, s.Phase, s.Reason, s.Message)

	if err := r.patchStatus(ctx, orig, run); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.PollInterval}, nil
}

// ensureService creates the run's headless Service if it is missing.
func (r *EventBuilderRunReconciler) ensureService(ctx context.Context, run *ebv1.EventBuilderRun) error {
	want := builderpod.Service(run)
	err := r.Get(ctx, client.ObjectKeyFromObject(want), &corev1.Service{})
	if apierrors.IsNotFound(err) {
		logf.FromContext(ctx).Info("creating service", "service", want.Name)
		err = r.Create(ctx, want)
	}
	return client.IgnoreAlreadyExists(err)
}

// syncPods creates the pods of missing ranks, deletes those of ranks beyond
// spec.units and pods that ended (evicted: they never restart in place), and
// returns the run's current pods by rank.
func (r *EventBuilderRunReconciler) syncPods(ctx context.Context, run *ebv1.EventBuilderRun) (map[int32]*corev1.Pod, error) {
	log := logf.FromContext(ctx)
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(run.Namespace), client.MatchingLabels(builderpod.Selector(run.Name))); err != nil {
		return nil, err
	}

	pods := make(map[int32]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pod := &list.Items[i]
		rank, ok := builderpod.Rank(pod)
		if !ok || !metav1.IsControlledBy(pod, run) {
			continue
		}
		ended := pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
		if (rank >= run.Spec.Units || ended) && pod.DeletionTimestamp.IsZero() {
			log.Info("deleting pod", "pod", pod.Name, "rank", rank, "phase", pod.Status.Phase)
			if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return nil, err
			}
		}
		if rank < run.Spec.Units {
			pods[rank] = pod
		}
	}

	for rank := range run.Spec.Units {
		if pods[rank] != nil {
			continue
		}
		pod := builderpod.Pod(run, rank)
		log.Info("creating pod", "pod", pod.Name, "rank", rank)
		// AlreadyExists: our cache has not seen the pod yet.
		if err := r.Create(ctx, pod); client.IgnoreAlreadyExists(err) != nil {
			return nil, err
		}
	}
	return pods, nil
}

// poll asks every running builder pod for its status, in parallel. A builder
// that does not answer is simply missing from the result.
func (r *EventBuilderRunReconciler) poll(ctx context.Context, pods map[int32]*corev1.Pod, now time.Time) *builderstatus.Poll {
	log := logf.FromContext(ctx)
	p := &builderstatus.Poll{Time: now, Reports: make(map[int32]builderstatus.Report, len(pods))}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(maxConcurrentPolls)
	for rank, pod := range pods {
		if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		g.Go(func() error {
			rep, err := r.Builders.Get(ctx, r.StatusURL(pod))
			if err != nil {
				log.V(1).Info("builder did not report", "pod", pod.Name, "error", err.Error())
				return nil
			}
			mu.Lock()
			p.Reports[rank] = rep
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait() // the goroutines never fail
	return p
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

// patchStatus writes run's status if it changed, then announces a phase
// change with an Event. The optimistic lock makes a patch computed from a
// stale cached run fail (and retry) rather than undo a newer status.
func (r *EventBuilderRunReconciler) patchStatus(ctx context.Context, orig, run *ebv1.EventBuilderRun) error {
	if equality.Semantic.DeepEqual(orig.Status, run.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, run, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	if from, to := orig.Status.Phase, run.Status.Phase; from != to {
		kind := corev1.EventTypeNormal
		if to == ebv1.PhaseFailed {
			kind = corev1.EventTypeWarning
		}
		ready := meta.FindStatusCondition(run.Status.Conditions, ebv1.ConditionReady)
		r.Recorder.Eventf(run, nil, kind, ready.Reason, "PhaseChange", "phase %s -> %s: %s", phaseName(from), to, ready.Message)
	}
	return nil
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

// CacheOptions limits the manager's pod and service caches to builder
// objects, so the operator does not hold every pod of the cluster in memory.
func CacheOptions() cache.Options {
	builders := labels.SelectorFromSet(labels.Set{builderpod.LabelName: builderpod.AppName})
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:     {Label: builders},
		&corev1.Service{}: {Label: builders},
	}}
}

// SetupWithManager registers the reconciler. Status writes do not bump the
// generation, so the predicate keeps the run's own status patches from
// triggering reconciles; the requeue timer drives polling instead.
func (r *EventBuilderRunReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&ebv1.EventBuilderRun{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Named("eventbuilderrun").
		Complete(r)
}
