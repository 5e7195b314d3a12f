package runplan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

func TestNodeStatesAndCordonedNodes(t *testing.T) {
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	list := []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "up"}, Status: corev1.NodeStatus{Conditions: ready}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cordoned"}, Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: ready}},
		{ObjectMeta: metav1.ObjectMeta{Name: "down"}},
	}
	if got, want := fmt.Sprint(NodeStates(list)), "map[cordoned:false down:false up:true]"; got != want {
		t.Errorf("NodeStates = %s, want %s (a cordoned node takes no unit)", got, want)
	}
	if got, want := fmt.Sprint(CordonedNodes(list)), "map[cordoned:true]"; got != want {
		t.Errorf("CordonedNodes = %s, want %s", got, want)
	}
}

// A cordoned server's units move to spares on another server as planned
// moves; with no spare they are held where they are, never dropped; spares
// on the cordoned server are not counted.
func TestDraining(t *testing.T) {
	for _, tc := range []struct {
		name                string
		units, spares       int32
		cordon              string
		failed              []Failure
		wantMoves, wantHeld string
		wantRoles           string // after the moves; "" when no new table
	}{
		{"both units of a server to the spare server", 5, 2, "s0", nil, "0->2 1->3", "", "..LLLLL."},
		{"one spare for two units: one moves, one held", 5, 1, "s0", nil, "0->3", "1", ".LLLLL.."},
		{"no spare: both held, no new table", 4, 0, "s1", nil, "", "2 3", ""},
		{"a cordoned server of spares moves nothing", 5, 2, "s1", nil, "", "", ""},
		{"a unit already failing is not planned twice", 5, 2, "s0", []Failure{{Rank: 0, Reason: "PodFailed"}}, "1->3", "", ""},
		// Every unit that builds on the cordoned server: the last waits, so
		// the set's place in the event stream goes on through it.
		{"the whole set on the server: all but one move now", 2, 2, "s0", nil, "0->2", "", ".LLS"},
		{"a set of one unit moves: no one else could carry its place", 1, 2, "s0", nil, "0->1", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, nodes := fabric()
			_, table := plan(t, tc.units, tc.spares, nodes)
			cordoned := map[string]bool{tc.cordon: true}
			nodes[tc.cordon] = false // as NodeStates says of a cordoned node
			f := Fabric(spec, nodes)
			planned := Draining(table, Endpoints(f), cordoned, tc.failed)
			for _, p := range planned {
				if !p.Planned || p.Reason != ebv1.EndpointNodeCordoned {
					t.Errorf("planned move %+v, want Planned with reason %s", p, ebv1.EndpointNodeCordoned)
				}
			}
			rec, err := Recover(f, table, planned, ebv1.FailureStop)
			if err != nil {
				t.Fatal(err)
			}
			var moves, held []string
			for _, m := range rec.Moves {
				moves = append(moves, fmt.Sprintf("%d->%d", m.FailedRank, *m.SpareRank))
			}
			for _, m := range rec.Held {
				held = append(held, fmt.Sprint(m.FailedRank))
			}
			if got := strings.Join(moves, " "); got != tc.wantMoves {
				t.Errorf("moves %q, want %q", got, tc.wantMoves)
			}
			if got := strings.Join(held, " "); got != tc.wantHeld {
				t.Errorf("held %q, want %q", got, tc.wantHeld)
			}
			if tc.wantRoles != "" && roles(rec.Table) != tc.wantRoles {
				t.Errorf("table %s, want %s", roles(rec.Table), tc.wantRoles)
			}
			if rec.Outcome != ebv1.OutcomeMovedToSpare {
				t.Errorf("outcome %s: a planned move never degrades or stops the run", rec.Outcome)
			}
			if n := SparesLeft(table, Endpoints(f)); tc.cordon == "s1" && tc.spares == 2 && n != 0 {
				t.Errorf("spares left %d on a cordoned server, want 0", n)
			}
		})
	}
}

// A planned move's old pods stay until the set switched to the new table,
// at most the hold; other moves' pods and other epochs' go at once.
func TestHeldForSwitch(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	_, table := plan(t, 2, 2, nil)
	table.Epoch = 3
	spare := int32(2)
	moved := &ebv1.FailoverStatus{Epoch: 3, CompletedTime: metav1.NewMicroTime(t0),
		Moves: []ebv1.UnitMove{{FailedRank: 0, Reason: ebv1.EndpointNodeCordoned, SpareRank: &spare}}}
	pending := []ebv1.UnitStatus{{Rank: 0, Epoch: 2, PendingEpoch: 3}, {Rank: 1, Epoch: 2, PendingEpoch: 3}}
	switched := []ebv1.UnitStatus{{Rank: 0, Epoch: 3}, {Rank: 1, Epoch: 3}}
	lost := moved.DeepCopy()
	lost.Moves[0].Reason = ReasonPeerLost
	older := moved.DeepCopy()
	older.Epoch = 2
	for _, tc := range []struct {
		name  string
		last  *ebv1.FailoverStatus
		units []ebv1.UnitStatus
		after time.Duration
		want  string
	}{
		{"planned, not switched yet", moved, pending, time.Second, "map[0:true]"},
		{"planned, switched", moved, switched, time.Second, "map[]"},
		{"planned, held too long", moved, pending, time.Minute, "map[]"},
		{"a lost unit's pod is not held", lost, pending, time.Second, "map[]"},
		{"a move of an earlier epoch", older, pending, time.Second, "map[]"},
	} {
		if got := fmt.Sprint(HeldForSwitch(table, tc.last, tc.units, t0.Add(tc.after), 30*time.Second)); got != tc.want {
			t.Errorf("%s: held %s, want %s", tc.name, got, tc.want)
		}
	}
	if Switched(table, switched[:1]) {
		t.Errorf("switched with a live rank unreported")
	}
}

func TestUncordoned(t *testing.T) {
	spec, nodes := fabric()
	endpoints := Endpoints(Fabric(spec, nodes))
	fo := &ebv1.FailoverStatus{Moves: []ebv1.UnitMove{
		{FailedEndpoint: "s0-0", Reason: ebv1.EndpointNodeCordoned},
		{FailedEndpoint: "s1-0", Reason: ebv1.EndpointNodeCordoned},
		{FailedEndpoint: "s2-0", Reason: ebv1.EndpointNodeNotReady},
	}}
	if got, want := fmt.Sprint(Uncordoned(fo, endpoints, map[string]bool{"s1": true})), "map[s0:true]"; got != want {
		t.Errorf("Uncordoned = %s, want %s (s1 still cordoned, s2 failed for another reason)", got, want)
	}
}

// A set started afresh goes on past each unit's last event pushed on by
// the run's rate since that event moved, plus slack; never further than a
// minute's worth.
func TestResumeEvent(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.MicroTime { m := metav1.NewMicroTime(t0.Add(d)); return &m }
	st := ebv1.EventBuilderRunStatus{EventRate: 1000, LastSampleTime: at(0), Units: []ebv1.UnitStatus{
		{Rank: 0, NextEvent: 40000, ProgressTime: at(0)},
		// Silent for 10 s: its events may have gone on all that time.
		{Rank: 1, NextEvent: 35000, ProgressTime: at(-10 * time.Second)},
	}}
	if got := ResumeEvent(st, t0.Add(1500*time.Millisecond)); got != 35000+13500 {
		t.Errorf("resume %d, want the silent unit's 35000 + 1000/s x (11.5 s + 2 s slack) = 48500, past 40000 + 3500", got)
	}
	st.Units[1].ProgressTime = at(-20 * time.Second)
	if got := ResumeEvent(st, t0.Add(1500*time.Millisecond)); got != 35000+23500 {
		t.Errorf("resume %d, want the silent unit's 35000 + 1000/s x 23.5 s = 58500", got)
	}
	if got := ResumeEvent(st, t0.Add(time.Hour)); got != 40000+60000 {
		t.Errorf("resume %d an hour later, want a minute's worth past 40000 at most", got)
	}
	if got := ResumeEvent(ebv1.EventBuilderRunStatus{}, t0); got != 0 {
		t.Errorf("resume %d before any report, want 0", got)
	}
}
