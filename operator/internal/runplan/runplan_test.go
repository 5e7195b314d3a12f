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
	"daq.io/eventbuilder/operator/internal/builderapi"
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
	at := func(epoch int64, lost ...int32) builderapi.Report {
		return builderapi.Report{State: builderapi.StateRunning, Epoch: epoch, LostPeers: lost}
	}
	for _, tc := range []struct {
		name    string
		reports map[int32]builderapi.Report
		want    string
	}{
		{"nobody lost", map[int32]builderapi.Report{0: at(3), 1: at(3), 4: at(3), 5: at(3), 6: at(3)}, ""},
		{"every survivor reports rank 4, which does not answer",
			map[int32]builderapi.Report{0: at(3, 4), 1: at(3, 4), 5: at(3, 4), 6: at(3, 4)}, "4"},
		{"rank 4 answers, but its peers lost it",
			map[int32]builderapi.Report{0: at(3, 4), 1: at(3, 4), 4: at(3), 5: at(3, 4), 6: at(3)}, "4"},
		{"one of four: no majority", map[int32]builderapi.Report{0: at(3, 4), 1: at(3), 5: at(3), 6: at(3)}, ""},
		{"rank 0 lost its network and reports everyone; they report it",
			map[int32]builderapi.Report{0: at(3, 1, 4, 5, 6), 1: at(3, 0), 4: at(3, 0), 5: at(3, 0), 6: at(3, 0)}, "0"},
		{"reports of an older epoch do not count (a failover is switching)",
			map[int32]builderapi.Report{0: at(2, 4), 1: at(2, 4), 5: at(2, 4), 6: at(2, 4)}, ""},
		{"a spare or dummy rank reported lost is no unit failure",
			map[int32]builderapi.Report{0: at(3, 2, 7), 1: at(3, 2, 7), 5: at(3, 2, 7), 6: at(3, 2, 7)}, ""},
		{"the only other reporter counts", map[int32]builderapi.Report{0: at(3, 4)}, "4"},
		{"with half the set silent, one survivor's word is no majority about another that answers",
			map[int32]builderapi.Report{0: at(3, 1, 5, 6), 1: at(3, 5, 6)}, "5 6"},
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

// A spare whose builder spoke and then answered no poll for long enough
// takes no unit over; a short silence, one missed poll, a live rank's
// silence (Unreachable's) or threshold 0 take none away.
func TestSilentSpares(t *testing.T) {
	_, table := plan(t, 5, 2, nil) // LLSSLLL., spares on s1 (ranks 2, 3)
	now := time.Unix(1000, 0)
	silent := func(seconds, polls int) builderstatus.Silence {
		return builderstatus.Silence{Since: now.Add(-time.Duration(seconds) * time.Second), Polls: polls}
	}
	silences := map[int32]builderstatus.Silence{2: silent(3, 3), 3: silent(3, 1), 4: silent(3, 3)}
	got := SilentSpares(table, silences, now, 2*time.Second)
	if len(got) != 1 || got["s1-0"] != "builder not answering for 3s" {
		t.Errorf("silent spares %v, want only s1-0 (rank 2: 3 s over 3 polls)", got)
	}
	if got := SilentSpares(table, silences, now, 5*time.Second); len(got) != 0 {
		t.Errorf("silent for 3 s under a 5 s threshold: %v", got)
	}
	if got := SilentSpares(table, silences, now, 0); len(got) != 0 {
		t.Errorf("threshold 0: %v", got)
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
	// A spare the scheduler cannot place (its node short of a resource) is
	// no spare either, while that lasts.
	pending := onEndpoint(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}, "s1-1")
	if got := FailedSpares(table, map[int32]*corev1.Pod{3: pending}); len(got) != 1 || got["s1-1"] != "Unschedulable" {
		t.Errorf("FailedSpares of an unschedulable spare = %v", got)
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
	rec, err := Recover(g, table, []Failure{{Rank: 4, Reason: "PodFailed"}}, ebv1.FailureRunDegraded)
	if err != nil || len(rec.Moves) != 1 || rec.Moves[0].SpareEndpoint != "s1-1" {
		t.Errorf("Recover: %+v, %v; want unit 2 on s1-1", rec.Moves, err)
	}
}

// A unit dropped for want of a spare goes back onto a spare only once the
// spare's pod is Ready: ColdSpares names the others.
func TestColdSpares(t *testing.T) {
	_, table := plan(t, 5, 2, nil) // LLSSLLL., spares on s1 (ranks 2, 3)
	ready := func(status corev1.ConditionStatus) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
	}
	tests := []struct {
		name string
		pods map[int32]*corev1.Pod
		want map[string]string
	}{
		{name: "both Ready", pods: map[int32]*corev1.Pod{2: onEndpoint(ready(corev1.ConditionTrue), "s1-0"), 3: onEndpoint(ready(corev1.ConditionTrue), "s1-1")},
			want: map[string]string{}},
		{name: "one not Ready, one missing", pods: map[int32]*corev1.Pod{2: onEndpoint(ready(corev1.ConditionFalse), "s1-0")},
			want: map[string]string{"s1-0": "pod not Ready", "s1-1": "no pod yet"}},
		{name: "a Ready pod of another endpoint, one deleted", pods: map[int32]*corev1.Pod{2: onEndpoint(ready(corev1.ConditionTrue), "s0-0"),
			3: deleting(onEndpoint(ready(corev1.ConditionTrue), "s1-1"))},
			want: map[string]string{"s1-0": "no pod yet", "s1-1": "no pod yet"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ColdSpares(table, tc.pods); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ColdSpares = %v, want %v", got, tc.want)
			}
		})
	}
	// Every unit lost with no spare left: no builder takes that table, so
	// a spare's pod never turns Ready; one that exists is warm enough.
	allLost := table
	allLost.Ranks = slices.Clone(table.Ranks)
	for i := range allLost.Ranks {
		if allLost.Ranks[i].Role == planner.Live {
			allLost.Ranks[i].Role, allLost.Ranks[i].Endpoint = planner.Dummy, ""
		}
	}
	got := ColdSpares(allLost, map[int32]*corev1.Pod{2: onEndpoint(ready(corev1.ConditionFalse), "s1-0")})
	if want := map[string]string{"s1-1": "no pod yet"}; !reflect.DeepEqual(got, want) {
		t.Errorf("no live rank: ColdSpares = %v, want %v", got, want)
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
	// The tables of a run without a Fabric sit on ports 0..5 of one leaf
	// and name no endpoint: DropUnit needs a fabric with such ports.
	ports := planner.Fabric{Leaves: 1, Spines: 1, PortsPerLeaf: 6, LinksPerPair: 1,
		Endpoints: []planner.Endpoint{{Name: "unused", Node: "unused", Schedulable: true}}}
	drop := func(table planner.RankTable, rank int) planner.RankTable {
		t.Helper()
		next, err := planner.DropUnit(ports, table, rank)
		if err != nil {
			t.Fatal(err)
		}
		return next
	}
	moved := drop(unfolded, 0)
	moved.Ranks = append(moved.Ranks, planner.Rank{Rank: 6, Role: planner.Live, Unit: 0, Function: planner.RU})
	buAlone := drop(folded, 1)
	buAlone.Ranks = append(buAlone.Ranks, planner.Rank{Rank: 3, Role: planner.Live, Unit: 1, Function: planner.BU})
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
		{"folded, a unit on a spare without fibres runs its BU alone", buAlone, 3},
	} {
		if got := LiveUnits(tc.table); got != tc.want {
			t.Errorf("%s (%s): %d live units, want %d", tc.name, functions(tc.table), got, tc.want)
		}
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
				// A unit no spare took says why, in the record and the event.
				if noSpare := m.SpareRank == nil; noSpare != strings.HasPrefix(m.NoSpare, "no warm spare left") ||
					noSpare && !strings.Contains(rec.Summary(), m.NoSpare) {
					t.Errorf("rank %d to %s: noSpare %q, summary %q", m.FailedRank, to, m.NoSpare, rec.Summary())
				}
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

// A live unit whose builder answers no poll for a while, with no peer left
// to report it (its whole server is gone), fails over; one missed poll, a
// short silence, or peers that see it building do not.
func TestUnreachable(t *testing.T) {
	_, table := plan(t, 5, 2, nil) // LLSSLLL. (live 0 1 4 5 6)
	table.Epoch = 3
	now := time.Unix(1000, 0)
	silent := func(seconds, polls int) builderstatus.Silence {
		return builderstatus.Silence{Since: now.Add(-time.Duration(seconds) * time.Second), Polls: polls}
	}
	for _, tc := range []struct {
		name     string
		silences map[int32]builderstatus.Silence
		up       map[int]bool
		after    time.Duration
		want     string
	}{
		{"everyone answers", nil, nil, 3 * time.Second, ""},
		{"ranks 4 and 5 silent for 4 s over 3 polls: their server is gone",
			map[int32]builderstatus.Silence{4: silent(4, 3), 5: silent(4, 3)}, nil, 3 * time.Second, "4 5"},
		{"one missed poll is not enough, however long ago", map[int32]builderstatus.Silence{4: silent(10, 1)}, nil,
			3 * time.Second, ""},
		{"silent for less than the threshold", map[int32]builderstatus.Silence{4: silent(2, 2)}, nil, 3 * time.Second, ""},
		{"its peers see it up: only the operator's path to it is down",
			map[int32]builderstatus.Silence{4: silent(4, 3)}, map[int]bool{4: true}, 3 * time.Second, ""},
		{"a silent spare is no unit failure", map[int32]builderstatus.Silence{2: silent(4, 3)}, nil, 3 * time.Second, ""},
		{"threshold 0 turns it off", map[int32]builderstatus.Silence{4: silent(4, 3)}, nil, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, fl := range Unreachable(table, tc.silences, now, tc.after, tc.up) {
				if fl.Reason != ReasonUnreachable {
					t.Errorf("rank %d reason %s", fl.Rank, fl.Reason)
				}
				got = append(got, fmt.Sprint(fl.Rank))
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("unreachable %q, want %q", s, tc.want)
			}
		})
	}
}

// The endpoints of a server that came back after a failover become warm
// spares again, lowest rank first, up to spec.spares; endpoints whose node
// never went away are not offered again, and nothing changes once the
// spares are all there.
func TestReplenish(t *testing.T) {
	spec, nodes := fabric()
	f, table := plan(t, 5, 2, nodes)
	nodes["s0"] = false
	down := Fabric(spec, nodes)
	rec, err := Recover(down, table, Failures(table, Endpoints(down), nodes, nil, nil), ebv1.FailureRunDegraded)
	if err != nil {
		t.Fatal(err)
	}
	after := rec.Table // s0's two units on the two spares: no spare left
	if got := roles(after); got != "..LLLLL." || SparesLeft(after, Endpoints(down)) != 0 {
		t.Fatalf("after the failover %s, spares left %d; want ..LLLLL. and 0", got, SparesLeft(after, Endpoints(down)))
	}
	back := map[string]bool{"s0": true}
	for _, tc := range []struct {
		name   string
		f      planner.Fabric
		t      planner.RankTable
		spares int32
		back   map[string]bool
		added  []string
		roles  string
	}{
		{"s0 still down", down, after, 2, back, nil, "..LLLLL."},
		{"nothing came back: the free endpoint s3-1 is not offered", f, after, 2, nil, nil, "..LLLLL."},
		{"s0 back: both its endpoints", f, after, 2, back, []string{"s0-0", "s0-1"}, "SSLLLLL."},
		{"spec.spares 1: the lowest rank", f, after, 1, back, []string{"s0-0"}, "S.LLLLL."},
		{"the spares all there", f, table, 2, back, nil, roles(table)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, added := Replenish(tc.f, tc.t, tc.spares, tc.back)
			wantEpoch := tc.t.Epoch
			if len(tc.added) > 0 {
				wantEpoch++
			}
			if !slices.Equal(added, tc.added) || roles(next) != tc.roles || next.Epoch != wantEpoch || functions(next) != functions(tc.t) {
				t.Errorf("added %v, roles %s at epoch %d, functions %s; want %v, %s at epoch %d, functions %s",
					added, roles(next), next.Epoch, functions(next), tc.added, tc.roles, wantEpoch, functions(tc.t))
			}
		})
	}
	if roles(after) != "..LLLLL." {
		t.Errorf("Replenish changed its input: %s", roles(after))
	}
}

func TestNodesBackSince(t *testing.T) {
	node := func(name string, status corev1.ConditionStatus, at time.Time) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(at)}}}}
	}
	failover := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	got := NodesBackSince([]corev1.Node{
		node("back", corev1.ConditionTrue, failover.Add(time.Minute)),
		node("never-left", corev1.ConditionTrue, failover.Add(-time.Hour)),
		node("ready-in-the-failovers-second", corev1.ConditionTrue, failover.Add(-time.Second/2).Truncate(time.Second)),
		node("still-down", corev1.ConditionFalse, failover.Add(time.Minute)),
	}, failover)
	if len(got) != 1 || !got["back"] {
		t.Errorf("NodesBackSince = %v, want only back", got)
	}
}

func TestOnlyAPassingAdmissionFailureIsRetriedAndNotAtOnce(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	pod := func(phase corev1.PodPhase, reason string, age time.Duration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Status: corev1.PodStatus{Phase: phase, Reason: reason}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"device plugin not back after a restart, old enough", pod(corev1.PodFailed, "UnexpectedAdmissionError", AdmissionRetryAfter), true},
		{"the same, just refused", pod(corev1.PodFailed, "UnexpectedAdmissionError", AdmissionRetryAfter-time.Second), false},
		{"NUMA alignment refused", pod(corev1.PodFailed, "TopologyAffinityError", time.Hour), false},
		{"evicted", pod(corev1.PodFailed, "Evicted", time.Hour), false},
		{"running", pod(corev1.PodRunning, "", time.Hour), false},
	} {
		if got := RetryAdmission(tc.pod, now); got != tc.want {
			t.Errorf("%s: retry %v, want %v", tc.name, got, tc.want)
		}
	}
}
