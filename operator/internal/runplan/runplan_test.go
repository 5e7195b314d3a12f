package runplan

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/planner"
)

// fabric is 2 leaves of 4 ports, 2 spines, and four dual-NUMA servers
// s0..s3: sS NUMA n on leaf S/2, port 2*(S%2)+n; every node Ready.
func fabric() (*ebv1.FabricSpec, Nodes) {
	spec := &ebv1.FabricSpec{Leaves: 2, Spines: 2, PortsPerLeaf: 4, LinksPerPair: 1}
	nodes := Nodes{}
	for s := range 4 {
		node := fmt.Sprintf("s%d", s)
		nodes[node] = true
		for n := range 2 {
			spec.Endpoints = append(spec.Endpoints, ebv1.FabricEndpoint{
				Name: fmt.Sprintf("%s-%d", node, n), Node: node, NUMA: int32(n), Leaf: int32(s / 2), Port: int32(2*(s%2) + n),
			})
		}
	}
	return spec, nodes
}

// roles spells a table: L live, S spare, . dummy.
func roles(t planner.RankTable) string {
	var b strings.Builder
	for _, r := range t.Ranks {
		b.WriteString(map[planner.Role]string{planner.Live: "L", planner.Spare: "S", planner.Dummy: "."}[r.Role])
	}
	return b.String()
}

func plan(t *testing.T, units, spares int32, nodes Nodes) (planner.Fabric, planner.RankTable) {
	t.Helper()
	spec, all := fabric()
	if nodes == nil {
		nodes = all
	}
	f := Fabric(spec, nodes)
	table, err := Plan(&ebv1.EventBuilderRunSpec{Units: units, Spares: spares}, &f, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f, table
}

func TestPlan(t *testing.T) {
	table, err := Plan(&ebv1.EventBuilderRunSpec{Units: 3}, nil, 4)
	if err != nil || roles(table) != "LLL" || table.Epoch != 5 || table.Ranks[2].Unit != 2 {
		t.Errorf("without a fabric: %s epoch %d unit %d, %v; want LLL at epoch 5, unit = rank", roles(table), table.Epoch, table.Ranks[2].Unit, err)
	}
	if _, table := plan(t, 5, 2, nil); roles(table) != "LLSSLLL." || table.Epoch != 1 {
		t.Errorf("on the fabric: %s epoch %d, want LLSSLLL. at 1", roles(table), table.Epoch)
	}
	// s1 not Ready: its endpoints are not used.
	spec, nodes := fabric()
	nodes["s1"] = false
	f := Fabric(spec, nodes)
	if _, err := Plan(&ebv1.EventBuilderRunSpec{Units: 5, Spares: 2}, &f, 0); err == nil || !strings.Contains(err.Error(), "s1-0") {
		t.Errorf("7 of 6 schedulable endpoints: err %v, want one naming s1's endpoints", err)
	}
}

func TestFailures(t *testing.T) {
	f, table := plan(t, 5, 2, nil) // LLSSLLL.
	pod := func(phase corev1.PodPhase, reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, Reason: reason}}
	}
	for _, tc := range []struct {
		name  string
		nodes Nodes
		pods  map[int32]*corev1.Pod
		want  string
	}{
		{"all well", Nodes{"s0": true, "s1": true, "s2": true, "s3": true}, map[int32]*corev1.Pod{0: pod(corev1.PodRunning, "")}, ""},
		{"missing pods are recreated, not failed", Nodes{"s0": true, "s1": true, "s2": true, "s3": true}, nil, ""},
		{"server NotReady fails both its units", Nodes{"s0": false, "s1": true, "s2": true, "s3": true}, nil, "0:NodeNotReady 1:NodeNotReady"},
		{"server deleted", Nodes{"s0": true, "s1": true, "s3": true}, nil, "4:NodeNotFound 5:NodeNotFound"},
		{"a spare's node down is no unit failure", Nodes{"s0": true, "s1": false, "s2": true, "s3": true}, nil, ""},
		{"topology admission refused", Nodes{"s0": true, "s1": true, "s2": true, "s3": true},
			map[int32]*corev1.Pod{6: pod(corev1.PodFailed, "TopologyAffinityError")}, "6:TopologyAffinityError"},
		{"failed without a reason", Nodes{"s0": true, "s1": true, "s2": true, "s3": true},
			map[int32]*corev1.Pod{1: pod(corev1.PodFailed, "")}, "1:PodFailed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, fl := range Failures(table, Endpoints(f), tc.nodes, tc.pods) {
				got = append(got, fmt.Sprintf("%d:%s", fl.Rank, fl.Reason))
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("failures %q, want %q", s, tc.want)
			}
		})
	}

	// Without a fabric, ranks have no endpoint: only pods fail, and they are recreated.
	trivial, _ := Plan(&ebv1.EventBuilderRunSpec{Units: 2}, nil, 0)
	if got := Failures(trivial, nil, nil, map[int32]*corev1.Pod{0: pod(corev1.PodFailed, "Evicted")}); len(got) != 0 {
		t.Errorf("failures without a fabric: %v", got)
	}
}

func TestRecover(t *testing.T) {
	for _, tc := range []struct {
		name        string
		units       int32
		spares      int32
		down        string
		policy      ebv1.FailurePolicy
		wantRoles   string
		wantOutcome string
		wantMoves   string
	}{
		{"both units of a server to the spare server", 5, 2, "s0", ebv1.FailureRunDegraded, "..LLLLL.", ebv1.OutcomeMovedToSpare, "0->2 1->3"},
		{"one spare for two units: degraded", 5, 1, "s0", ebv1.FailureRunDegraded, "..LLLL..", ebv1.OutcomeDegraded, "0->3 1->none"},
		{"no spare, policy Stop", 4, 0, "s1", ebv1.FailureStop, "LL..", ebv1.OutcomeStopped, "2->none 3->none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, nodes := fabric()
			f, table := plan(t, tc.units, tc.spares, nodes)
			before := roles(table)
			nodes[tc.down] = false
			f = Fabric(spec, nodes)
			rec, err := Recover(f, table, Failures(table, Endpoints(f), nodes, nil), tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			var moves []string
			for _, m := range rec.Moves {
				to := "none"
				if m.SpareRank != nil {
					to = fmt.Sprint(*m.SpareRank)
				}
				moves = append(moves, fmt.Sprintf("%d->%s", m.FailedRank, to))
			}
			if got := roles(rec.Table); got != tc.wantRoles || rec.Outcome != tc.wantOutcome || strings.Join(moves, " ") != tc.wantMoves {
				t.Errorf("roles %s outcome %s moves %v; want %s %s %s", got, rec.Outcome, moves, tc.wantRoles, tc.wantOutcome, tc.wantMoves)
			}
			if rec.Table.Epoch != table.Epoch+1 {
				t.Errorf("epoch %d after %d: want one epoch per recovery", rec.Table.Epoch, table.Epoch)
			}
			if roles(table) != before || table.Epoch != 1 {
				t.Errorf("Recover changed its input table: %s at epoch %d, was %s at 1", roles(table), table.Epoch, before)
			}
		})
	}
}

func TestBlocked(t *testing.T) {
	_, full := plan(t, 4, 0, nil)    // LLLL: leaf 0 full
	_, spares := plan(t, 4, 2, nil)  // spares are dummy ranks
	_, partial := plan(t, 3, 0, nil) // an idle port
	for _, tc := range []struct {
		name       string
		table      planner.RankTable
		dummyRanks bool
		want       bool
	}{
		{"every port live", full, false, false},
		{"spares, builder cannot skip dummies", spares, false, true},
		{"idle port, builder cannot skip dummies", partial, false, true},
		{"spares, builder skips dummies", spares, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg, blocked := Blocked(tc.table, tc.dummyRanks)
			if blocked != tc.want {
				t.Fatalf("blocked %v (%s), want %v", blocked, msg, tc.want)
			}
			if blocked && (reason != ebv1.ReasonBuilderLacksDummySupport || !strings.Contains(msg, "spec.units")) {
				t.Errorf("reason %s message %q", reason, msg)
			}
		})
	}
}

func TestRequestKeyChangesWithWhatIsPlanned(t *testing.T) {
	a := &ebv1.EventBuilderRunSpec{Units: 4, Spares: 2, FabricRef: &ebv1.FabricReference{Name: "f"}}
	b := a.DeepCopy()
	b.Builder.Image = "other"
	if RequestKey(a) != RequestKey(b) {
		t.Error("the builder image changed the plan key")
	}
	b.Spares = 0
	if RequestKey(a) == RequestKey(b) {
		t.Error("spares did not change the plan key")
	}
}
