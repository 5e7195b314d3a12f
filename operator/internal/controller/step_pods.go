package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/ranktable"
	"daq.io/eventbuilder/operator/internal/runplan"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// placePods takes back, by a new epoch, ranks whose pods answer from
// another address than their peers were given, checks what the table needs
// of nodes and networks, keeps the disruption budget at the table's size,
// and makes the pods the table asks for (obs.pods is left as what remains).
func (p *runPass) placePods(ctx context.Context, in *loadedRun, secret *corev1.Secret, obs *observedRun, plan *plannedRun) (*placedRun, verdict) {
	r, run := p.r, in.run
	out := &placedRun{runTable: plan.runTable}
	unattached := map[int32]error{} // running pods without a data address, and why
	found := dataIPs(run, out.table, obs.pods, unattached)
	// A rank whose pod answers from another IP than its peers were given
	// (a node restart recreates its pods' sandboxes) is taken back by a new
	// epoch carrying the addresses as they are: the others dial the old one.
	if plan.poll != nil && !out.published && !plan.stopped && r.commands.accepts(p.key, plan.poll.Time) {
		if moved := runplan.MovedAddresses(out.table, obs.given, ranktable.Dialable(found), podUIDs(obs.pods), plan.poll.Reports); len(moved) > 0 {
			next := runplan.Readdress(out.table, moved)
			var err error
			if out.runTable, err = p.publish(ctx, run, obs, out.runTable, next.Table, &next, false, ""); err != nil {
				return nil, endWith(ctrl.Result{}, err)
			}
		}
	}
	out.waiting = plan.attempts.Waiting(p.now, r.RejoinBackoff)
	r.announceDeferrals(run, out.waiting, plan.failedRejoins)

	if obs.fabric != nil {
		r.checkResources(run, out.table, obs.endpoints, in.nodes)
	}
	if err := r.checkNetworks(ctx, run, out.table, obs.endpoints, obs.pods, unattached); err != nil {
		return nil, endWith(ctrl.Result{}, err)
	}
	if err := r.syncDisruptionBudget(ctx, run, obs.fabric != nil, int32(out.table.N())); err != nil {
		return nil, endWith(ctrl.Result{}, err)
	}
	claimsReady, err := r.checkDevices(ctx, run, out.table, obs.pods)
	if err != nil {
		return nil, endWith(ctrl.Result{}, err)
	}
	// A planned move's old pods build on until the set switched.
	lastMove, _ := record[*ebv1.FailoverStatus](out.cm, annLastFailover) // checked in observe
	out.held = runplan.HeldForSwitch(out.table, lastMove, run.Status.Units, p.now, switchHold)
	if err := r.syncPods(ctx, run, out.table, obs.endpoints, in.cordoned, obs.pods, out.held, !plan.stopped, claimsReady, string(secret.UID), p.now); err != nil {
		var create *podCreateError
		if errors.As(err, &create) {
			// Quota, admission policy or an invalid resource name: say so
			// in the status, not only in the operator's log.
			setPhase(run, ebv1.PhasePending, ebv1.ReasonPodCreateFailed, create.Error())
			if perr := r.patchStatus(ctx, in.orig, run); perr != nil {
				return nil, endWith(ctrl.Result{}, errors.Join(err, perr))
			}
		}
		return nil, endWith(ctrl.Result{}, err)
	}
	return out, goOn
}

// maxConcurrentCreates bounds the pods created at once per run: a
// 326-unit run must come up in seconds, without flooding the API server.
const maxConcurrentCreates = 32

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
// why, until someone deletes it, or, refused at admission for a reason
// that passes, for runplan.AdmissionRetryAfter. A pod that claims devices (claims mode)
// is made after its ResourceClaimTemplate, and only when claimsReady
// (checkDevices). pods is updated to what remains.
func (r *EventBuilderRunReconciler) syncPods(ctx context.Context, run *ebv1.EventBuilderRun, t planner.RankTable,
	endpoints map[string]planner.Endpoint, cordoned map[string]bool, pods map[int32]*corev1.Pod, held map[int32]bool, start, claimsReady bool,
	secretUID string, now time.Time) error {
	log := logf.FromContext(ctx)
	want := map[int32]*corev1.Pod{}
	templates := map[int32]*resourceapi.ResourceClaimTemplate{}
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
		templates[int32(rk.Rank)] = builderpod.ClaimTemplate(run, place)
		spare[int32(rk.Rank)] = rk.Role == planner.Spare
	}

	for rank, pod := range pods {
		next, keep := want[rank]
		ended := pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
		failedSpare := keep && spare[rank] && pod.Status.Phase == corev1.PodFailed && !runplan.RetryAdmission(pod, now)
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
		template := templates[rank]
		if pods[rank] != nil || (template != nil && !claimsReady) {
			continue
		}
		g.Go(func() error {
			if template != nil {
				if err := r.ensureClaimTemplate(ctx, run, template); err != nil {
					return &podCreateError{pod: pod.Name, err: err}
				}
			}
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
		Streams: ep.Streams, WithoutFibres: physical && len(ep.Streams) == 0}
}

// syncDisruptionBudget keeps the run's PodDisruptionBudget, holding a pod
// for every rank of its table, while it is on a Fabric (where the operator
// moves units off a drained node itself), and removes it when
// spec.fabricRef is removed: a run without a Fabric lets drains evict its
// pods, which are recreated elsewhere.
func (r *EventBuilderRunReconciler) syncDisruptionBudget(ctx context.Context, run *ebv1.EventBuilderRun, onFabric bool, ranks int32) error {
	pdb := &policyv1.PodDisruptionBudget{}
	err := r.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: builderpod.DisruptionBudgetName(run.Name)}, pdb)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return err
	case !onFabric && err == nil:
		return client.IgnoreNotFound(r.Delete(ctx, pdb))
	case !onFabric:
		return nil
	}
	want := builderpod.DisruptionBudget(run, ranks)
	if apierrors.IsNotFound(err) {
		logf.FromContext(ctx).Info("creating", "kind", "PodDisruptionBudget", "name", want.Name)
		return client.IgnoreAlreadyExists(r.Create(ctx, want))
	}
	if equality.Semantic.DeepEqual(pdb.Spec.MinAvailable, want.Spec.MinAvailable) && pdb.Spec.MaxUnavailable == nil {
		return nil
	}
	pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable = want.Spec.MinAvailable, nil
	return r.Update(ctx, pdb)
}
