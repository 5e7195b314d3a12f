package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderemu"
	"daq.io/eventbuilder/operator/internal/builderpod"
)

// setCordoned plays kubectl cordon (true) and uncordon (false).
func setCordoned(t *testing.T, name string, cordoned bool) {
	t.Helper()
	node := &corev1.Node{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	node.Spec.Unschedulable = cordoned
	if err := k8s.Update(context.Background(), node); err != nil {
		t.Fatalf("cordon %s=%v: %v", name, cordoned, err)
	}
}

// A drain starts with a cordon. The units of a cordoned server move to
// spares at once, as a planned move, and their old pods go once the set
// switched to the new table (a drain then finds nothing of the run left to
// evict, while the run's PodDisruptionBudget refuses evictions meanwhile); units with no spare
// left stay, with a Warning, and move as soon as a spare appears; a
// server uncordoned offers its endpoints as spares again.
func TestCordonedServerIsDrainedToSpares(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "drain")
	run := fabricRun(ns, "drain", "drain", 5, 2)
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	// LLSSLLL.: srv0 runs units 0 and 1, srv1 holds the spares.
	pods := waitPods(t, ns, "drain", "drain-eb-0", "drain-eb-1", "drain-eb-2", "drain-eb-3", "drain-eb-4", "drain-eb-5", "drain-eb-6")
	for _, pod := range pods {
		startPod(t, &pod)
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)

	pdb := &policyv1.PodDisruptionBudget{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: builderpod.DisruptionBudgetName("drain")}, pdb); err != nil {
		t.Fatalf("the run's PodDisruptionBudget: %v", err)
	}
	ranks := getRun(t, key).Status.RankCount
	if min := pdb.Spec.MinAvailable; min == nil || *min != intstr.FromInt32(ranks) || pdb.Spec.MaxUnavailable != nil || pdb.Spec.Selector == nil ||
		pdb.Spec.Selector.MatchLabels[builderpod.LabelRun] != "drain" || len(pdb.OwnerReferences) != 1 {
		t.Errorf("PodDisruptionBudget spec %+v owners %v, want minAvailable %d (every rank) over the run's pods, owned by the run",
			pdb.Spec, pdb.OwnerReferences, ranks)
	}

	setCordoned(t, "drain-srv0", true)
	fo := waitFailover(t, key, 2)
	if got := moves(fo); got != "0->2 NodeCordoned, 1->3 NodeCordoned" || fo.Outcome != ebv1.OutcomeMovedToSpare {
		t.Errorf("lastFailover %s %s, want both units of srv0 moved to srv1's spares", fo.Outcome, got)
	}
	waitPods(t, ns, "drain", "drain-eb-2", "drain-eb-3", "drain-eb-4", "drain-eb-5", "drain-eb-6")

	// No spare left: srv2's units stay and the run says why.
	setCordoned(t, "drain-srv2", true)
	expectEvent(t, ns, "drain", "DrainHeld")
	if st := getRun(t, key).Status; st.Epoch != 2 || st.LiveUnits != 5 {
		t.Errorf("epoch %d with %d live units, want 2 and 5: a unit with no spare is held, not dropped", st.Epoch, st.LiveUnits)
	}
	waitPods(t, ns, "drain", "drain-eb-2", "drain-eb-3", "drain-eb-4", "drain-eb-5", "drain-eb-6")

	// srv0 back in service: its endpoints are spares again (epoch 3), and
	// the held units move there (epoch 4).
	setCordoned(t, "drain-srv0", false)
	expectEvent(t, ns, "drain", "SparesReplenished")
	fo = waitFailover(t, key, 4)
	if got := moves(fo); got != "4->0 NodeCordoned, 5->1 NodeCordoned" {
		t.Errorf("lastFailover moves %s, want srv2's units on srv0", got)
	}
	// srv2's pods build on until the set switched to epoch 4, which the
	// builders on srv0 join once they run.
	now := waitPods(t, ns, "drain", "drain-eb-0", "drain-eb-1", "drain-eb-2", "drain-eb-3", "drain-eb-4", "drain-eb-5", "drain-eb-6")
	for _, name := range []string{"drain-eb-0", "drain-eb-1"} {
		pod := now[name]
		startPod(t, &pod)
	}
	now = waitPods(t, ns, "drain", "drain-eb-0", "drain-eb-1", "drain-eb-2", "drain-eb-3", "drain-eb-6")
	for name, pod := range now {
		if node := builderpod.Node(&pod); node == "drain-srv2" {
			t.Errorf("pod %s placed on cordoned %s", name, node)
		}
	}
}

// moves spells a failover's moves: "0->2 NodeCordoned, 1->none PeerLost".
func moves(fo *ebv1.FailoverStatus) string {
	out := ""
	for i, m := range fo.Moves {
		to := "none"
		if m.SpareRank != nil {
			to = fmt.Sprint(*m.SpareRank)
		}
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%d->%s %s", m.FailedRank, to, m.Reason)
	}
	return out
}

// An edited Fabric replans the runs on it at a new epoch, says so in a
// FabricChanged condition, and moves units off endpoints it no longer has.
func TestFabricEditReplansTheRun(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	fab := smallFabric(t, "edit")
	run := fabricRun(ns, "edit", "edit", 3, 1)
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	pods := waitPods(t, ns, "edit", "edit-eb-0", "edit-eb-1", "edit-eb-2", "edit-eb-3")
	for _, pod := range pods {
		startPod(t, &pod)
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	if c := meta.FindStatusCondition(getRun(t, key).Status.Conditions, ebv1.ConditionFabricChanged); c != nil {
		t.Errorf("condition %+v before any edit", c)
	}

	// srv0 is taken out of the Fabric (recabled elsewhere, say).
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(fab), fab); err != nil {
		t.Fatal(err)
	}
	// A merge patch: the Fabric controller's status writes cannot conflict with it.
	patch := client.MergeFrom(fab.DeepCopy())
	fab.Spec.Endpoints = slices.DeleteFunc(fab.Spec.Endpoints, func(e ebv1.FabricEndpoint) bool { return e.Node == "edit-srv0" })
	if err := k8s.Patch(ctx, fab, patch); err != nil {
		t.Fatal(err)
	}
	// The replan is the one for the Fabric's generation 2, at whatever
	// epoch it came: a failover before it (a slow poll on a loaded machine)
	// takes an epoch too.
	var st ebv1.EventBuilderRunStatus
	replanned := func() error {
		st = getRun(t, key).Status
		c := meta.FindStatusCondition(st.Conditions, ebv1.ConditionFabricChanged)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ebv1.ReasonReplanned {
			return fmt.Errorf("epoch %d, condition %+v", st.Epoch, c)
		}
		var epoch int64
		if _, err := fmt.Sscanf(c.Message, "Fabric edit changed (generation 2): the rank table was planned afresh at epoch %d", &epoch); err != nil {
			return fmt.Errorf("condition message %q: %v", c.Message, err)
		}
		if epoch < 2 || st.Epoch < epoch {
			return fmt.Errorf("replanned at epoch %d, status at epoch %d", epoch, st.Epoch)
		}
		return nil
	}
	eventually(t, "a replan for Fabric generation 2 with condition FabricChanged", replanned)
	expectEvent(t, ns, "edit", ebv1.ConditionFabricChanged)
	// A status write lost after the replan (a conflict) cannot lose the
	// condition: the rank table's record brings it back.
	run = getRun(t, key)
	patch = client.MergeFrom(run.DeepCopy())
	meta.RemoveStatusCondition(&run.Status.Conditions, ebv1.ConditionFabricChanged)
	if err := k8s.Status().Patch(ctx, run, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "condition FabricChanged back after it was removed from the status", replanned)
	eventually(t, "no pod left on the endpoints taken out", func() error {
		now, err := livePods(ctx, ns, "edit")
		if err != nil {
			return err
		}
		for name, pod := range now {
			if builderpod.Node(&pod) == "edit-srv0" {
				return fmt.Errorf("pod %s on edit-srv0", name)
			}
		}
		if len(now) != 4 {
			return fmt.Errorf("%d pods, want 4", len(now))
		}
		return nil
	})
	for _, r := range st.Ranks {
		if r.Node == "edit-srv0" {
			t.Errorf("rank %+v still on edit-srv0", r)
		}
	}

	// An edit that leaves too few endpoints cannot be planned on: the run
	// goes on under the table it has, and says why.
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(fab), fab); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(fab.DeepCopy())
	fab.Spec.Endpoints = fab.Spec.Endpoints[:2]
	if err := k8s.Patch(ctx, fab, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "FabricChanged False, ReplanFailed, the table kept", func() error {
		st = getRun(t, key).Status
		c := meta.FindStatusCondition(st.Conditions, ebv1.ConditionFabricChanged)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ebv1.ReasonReplanFailed ||
			!strings.Contains(c.Message, "need 4 schedulable endpoints") ||
			!strings.Contains(c.Message, fmt.Sprintf("the run goes on under rank table epoch %d", st.Epoch)) {
			return fmt.Errorf("epoch %d, condition %+v", st.Epoch, c)
		}
		return nil
	})
	// The ranks on the endpoints the edit removed look lost to the
	// operator (their nodes no longer in the Fabric), but a Fabric that no
	// longer describes the table moves nothing: the run says so, naming
	// the field and the fix, and keeps its table (its builders build on).
	kept := st.Epoch
	cond := waitPhase(t, key, ebv1.PhaseDegraded, ebv1.ReasonFailoverFailed)
	for _, want := range []string{"endpoints: rank", "which is not listed", "correct Fabric edit"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("message %q does not say %q", cond.Message, want)
		}
	}
	if epoch := getRun(t, key).Status.Epoch; epoch != kept {
		t.Errorf("epoch %d -> %d: the table must be kept", kept, epoch)
	}
}

// A node that does not offer what its builder pods ask for (its device
// plugin not running) is named, with the resource and the ranks, before
// any pod waits on it; once it offers them, the run says so.
func TestMissingResourcesAreNamedBeforePodsWait(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "offer")
	// srv2's RDMA device plugin is not running.
	node := &corev1.Node{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "offer-srv2"}, node); err != nil {
		t.Fatal(err)
	}
	delete(node.Status.Allocatable, "rdma/hca_numa0")
	delete(node.Status.Allocatable, "rdma/hca_numa1")
	if err := k8s.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	run := fabricRun(ns, "offer", "offer", 5, 2) // LLSSLLL.: srv2 holds ranks 4 and 5
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	want := "node offer-srv2 offers none rdma/hca_numa0, ranks 4 ask for 1; node offer-srv2 offers none rdma/hca_numa1, ranks 5 ask for 1"
	waitCondition(t, key, ebv1.ConditionResourcesOffered, metav1.ConditionFalse, ebv1.ReasonResourcesMissing, want)
	expectEvent(t, ns, "offer", ebv1.ReasonResourcesMissing)

	if err := k8s.Get(ctx, client.ObjectKey{Name: "offer-srv2"}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Allocatable = farmNode.DeepCopy()
	if err := k8s.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, key, ebv1.ConditionResourcesOffered, metav1.ConditionTrue, ebv1.ReasonAllResourcesOffered, "")
}

// waitCondition waits until the run's condition of type has status and
// reason and its message holds text.
func waitCondition(t *testing.T, key client.ObjectKey, typ string, status metav1.ConditionStatus, reason, text string) {
	t.Helper()
	eventually(t, fmt.Sprintf("condition %s %s, %s, saying %q", typ, status, reason, text), func() error {
		c := meta.FindStatusCondition(getRun(t, key).Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, text) {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
}

// A data network the run attaches that has no NetworkAttachmentDefinition
// (the API here is an emulation of the NPWG one, testenv/npwg) is named
// before pods wait in ContainerCreating; once it exists, the run says so.
func TestMissingNetworksAreNamed(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "nets")
	run := fabricRun(ns, "nets", "nets", 5, 2)
	run.Spec.Resources.Network = ns + "/data-numa{numa}"
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	waitCondition(t, key, ebv1.ConditionNetworksFound, metav1.ConditionFalse, ebv1.ReasonNetworkMissing,
		"no NetworkAttachmentDefinition "+ns+"/data-numa0, "+ns+"/data-numa1: the builder pods that attach it cannot start")
	expectEvent(t, ns, "nets", ebv1.ReasonNetworkMissing)
	for _, name := range []string{"data-numa0", "data-numa1"} {
		nad := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"config": `{"cniVersion":"0.3.1","type":"host-device","device":"eb0"}`},
		}}
		if err := k8s.Create(ctx, nad); err != nil {
			t.Fatal(err)
		}
	}
	// A NetworkAttachmentDefinition is not watched: the next poll looks again.
	waitCondition(t, key, ebv1.ConditionNetworksFound, metav1.ConditionTrue, ebv1.ReasonAllNetworksFound, ns+"/data-numa0, "+ns+"/data-numa1")

	// The data plane runs on that network: the rank table gives each peer
	// its address there (network-status, eb0), never its pod IP. A pod
	// whose network Multus did not attach is named, and no peer dials it.
	pods := waitPods(t, ns, "nets", "nets-eb-0", "nets-eb-1", "nets-eb-2", "nets-eb-3", "nets-eb-4", "nets-eb-5", "nets-eb-6")
	var first *builderemu.Builder
	podIPs := map[string]bool{}
	for name, pod := range pods {
		if name == "nets-eb-4" {
			continue
		}
		b := startPod(t, &pod)
		podIPs[pod.Status.PodIP] = true
		if name == "nets-eb-0" {
			first = b
		}
	}
	unattached := pods["nets-eb-4"]
	multusDown.Store(unattached.UID, true)
	startPod(t, &unattached)
	waitCondition(t, key, ebv1.ConditionNetworksFound, metav1.ConditionFalse, ebv1.ReasonNetworkNotAttached,
		"rank 4 (pod nets-eb-4): no k8s.v1.cni.cncf.io/network-status annotation: the data network is not attached")
	if addrs := first.Addresses(); addrs != nil {
		t.Errorf("rank 0 was configured (table %v) while rank 4 had no data address", addrs)
	}

	// Multus attaches it: every builder is configured with the live ranks'
	// data addresses.
	multusDown.Delete(unattached.UID)
	var attached corev1.Pod
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(&unattached), &attached); err != nil {
		t.Fatal(err)
	}
	attachDataNetwork(t, &attached)
	eventually(t, "the live ranks' data addresses in rank 0's table", func() error {
		addrs := first.Addresses()
		for _, rk := range getRun(t, key).Status.Ranks {
			if rk.Role != ebv1.RoleLive {
				continue
			}
			if int(rk.Rank) >= len(addrs) {
				return fmt.Errorf("rank 0 holds table %v", addrs)
			}
			if a := addrs[rk.Rank]; !strings.HasPrefix(a, "192.168.") || podIPs[strings.Split(a, ":")[0]] {
				return fmt.Errorf("live rank %d's address %q is not its data address (table %v)", rk.Rank, a, addrs)
			}
		}
		return nil
	})
	waitCondition(t, key, ebv1.ConditionNetworksFound, metav1.ConditionTrue, ebv1.ReasonAllNetworksFound, "every running builder pod has its data address there")
}

// A run on a Fabric has a PodDisruptionBudget that holds every pod its
// rank table may have (minAvailable: the ranks, a count, so that the
// disruption controller needs no scale of the run), following the table's
// size. A run taken off its Fabric loses it: with no operator to move its
// units off a drained node, a drain must be free to evict them (they are
// recreated elsewhere).
func TestDisruptionBudgetGoesWithTheFabric(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "pdb")
	run := fabricRun(ns, "pdb", "pdb", 2, 0)
	run.Spec.Resources = ebv1.UnitResources{}
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	pdbKey := client.ObjectKey{Namespace: ns, Name: builderpod.DisruptionBudgetName("pdb")}
	holdsEveryRank := func() error {
		var pdb policyv1.PodDisruptionBudget
		if err := k8s.Get(ctx, pdbKey, &pdb); err != nil {
			return err
		}
		ranks := getRun(t, key).Status.RankCount
		if min := pdb.Spec.MinAvailable; ranks == 0 || pdb.Spec.MaxUnavailable != nil || min == nil || min.IntValue() != int(ranks) || min.Type != intstr.Int {
			return fmt.Errorf("minAvailable %v, maxUnavailable %v; want minAvailable %d, the table's ranks", min, pdb.Spec.MaxUnavailable, ranks)
		}
		return nil
	}
	eventually(t, "the run's PodDisruptionBudget holding every rank", holdsEveryRank)
	// kubectl scale ebrun pdb --replicas 3: the disruption controller reads
	// no scale, the budget still counts ranks.
	if err := scaleRun(ctx, key, 3); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the PodDisruptionBudget following the table to 3 units", func() error {
		if n := getRun(t, key).Status.RankCount; n < 3 {
			return fmt.Errorf("%d ranks", n)
		}
		return holdsEveryRank()
	})

	run = getRun(t, key)
	patch := client.MergeFrom(run.DeepCopy()) // no resourceVersion: the operator writes the status meanwhile
	run.Spec.FabricRef = nil
	if err := k8s.Patch(ctx, run, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the PodDisruptionBudget gone with the Fabric", func() error {
		err := k8s.Get(ctx, pdbKey, &policyv1.PodDisruptionBudget{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("still there")
		}
		return err
	})
}
