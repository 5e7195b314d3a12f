package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// A run of 2 units with one warm spare server (2 spare endpoints) on a Fabric
// made of the kind workers' NUMA halves loses a live unit the way a farm sees
// it: its builder pod vanishes. The operator does not count a missing pod as a
// failure (it recreates it in place); the surviving builder reports the peer
// lost, and that (PeerLost) moves the unit to a spare by a new epoch. The
// survivor switches to the new table without restarting, and events keep being
// built, none incomplete.
func TestFailoverToWarmSpare(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	const (
		namespaceName = "e2e-failover"
		fabricName    = "e2e-failover"
		runName       = "failover"
	)
	workers := workerNodes(ctx, t)
	if len(workers) < 2 {
		t.Fatalf("need 2 worker nodes for a Fabric of two servers, found %v", workers)
	}
	workers = workers[:2]

	ensureNamespace(ctx, t, namespaceName)
	// A reused cluster may hold what an earlier, failed attempt left.
	removeRunAndFabric(ctx, t, client.ObjectKey{Namespace: namespaceName, Name: runName}, fabricName)

	fabric := workerFabric(fabricName, workers)
	if err := k8sClient.Create(ctx, fabric); err != nil {
		t.Fatalf("create fabric: %v", err)
	}
	waitFor(ctx, t, "the fabric's 4 endpoints to be schedulable and valid", 2*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(fabric), fabric); err != nil {
			return false, err.Error()
		}
		st := fabric.Status
		return st.SchedulableEndpoints == 4 && meta.IsStatusConditionTrue(st.Conditions, ebv1alpha1.FabricValid),
			fmt.Sprintf("schedulable=%d/%d conditions=%v unschedulable=%v", st.SchedulableEndpoints, st.Endpoints, st.Conditions, st.Unschedulable)
	})

	run := &ebv1alpha1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: runName, Namespace: namespaceName},
		Spec: ebv1alpha1.EventBuilderRunSpec{
			FabricRef:     &ebv1alpha1.FabricReference{Name: fabricName},
			Units:         2,
			Spares:        2,
			FailurePolicy: ebv1alpha1.FailureRunDegraded,
			Builder: ebv1alpha1.BuilderSpec{
				Image:           env.builderImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
			},
		},
	}
	if err := k8sClient.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	key := client.ObjectKeyFromObject(run)
	get := func() error { return k8sClient.Get(ctx, key, run) }

	// Running, with both spares' builders up and standing by: only then is
	// a failover one to a warm spare.
	waitFor(ctx, t, "phase Running with events built and 2 warm spares standing by", 6*time.Minute, func() (bool, string) {
		if err := get(); err != nil {
			return false, err.Error()
		}
		standing := 0
		for _, rk := range run.Status.Ranks {
			if rk.Role == ebv1alpha1.RoleSpare && rk.State == "RUNNING" {
				standing++
			}
		}
		return run.Status.Phase == ebv1alpha1.PhaseRunning && run.Status.EventsBuilt > 0 &&
			run.Status.LiveUnits == 2 && run.Status.SparesLeft == 2 && standing == 2, describeFailover(run)
	})
	first := run.Status.EventsBuilt
	waitFor(ctx, t, "events built to increase", 2*time.Minute, func() (bool, string) {
		if err := get(); err != nil {
			return false, err.Error()
		}
		return run.Status.EventsBuilt > first, describeFailover(run)
	})
	t.Logf("running: %s", describeFailover(run))
	if run.Status.LastFailover != nil {
		t.Fatalf("a failover happened before any unit failed: %s", describeFailover(run))
	}
	if run.Status.EventsIncomplete != 0 {
		t.Fatalf("run delivered %d incomplete events before the failover, want 0: %s", run.Status.EventsIncomplete, describeFailover(run))
	}

	// What the shift crew sees before the failure: the console in a browser
	// (every endpoint drawn once, coloured by its rank's role and state) and
	// the plugin.
	crew := openConsole(ctx, t, namespaceName)
	crew.refusesAnonymous(ctx, t)
	crew.waitForPage(ctx, t, run, fabric, "console-failover-before")
	if out := pluginSays(ctx, t, "status", namespaceName, runName); !strings.Contains(out,
		fmt.Sprintf("Run %s/%s: Running (wanted Running), epoch %d", namespaceName, runName, run.Status.Epoch)) {
		t.Errorf("kubectl eventbuilder status before the failure does not say Running at epoch %d", run.Status.Epoch)
	}
	pluginSays(ctx, t, "ranks", namespaceName, runName)

	// The victim is the lowest live rank, the survivor the other one.
	before := run.DeepCopy()
	var live, spares []ebv1alpha1.RankStatus
	for _, rk := range before.Status.Ranks {
		switch rk.Role {
		case ebv1alpha1.RoleLive:
			live = append(live, rk)
		case ebv1alpha1.RoleSpare:
			spares = append(spares, rk)
		}
	}
	if len(live) != 2 || len(spares) != 2 || live[0].Pod == "" || live[1].Pod == "" || live[0].Unit == nil {
		t.Fatalf("want 2 live ranks with pods and 2 spare ranks, have %s", describeFailover(before))
	}
	victim, survivor := live[0], live[1]
	survivorPod := builderPod(ctx, t, namespaceName, survivor.Pod)
	sparePods := map[int32]*corev1.Pod{}
	for _, rk := range spares {
		sparePods[rk.Rank] = builderPod(ctx, t, namespaceName, rk.Pod)
	}
	victimPod := builderPod(ctx, t, namespaceName, victim.Pod)
	t.Logf("failing unit %d: deleting pod %s (rank %d, endpoint %s) with grace period 0; survivor %s (rank %d), spares %v",
		*victim.Unit, victim.Pod, victim.Rank, victim.Endpoint, survivor.Pod, survivor.Rank, rankNames(spares))
	deleted := deleteBuilderPod(ctx, t, victimPod)

	// The failover: published with its record, then configured on every
	// live builder, which all run the new epoch.
	var seen incompleteSeen
	waitForNewEpoch(ctx, t, run, before, 2, ebv1alpha1.PhaseRunning, "a failover to a spare", &seen)
	switched := time.Now()
	after := run.DeepCopy()
	fo := after.Status.LastFailover
	t.Logf("failed over: %s", describeFailover(after))

	if fo.Outcome != ebv1alpha1.OutcomeMovedToSpare || len(fo.Moves) != 1 {
		t.Fatalf("lastFailover: want outcome %s with 1 move, have %s", ebv1alpha1.OutcomeMovedToSpare, describeFailover(after))
	}
	move := fo.Moves[0]
	if move.FailedRank != victim.Rank || move.Unit != *victim.Unit || move.FailedEndpoint != victim.Endpoint {
		t.Errorf("lastFailover moved unit %d of rank %d (%s), want unit %d of rank %d (%s): %s",
			move.Unit, move.FailedRank, move.FailedEndpoint, *victim.Unit, victim.Rank, victim.Endpoint, describeFailover(after))
	}
	if move.Reason != "PeerLost" {
		t.Errorf("lastFailover reason %q, want PeerLost (the survivor reports the deleted unit lost): %s", move.Reason, describeFailover(after))
	}
	if move.SpareRank == nil {
		t.Fatalf("lastFailover has no spareRank: %s", describeFailover(after))
	}
	spare := *move.SpareRank
	spareIndex := slices.IndexFunc(spares, func(rk ebv1alpha1.RankStatus) bool { return rk.Rank == spare })
	if spareIndex < 0 || spares[spareIndex].Endpoint != move.SpareEndpoint {
		t.Fatalf("lastFailover moved to rank %d (%s), which was not a spare before (spares: %v): %s",
			spare, move.SpareEndpoint, rankNames(spares), describeFailover(after))
	}
	if fo.Epoch != after.Status.Epoch || after.Status.Epoch <= before.Status.Epoch {
		t.Errorf("epoch: lastFailover %d, status %d, before the failure %d; want lastFailover = status > before",
			fo.Epoch, after.Status.Epoch, before.Status.Epoch)
	}
	rank := func(r int32) ebv1alpha1.RankStatus {
		i := slices.IndexFunc(after.Status.Ranks, func(rk ebv1alpha1.RankStatus) bool { return rk.Rank == r })
		if i < 0 {
			t.Fatalf("rank %d missing from status.ranks: %s", r, describeFailover(after))
		}
		return after.Status.Ranks[i]
	}
	if rk := rank(spare); rk.Role != ebv1alpha1.RoleLive || rk.Unit == nil || *rk.Unit != *victim.Unit || rk.Endpoint != move.SpareEndpoint {
		t.Errorf("spare rank %d after the failover: role %s, unit %v, endpoint %s; want Live with unit %d on %s: %s",
			spare, rk.Role, ptrString(rk.Unit), rk.Endpoint, *victim.Unit, move.SpareEndpoint, describeFailover(after))
	}
	if rk := rank(victim.Rank); rk.Role != ebv1alpha1.RoleDummy {
		t.Errorf("failed rank %d after the failover: role %s, want Dummy: %s", victim.Rank, rk.Role, describeFailover(after))
	}
	if rk := rank(survivor.Rank); rk.Role != ebv1alpha1.RoleLive || rk.Unit == nil || *rk.Unit != *survivor.Unit {
		t.Errorf("surviving rank %d after the failover: role %s, unit %v; want Live with unit %d: %s",
			survivor.Rank, rk.Role, ptrString(rk.Unit), *survivor.Unit, describeFailover(after))
	}
	var unitRanks []int32
	for _, u := range after.Status.Units {
		unitRanks = append(unitRanks, u.Rank)
	}
	if want := []int32{min(survivor.Rank, spare), max(survivor.Rank, spare)}; !slices.Equal(unitRanks, want) {
		t.Errorf("status.units are ranks %v, want %v (the survivor and the spare): %s", unitRanks, want, describeFailover(after))
	}
	if after.Status.SparesLeft != 1 || after.Status.LiveUnits != 2 {
		t.Errorf("after the failover: %d spares left and %d live units, want 1 and 2: %s",
			after.Status.SparesLeft, after.Status.LiveUnits, describeFailover(after))
	}

	t.Logf("failover figures: unit %d rank %d (%s) -> spare rank %d (%s), reason %s, epoch %d -> %d; %s",
		move.Unit, move.FailedRank, move.FailedEndpoint, spare, move.SpareEndpoint, move.Reason,
		before.Status.Epoch, fo.Epoch, failoverFigures(fo, deleted, switched))

	waitForEveryUnitToBuild(ctx, t, run, after, "after the failover", &seen)
	if run.Status.LastFailover == nil || run.Status.LastFailover.Epoch != fo.Epoch {
		t.Errorf("a second failover happened after the first: %s", describeFailover(run))
	}

	// No restart: neither the survivor nor the spare that took over.
	assertNotRestarted(ctx, t, "surviving live unit's", survivorPod)
	assertNotRestarted(ctx, t, "spare's", sparePods[spare])

	// And what the crew sees after it: the failed unit's endpoint marked as
	// where a unit failed (its rank is a dummy, placed nowhere), the spare's
	// endpoint building, the move in the failovers; the plugin says the same.
	page := crew.waitForPage(ctx, t, run, fabric, "console-failover-after")
	// The page matches the status read with it; the victim's endpoint may
	// be offered again already (after reofferRest), a spare then.
	vacated := !slices.ContainsFunc(run.Status.Ranks, func(rk ebv1alpha1.RankStatus) bool { return rk.Endpoint == victim.Endpoint })
	for _, b := range page.Endpoints {
		if b.ID == "endpoint-"+victim.Endpoint && vacated && b.Class != "endpoint failed" {
			t.Errorf("console: the failed unit's endpoint %s has class %q after the failover, want \"endpoint failed\"", victim.Endpoint, b.Class)
		}
		if b.ID == "endpoint-"+move.SpareEndpoint && b.Class != "endpoint live" {
			t.Errorf("console: the spare's endpoint %s has class %q after the failover, want \"endpoint live\"", move.SpareEndpoint, b.Class)
		}
	}
	if !strings.Contains(page.Failovers, victim.Endpoint) || !strings.Contains(page.Failovers, move.SpareEndpoint) {
		t.Errorf("console: the failovers do not name %s and %s:\n%s", victim.Endpoint, move.SpareEndpoint, page.Failovers)
	}
	if out := pluginSays(ctx, t, "status", namespaceName, runName); !strings.Contains(out, fmt.Sprintf("epoch %d", fo.Epoch)) ||
		!strings.Contains(out, "Last failover: "+string(ebv1alpha1.OutcomeMovedToSpare)) {
		t.Errorf("kubectl eventbuilder status after the failover does not say epoch %d and the move to a spare", fo.Epoch)
	}
	pluginSays(ctx, t, "ranks", namespaceName, runName)
	pluginSays(ctx, t, "failovers", namespaceName, runName)
	crew.waitForPrometheusRate(ctx, t, run, "console-failover-after")

	// The victim's server is alive (the survivor answers there), so its
	// endpoint, vacated by its own unit's failure, rests reofferRest and is
	// a warm spare again: the run has both its spares back.
	var offered time.Time
	waitFor(ctx, t, "the victim's endpoint a warm spare again", 2*time.Minute, func() (bool, string) {
		if err := get(); err != nil {
			return false, err.Error()
		}
		offered = eventTime(ctx, t, run, "SparesReplenished", victim.Endpoint)
		standing := slices.ContainsFunc(run.Status.Ranks, func(rk ebv1alpha1.RankStatus) bool {
			return rk.Endpoint == victim.Endpoint && rk.Role == ebv1alpha1.RoleSpare && rk.State == "RUNNING"
		})
		return !offered.IsZero() && standing && run.Status.SparesLeft == 2, describeFailover(run)
	})
	rested := offered.Sub(fo.ObservedTime.Time)
	t.Logf("the victim's endpoint %s offered again %s after the failover (rest %s): %s", victim.Endpoint,
		rested.Round(100*time.Millisecond), reofferRest, describeFailover(run))
	if rested < reofferRest || rested > reofferRest+timingMargin {
		t.Errorf("the victim's endpoint was offered again %s after the failover, want its rest %s (plus at most %s)",
			rested.Round(100*time.Millisecond), reofferRest, timingMargin)
	}

	removeRunAndFabric(ctx, t, key, fabricName)
}

// reofferRest is the chart's reofferVacatedAfter: how long an endpoint
// vacated by its own unit's failure rests, its server alive, before it is
// offered again.
const reofferRest = 15 * time.Second

// eventTime is when the run's last Event of reason whose note names text
// was emitted; zero when there is none.
func eventTime(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun, reason, text string) time.Time {
	t.Helper()
	var events corev1.EventList
	if err := k8sClient.List(ctx, &events, client.InNamespace(run.Namespace),
		client.MatchingFields{"involvedObject.name": run.Name, "reason": reason}); err != nil {
		t.Logf("events %s of %s/%s: %v", reason, run.Namespace, run.Name, err)
		return time.Time{}
	}
	var at time.Time
	for _, e := range events.Items {
		if when := eventAt(e); strings.Contains(e.Message, text) && when.After(at) {
			at = when
		}
	}
	return at
}

// workerFabric is a Fabric of one leaf of 4 ports and one spine: each of the
// two workers is a dual-NUMA server whose halves are cabled to adjacent
// ports, the first worker's to ports 0 and 1 (where the planner puts live
// units first). No RDMA devices, netdevs or readout streams: kind nodes
// have none.
func workerFabric(name string, workers []string) *ebv1alpha1.Fabric {
	fabric := &ebv1alpha1.Fabric{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       ebv1alpha1.FabricSpec{Leaves: 1, Spines: 1, PortsPerLeaf: 4},
	}
	for i, node := range workers {
		for numa := range int32(2) {
			fabric.Spec.Endpoints = append(fabric.Spec.Endpoints, ebv1alpha1.FabricEndpoint{
				Name: fmt.Sprintf("%s-numa%d", node, numa), Node: node, NUMA: numa, Leaf: 0, Port: int32(2*i) + numa,
			})
		}
	}
	return fabric
}

// workerNodes lists the nodes without the control-plane role, by name.
func workerNodes(ctx context.Context, t *testing.T) []string {
	t.Helper()
	var nodes corev1.NodeList
	if err := k8sClient.List(ctx, &nodes); err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	var workers []string
	for _, n := range nodes.Items {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; !cp {
			workers = append(workers, n.Name)
		}
	}
	slices.Sort(workers)
	return workers
}

// describeFailover is describe(run) with the epoch, the rank table, the live
// units' builders and the last failover record.
func describeFailover(run *ebv1alpha1.EventBuilderRun) string {
	var b strings.Builder
	b.WriteString(describe(run))
	fmt.Fprintf(&b, " epoch=%d spares=%d live=%d", run.Status.Epoch, run.Status.SparesLeft, run.Status.LiveUnits)
	if c := meta.FindStatusCondition(run.Status.Conditions, ebv1alpha1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
		fmt.Fprintf(&b, " ready=%s(%s: %s)", c.Status, c.Reason, c.Message)
	}
	if c := meta.FindStatusCondition(run.Status.Conditions, ebv1alpha1.ConditionConfigured); c != nil {
		fmt.Fprintf(&b, " configured=%s(%s)", c.Status, c.Message)
	}
	b.WriteString(" ranks=[")
	for i, rk := range run.Status.Ranks {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d:%s", rk.Rank, rk.Role)
		if rk.Unit != nil {
			fmt.Fprintf(&b, "/u%d", *rk.Unit)
		}
		if rk.Endpoint != "" {
			fmt.Fprintf(&b, "@%s", rk.Endpoint)
		}
		if rk.Pod != "" {
			fmt.Fprintf(&b, "(%s %s)", rk.Pod, rk.State)
		}
	}
	b.WriteString("] units=[")
	for i, u := range run.Status.Units {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d:%s epoch=%d pending=%d built=%d incomplete=%d dropped=%d lost=%v",
			u.Rank, u.State, u.Epoch, u.PendingEpoch, u.EventsBuilt, u.EventsIncomplete, u.EventsDropped, u.LostPeers)
		if u.LastError != "" {
			fmt.Fprintf(&b, " error=%q", u.LastError)
		}
	}
	b.WriteString("] lastFailover=")
	if run.Status.LastFailover == nil {
		b.WriteString("none")
	} else {
		raw, _ := json.Marshal(run.Status.LastFailover) // plain API types: cannot fail
		b.Write(raw)
	}
	return b.String()
}

func rankNames(ranks []ebv1alpha1.RankStatus) []string {
	out := make([]string, len(ranks))
	for i, rk := range ranks {
		out[i] = fmt.Sprintf("%d@%s(%s)", rk.Rank, rk.Endpoint, rk.Pod)
	}
	return out
}

func ptrString(p *int32) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}
