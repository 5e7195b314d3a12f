package runplan

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderstatus"
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

// functions spells what a table's ranks run and for which unit, e.g. "RU0 BU0 -".
func functions(t planner.RankTable) string {
	var parts []string
	for _, r := range t.Ranks {
		if r.Role != planner.Live {
			parts = append(parts, "-")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s%d", r.Function, r.Unit))
	}
	return strings.Join(parts, " ")
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layout ebv1.Layout
		want   string
	}{
		{"folded without a fabric: unit = rank", ebv1.LayoutFolded, "RU+BU0 RU+BU1 RU+BU2"},
		{"unfolded without a fabric: the RUs, then their BUs", ebv1.LayoutUnfolded, "RU0 RU1 RU2 BU0 BU1 BU2"},
	} {
		table, err := Plan(&ebv1.EventBuilderRunSpec{Units: 3, Layout: tc.layout}, nil, 4)
		if err != nil || functions(table) != tc.want || table.Epoch != 5 || string(table.Layout) != string(tc.layout) {
			t.Errorf("%s: %s (%s) at epoch %d, %v; want %s at epoch 5", tc.name, functions(table), table.Layout, table.Epoch, err, tc.want)
		}
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
		{"failed pod of an earlier table, being deleted", Nodes{"s0": true, "s1": true, "s2": true, "s3": true},
			map[int32]*corev1.Pod{1: deleting(pod(corev1.PodFailed, "Evicted"))}, ""},
		{"failed pod of an earlier table, on another endpoint", Nodes{"s0": true, "s1": true, "s2": true, "s3": true},
			map[int32]*corev1.Pod{1: onEndpoint(pod(corev1.PodFailed, "Evicted"), "s3-1")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for rank, p := range tc.pods {
				if p.Labels == nil { // the operator's pods name their endpoint
					onEndpoint(p, table.Ranks[rank].Endpoint)
				}
			}
			var got []string
			for _, fl := range Failures(table, Endpoints(f), tc.nodes, tc.pods, nil) {
				got = append(got, fmt.Sprintf("%d:%s", fl.Rank, fl.Reason))
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("failures %q, want %q", s, tc.want)
			}
		})
	}

	// Without a fabric, ranks have no endpoint: only pods fail, and they are recreated.
	trivial, _ := Plan(&ebv1.EventBuilderRunSpec{Units: 2}, nil, 0)
	if got := Failures(trivial, nil, nil, map[int32]*corev1.Pod{0: pod(corev1.PodFailed, "Evicted")}, nil); len(got) != 0 {
		t.Errorf("failures without a fabric: %v", got)
	}
}

// A live rank its peers report lost fails; one builder reporting every
// peer lost fails itself, not them.
func TestLostPeers(t *testing.T) {
	f, table := plan(t, 5, 2, nil) // LLSSLLL. (live 0 1 4 5 6)
	table.Epoch = 3
	at := func(epoch int64, lost ...int32) builderstatus.Report {
		return builderstatus.Report{State: builderstatus.StateRunning, Epoch: epoch, LostPeers: lost}
	}
	for _, tc := range []struct {
		name    string
		reports map[int32]builderstatus.Report
		want    string
	}{
		{"nobody lost", map[int32]builderstatus.Report{0: at(3), 1: at(3), 4: at(3), 5: at(3), 6: at(3)}, ""},
		{"every survivor reports rank 4, which does not answer",
			map[int32]builderstatus.Report{0: at(3, 4), 1: at(3, 4), 5: at(3, 4), 6: at(3, 4)}, "4"},
		{"rank 4 answers, but its peers lost it",
			map[int32]builderstatus.Report{0: at(3, 4), 1: at(3, 4), 4: at(3), 5: at(3, 4), 6: at(3)}, "4"},
		{"one of four: no majority", map[int32]builderstatus.Report{0: at(3, 4), 1: at(3), 5: at(3), 6: at(3)}, ""},
		{"rank 0 lost its network and reports everyone; they report it",
			map[int32]builderstatus.Report{0: at(3, 1, 4, 5, 6), 1: at(3, 0), 4: at(3, 0), 5: at(3, 0), 6: at(3, 0)}, "0"},
		{"reports of an older epoch do not count (a failover is switching)",
			map[int32]builderstatus.Report{0: at(2, 4), 1: at(2, 4), 5: at(2, 4), 6: at(2, 4)}, ""},
		{"a spare or dummy rank reported lost is no unit failure",
			map[int32]builderstatus.Report{0: at(3, 2, 7), 1: at(3, 2, 7), 5: at(3, 2, 7), 6: at(3, 2, 7)}, ""},
		{"the only other reporter counts", map[int32]builderstatus.Report{0: at(3, 4)}, "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, fl := range Failures(table, Endpoints(f), Nodes{"s0": true, "s1": true, "s2": true, "s3": true}, nil, tc.reports) {
				if fl.Reason != ReasonPeerLost {
					t.Errorf("rank %d reason %s", fl.Rank, fl.Reason)
				}
				got = append(got, fmt.Sprint(fl.Rank))
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("lost %q, want %q", s, tc.want)
			}
		})
	}
}

// A spare whose pod failed is not used, and does not count as left.
func TestFailedSpares(t *testing.T) {
	f, table := plan(t, 5, 2, nil) // LLSSLLL., spares on s1 (ranks 2, 3)
	pods := map[int32]*corev1.Pod{
		2: onEndpoint(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "TopologyAffinityError"}}, "s1-0"),
		3: onEndpoint(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, "s1-1"),
	}
	failed := FailedSpares(table, pods)
	if len(failed) != 1 || failed["s1-0"] != "TopologyAffinityError" {
		t.Fatalf("FailedSpares = %v", failed)
	}
	g := WithoutEndpoints(f, failed)
	if n := SparesLeft(table, Endpoints(g)); n != 1 {
		t.Errorf("spares left %d, want 1", n)
	}
	if n := SparesLeft(table, Endpoints(f)); n != 2 {
		t.Errorf("the fabric given was changed: spares left %d, want 2", n)
	}
	// Rank 4 fails: it would go to the lowest spare, s1-0 (rank 2), which
	// is passed over.
	rec, err := Recover(g, table, []Failure{{4, "PodFailed"}}, ebv1.FailureRunDegraded)
	if err != nil || len(rec.Moves) != 1 || rec.Moves[0].SpareEndpoint != "s1-1" {
		t.Errorf("Recover: %+v, %v; want unit 2 on s1-1", rec.Moves, err)
	}
}

func deleting(p *corev1.Pod) *corev1.Pod {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

func onEndpoint(p *corev1.Pod, endpoint string) *corev1.Pod {
	p.Labels = map[string]string{builderpod.LabelEndpoint: endpoint}
	return p
}

func TestNodeHealth(t *testing.T) {
	now := time.Now()
	node := func(name string, status corev1.ConditionStatus, since time.Duration) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if status != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-since))}}
		}
		return n
	}
	gone := node("gone", corev1.ConditionTrue, time.Hour)
	gone.DeletionTimestamp = &metav1.Time{Time: now}
	nodes, wait := NodeHealth([]corev1.Node{
		node("ready", corev1.ConditionTrue, time.Hour),
		node("blip", corev1.ConditionFalse, 4*time.Second),
		node("down", corev1.ConditionFalse, 11*time.Second),
		node("lost", corev1.ConditionUnknown, time.Second),
		node("new", "", 0),
		gone,
	}, now, 10*time.Second)
	want := Nodes{"ready": true, "blip": true, "down": false, "lost": false, "new": false, "gone": false}
	if !maps.Equal(nodes, want) {
		t.Errorf("NodeHealth() = %v, want %v", nodes, want)
	}
	if wait != 6*time.Second {
		t.Errorf("wait %v, want 6s (what is left of blip's grace)", wait)
	}
	if _, wait := NodeHealth([]corev1.Node{node("ready", corev1.ConditionTrue, 0)}, now, 10*time.Second); wait != 0 {
		t.Errorf("wait %v with no node in its grace period", wait)
	}
}

func TestMovesSummaryIsBounded(t *testing.T) {
	moves := make([]ebv1.UnitMove, 40)
	for i := range moves {
		moves[i] = ebv1.UnitMove{Unit: int32(i), FailedRank: int32(i), FailedEndpoint: strings.Repeat("e", 40), Reason: ebv1.EndpointNodeNotReady}
	}
	s := Recovery{Outcome: ebv1.OutcomeDegraded, Moves: moves}.Summary()
	if len(s) > 800 || !strings.HasSuffix(s, "; and 35 more") || !strings.HasPrefix(s, "unit 0 on rank 0") {
		t.Errorf("summary (%d chars): %s", len(s), s)
	}
	if s := (Recovery{Outcome: ebv1.OutcomeDegraded, Moves: moves[:1]}).Summary(); strings.Contains(s, "more") || !strings.HasSuffix(s, "no spare left") {
		t.Errorf("one move: %s", s)
	}
}

// Without a fabric, a unit its peers lost rejoins on its own rank once its
// builder answers again; one that does not answer waits.
func TestLiveUnits(t *testing.T) {
	folded, _ := Plan(&ebv1.EventBuilderRunSpec{Units: 3}, nil, 0)
	unfolded, _ := Plan(&ebv1.EventBuilderRunSpec{Units: 3, Layout: ebv1.LayoutUnfolded}, nil, 0) // RU0 RU1 RU2 BU0 BU1 BU2
	moved := drop(unfolded, 0)
	moved.Ranks = append(moved.Ranks, planner.Rank{Rank: 6, Role: planner.Live, Unit: 0, Function: planner.RU})
	for _, tc := range []struct {
		name  string
		table planner.RankTable
		want  int32
	}{
		{"folded", folded, 3},
		{"folded, a unit lost", drop(folded, 1), 2},
		{"unfolded: a unit is its RU and its BU", unfolded, 3},
		{"unfolded, an RU lost", drop(unfolded, 1), 2},
		{"unfolded, a BU lost", drop(unfolded, 5), 2},
		{"unfolded, a unit's RU and BU lost", drop(drop(unfolded, 2), 5), 2},
		{"unfolded, an RU and another unit's BU lost", drop(drop(unfolded, 1), 5), 1},
		{"unfolded, an RU moved to a spare rank", moved, 3},
	} {
		if got := LiveUnits(tc.table); got != tc.want {
			t.Errorf("%s (%s): %d live units, want %d", tc.name, functions(tc.table), got, tc.want)
		}
	}
}

func TestRejoins(t *testing.T) {
	table, err := Plan(&ebv1.EventBuilderRunSpec{Units: 4}, nil, 2) // LLLL at epoch 3
	if err != nil {
		t.Fatal(err)
	}
	at := func(state string, epoch int64, lost ...int32) builderstatus.Report {
		return builderstatus.Report{State: state, Epoch: epoch, LostPeers: lost}
	}
	run := builderstatus.StateRunning
	restarted := at(builderstatus.StateNotReady, 0)
	for _, tc := range []struct {
		name    string
		reports map[int32]builderstatus.Report
		want    []int
	}{
		{"nobody lost", map[int32]builderstatus.Report{0: at(run, 3), 1: at(run, 3), 2: at(run, 3), 3: at(run, 3)}, nil},
		{"lost by all, restarted: answers NOT_READY",
			map[int32]builderstatus.Report{0: at(run, 3, 1), 1: restarted, 2: at(run, 3, 1), 3: at(run, 3, 1)}, []int{1}},
		{"lost by all, configured and started again at the epoch it was lost in",
			map[int32]builderstatus.Report{0: at(run, 3, 1), 1: at(run, 3), 2: at(run, 3, 1), 3: at(run, 3, 1)}, []int{1}},
		{"a partition healed: it answers, having lost them too",
			map[int32]builderstatus.Report{0: at(run, 3, 1), 1: at(run, 3, 0, 2, 3), 2: at(run, 3, 1), 3: at(run, 3, 1)}, []int{1}},
		{"two lost, both back: one rejoin for both",
			map[int32]builderstatus.Report{0: at(run, 3, 1, 3), 1: restarted, 2: at(run, 3, 1, 3), 3: restarted}, []int{1, 3}},
		{"two lost, one back: only it", map[int32]builderstatus.Report{0: at(run, 3, 1, 3), 1: restarted, 2: at(run, 3, 1, 3)}, []int{1}},
		{"lost but silent (its pod is being recreated): it waits",
			map[int32]builderstatus.Report{0: at(run, 3, 1), 2: at(run, 3, 1), 3: at(run, 3, 1)}, nil},
		{"lost and in ERROR: it must be reset or its pod deleted first",
			map[int32]builderstatus.Report{0: at(run, 3, 1), 1: at(builderstatus.StateError, 3), 2: at(run, 3, 1), 3: at(run, 3, 1)}, nil},
		{"one of three peers: no majority",
			map[int32]builderstatus.Report{0: at(run, 3, 1), 1: restarted, 2: at(run, 3), 3: at(run, 3)}, nil},
		{"reports of another epoch do not count (the rejoin epoch is switching)",
			map[int32]builderstatus.Report{0: at(run, 2, 1), 1: restarted, 2: at(run, 2, 1), 3: at(run, 2, 1)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Rejoins(table, tc.reports); !slices.Equal(got, tc.want) {
				t.Errorf("rejoins %v, want %v", got, tc.want)
			}
		})
	}

	rec := Rejoin(table, []int{1, 3})
	if roles(rec.Table) != "LLLL" || rec.Table.Epoch != 4 || table.Epoch != 3 || rec.Outcome != ebv1.OutcomeRejoined {
		t.Errorf("rejoin: %s at epoch %d (input now at %d), outcome %s; want the same table at epoch 4, Rejoined",
			roles(rec.Table), rec.Table.Epoch, table.Epoch, rec.Outcome)
	}
	for i, m := range rec.Moves {
		if want := int32(2*i + 1); m.Unit != want || m.FailedRank != want || m.Reason != ReasonPeerLost || m.SpareRank != nil {
			t.Errorf("move %d: %+v, want unit and rank %d, PeerLost, no spare", i, m, want)
		}
	}
	if s, want := rec.Summary(), "unit 1 on rank 1 failed: PeerLost; its builder answers again and rejoins on its rank; unit 3 on rank 3"; !strings.HasPrefix(s, want) {
		t.Errorf("summary %q, want it to start %q", s, want)
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
			rec, err := Recover(f, table, Failures(table, Endpoints(f), nodes, nil, nil), tc.policy)
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

func TestRejoinBackoffDelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    RejoinBackoff
		want map[int]time.Duration // by attempts
	}{
		{"default", DefaultRejoinBackoff, map[int]time.Duration{
			1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 5: 160 * time.Second, 6: 5 * time.Minute, 100: 5 * time.Minute}},
		{"the zero value is the default, not no back-off", RejoinBackoff{}, map[int]time.Duration{
			1: 10 * time.Second, 2: 20 * time.Second, 6: 5 * time.Minute, 100: 5 * time.Minute}},
		{"no First: the default's", RejoinBackoff{Max: time.Minute}, map[int]time.Duration{1: 10 * time.Second, 3: 40 * time.Second, 4: time.Minute}},
		{"no Max: the default's", RejoinBackoff{First: time.Second}, map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 100: 5 * time.Minute}},
		{"negative: the default's", RejoinBackoff{First: -time.Second, Max: -time.Second}, map[int]time.Duration{1: 10 * time.Second, 100: 5 * time.Minute}},
		{"set", RejoinBackoff{First: 2 * time.Second, Max: 4 * time.Second}, map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 4 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for attempts, want := range tc.want {
				if got := tc.b.Delay(attempts); got != want {
					t.Errorf("Delay(%d) = %v, want %v", attempts, got, want)
				}
			}
		})
	}
	// The zero value backs off in DecideRejoins too: a rejoin that failed
	// 1 s ago waits.
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	a := RejoinAttempts{1: {Attempts: 1, Epoch: 3, Time: t0.Add(-time.Second), Failed: true}}
	if a.Due(t0, RejoinBackoff{}) || len(a.Waiting(t0, RejoinBackoff{})) != 1 {
		t.Error("with the zero RejoinBackoff a failed rejoin is due at once")
	}
}

// Rank 1 of LLLL at epoch 3 is lost and answers; its rejoins back off
// while they do not hold.
func TestDecideRejoins(t *testing.T) {
	table, err := Plan(&ebv1.EventBuilderRunSpec{Units: 4}, nil, 2) // LLLL at epoch 3
	if err != nil {
		t.Fatal(err)
	}
	b := RejoinBackoff{First: 10 * time.Second, Max: 40 * time.Second}
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(s int) time.Time { return t0.Add(-time.Duration(s) * time.Second) }
	// A peer's report at epoch: rank 1 lost, up or (neither) connecting.
	peer := func(epoch int64, rank1 string) builderstatus.Report {
		rep := builderstatus.Report{State: builderstatus.StateRunning, Epoch: epoch, Peers: []builderstatus.Peer{{Rank: 1, State: rank1}}}
		if rank1 == builderstatus.PeerLost {
			rep.LostPeers = []int32{1}
		}
		return rep
	}
	// at: the peers' reports at epoch, rank 1 lost, up or connecting for
	// them; rank 1's builder in state self ("" silent): NOT_READY
	// restarted, else at epoch 3.
	const silent, restarted = "", builderstatus.StateNotReady
	run, paused, ready := builderstatus.StateRunning, builderstatus.StatePaused, builderstatus.StateReady
	at := func(epoch int64, rank1, self string) map[int32]builderstatus.Report {
		reps := map[int32]builderstatus.Report{0: peer(epoch, rank1), 2: peer(epoch, rank1), 3: peer(epoch, rank1)}
		switch self {
		case silent:
		case restarted:
			reps[1] = builderstatus.Report{State: self}
		default:
			reps[1] = builderstatus.Report{State: self, Epoch: 3}
		}
		return reps
	}
	// Ranks 1 and 2 lost by 0 and 3, both answering in state self at epoch 3.
	twoLost := func(self string) map[int32]builderstatus.Report {
		rep := builderstatus.Report{State: run, Epoch: 3, LostPeers: []int32{1, 2}}
		return map[int32]builderstatus.Report{0: rep, 3: rep, 1: {State: self, Epoch: 3}, 2: {State: self, Epoch: 3}}
	}
	pending := RejoinAttempt{Attempts: 1, Epoch: 3, Time: ago(1)}
	failed := func(attempts int, secondsAgo int) RejoinAttempt {
		return RejoinAttempt{Attempts: attempts, Epoch: 3, Time: ago(secondsAgo), Failed: true}
	}
	for _, tc := range []struct {
		name     string
		reports  map[int32]builderstatus.Report
		attempts RejoinAttempts
		want     RejoinDecision
	}{
		{"first rejoin of a restarted process: at once", at(3, builderstatus.PeerLost, restarted), RejoinAttempts{},
			RejoinDecision{Now: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0}}, Changed: true}},
		{"a partition (healed or not): it still runs its session, RUNNING; reset first", at(3, builderstatus.PeerLost, run), RejoinAttempts{},
			RejoinDecision{Now: []int{1}, Reset: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0}}, Changed: true}},
		{"PAUSED in its session: reset first", at(3, builderstatus.PeerLost, paused), RejoinAttempts{},
			RejoinDecision{Now: []int{1}, Reset: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0}}, Changed: true}},
		{"READY: no session to leave, not reset", at(3, builderstatus.PeerLost, ready), RejoinAttempts{},
			RejoinDecision{Now: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0}}, Changed: true}},
		{"in ERROR: neither rejoined nor reset", at(3, builderstatus.PeerLost, builderstatus.StateError), RejoinAttempts{},
			RejoinDecision{Attempts: RejoinAttempts{}}},
		{"its epoch is being switched to: the peers still report the old one", at(2, builderstatus.PeerLost, run),
			RejoinAttempts{1: pending}, RejoinDecision{Attempts: RejoinAttempts{1: pending}}},
		{"joining: neither lost nor up yet", at(3, "connecting", run),
			RejoinAttempts{1: pending}, RejoinDecision{Attempts: RejoinAttempts{1: pending}}},
		{"lost again at its epoch: failed, the next waits 10 s, nothing reset", at(3, builderstatus.PeerLost, run), RejoinAttempts{1: pending},
			RejoinDecision{Failed: []int{1}, Attempts: RejoinAttempts{1: failed(1, 1)}, Changed: true}},
		{"lost at a later epoch than its rejoin's: failed too", at(3, builderstatus.PeerLost, run),
			RejoinAttempts{1: {Attempts: 1, Epoch: 2, Time: ago(1)}},
			RejoinDecision{Failed: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 2, Time: ago(1), Failed: true}}, Changed: true}},
		{"still waiting", at(3, builderstatus.PeerLost, run), RejoinAttempts{1: failed(1, 5)},
			RejoinDecision{Attempts: RejoinAttempts{1: failed(1, 5)}}},
		{"waited: the second rejoin, RUNNING where the first left it: reset first", at(3, builderstatus.PeerLost, run), RejoinAttempts{1: failed(1, 10)},
			RejoinDecision{Now: []int{1}, Reset: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 2, Epoch: 4, Time: t0}}, Changed: true}},
		{"after two, 20 s", at(3, builderstatus.PeerLost, run), RejoinAttempts{1: failed(2, 15)},
			RejoinDecision{Attempts: RejoinAttempts{1: failed(2, 15)}}},
		{"after nine, the 40 s cap", at(3, builderstatus.PeerLost, run), RejoinAttempts{1: failed(9, 40)},
			RejoinDecision{Now: []int{1}, Reset: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 10, Epoch: 4, Time: t0}}, Changed: true}},
		{"silent once its wait is over: it waits for its builder", at(3, builderstatus.PeerLost, silent), RejoinAttempts{1: failed(1, 60)},
			RejoinDecision{Attempts: RejoinAttempts{1: failed(1, 60)}}},
		{"its peers report it up: it held, the record goes", at(3, builderstatus.PeerUp, run), RejoinAttempts{1: failed(3, 1)},
			RejoinDecision{Attempts: RejoinAttempts{}, Changed: true}},
		{"a record of a rank no longer live goes", at(3, builderstatus.PeerUp, run), RejoinAttempts{7: failed(1, 1)},
			RejoinDecision{Attempts: RejoinAttempts{}, Changed: true}},
		{"one rejoins, one waits: the new epoch reaches both, both in their session are reset", twoLost(run),
			RejoinAttempts{2: failed(1, 5)},
			RejoinDecision{Now: []int{1}, Reset: []int{1, 2}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0}, 2: failed(1, 5)}, Changed: true}},
		{"both waiting: no epoch, nothing reset", twoLost(run), RejoinAttempts{1: failed(1, 5), 2: failed(1, 5)},
			RejoinDecision{Attempts: RejoinAttempts{1: failed(1, 5), 2: failed(1, 5)}}},
		{"one rejoins, the other restarted: nothing to reset", twoLost(restarted), RejoinAttempts{2: failed(1, 5)},
			RejoinDecision{Now: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0}, 2: failed(1, 5)}, Changed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DecideRejoins(table, tc.reports, tc.attempts, t0, b)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}

	if (RejoinAttempts{1: failed(1, 9)}).Due(t0, b) || !(RejoinAttempts{1: failed(1, 10)}).Due(t0, b) ||
		(RejoinAttempts{1: pending}).Due(t0.Add(time.Hour), b) {
		t.Error("Due: a failed rejoin is due once its delay has passed, a pending one never")
	}
	waiting := RejoinAttempts{3: failed(2, 15), 1: failed(1, 5), 2: failed(1, 10), 0: pending}.Waiting(t0, b)
	if want := []Deferral{{Rank: 1, Attempts: 1, Until: t0.Add(5 * time.Second)}, {Rank: 3, Attempts: 2, Until: t0.Add(5 * time.Second)}}; !reflect.DeepEqual(waiting, want) {
		t.Errorf("waiting %+v, want %+v (failed and not due, by rank)", waiting, want)
	}
	if s := (Deferral{Rank: 1, Attempts: 2, Until: t0}).String(); s != "rank 1 waits to rejoin until 2030-01-01T12:00:00Z (failed rejoins: 2)" {
		t.Errorf("deferral %q", s)
	}
}
