package runplan

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// A server whose units failed away and that came back faster than its
// node could turn NotReady is found by its new boot ID (rebooted) or,
// having only hung, after a rest; its endpoints are then offered as spares
// again.
func TestAServerBackWithoutTurningNotReadyIsFoundByItsBootIDOrAfterARest(t *testing.T) {
	f, table := plan(t, 5, 2, nil) // LLSSLLL., spares on s1 (ranks 2, 3); s0's units on ranks 0 and 1
	node := func(name, boot string, ready corev1.ConditionStatus) corev1.Node {
		n := corev1.Node{}
		n.Name, n.Status.NodeInfo.BootID = name, boot
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		return n
	}
	before := []corev1.Node{node("s0", "boot-1", corev1.ConditionTrue), node("s1", "boot-a", corev1.ConditionTrue)}
	// s0 is lost while Ready (its builders silent): both units to s1.
	rec, err := Recover(f, table, []Failure{{Rank: 0, Reason: ReasonUnreachable}, {Rank: 1, Reason: ReasonUnreachable}}, ebv1.FailureRunDegraded)
	if err != nil || len(rec.Moves) != 2 || roles(rec.Table) != "..LLLLL." {
		t.Fatalf("Recover: %+v, %v, roles %s", rec.Moves, err, roles(rec.Table))
	}
	at := time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC)
	boots := Vacancies(f, rec.Table, BootIDs(before), nil, at)
	if want := map[string]Vacancy{"s0-0": {"boot-1", at}, "s0-1": {"boot-1", at}}; !reflect.DeepEqual(boots, want) {
		t.Fatalf("Vacancies = %v, want %v", boots, want)
	}
	// A later table keeps what was recorded, whatever the node reports then.
	if again := Vacancies(f, rec.Table, map[string]string{"s0": "boot-2"}, boots, at.Add(time.Minute)); !reflect.DeepEqual(again, boots) {
		t.Errorf("Vacancies over a record = %v, want it kept: %v", again, boots)
	}
	// Not rebooted (a hang, a blip), Ready: offered again after a rest.
	for _, tc := range []struct {
		name  string
		since time.Duration
		after time.Duration
		ready corev1.ConditionStatus
		want  bool
	}{
		{"rested", 2 * time.Minute, 2 * time.Minute, corev1.ConditionTrue, true},
		{"not rested yet", 119 * time.Second, 2 * time.Minute, corev1.ConditionTrue, false},
		{"rested, not Ready", 5 * time.Minute, 2 * time.Minute, corev1.ConditionFalse, false},
		{"never offered again (0)", time.Hour, 0, corev1.ConditionTrue, false},
	} {
		got := Rested(f, boots, []corev1.Node{node("s0", "boot-1", tc.ready)}, at.Add(tc.since), tc.after)
		if got["s0"] != tc.want {
			t.Errorf("%s: Rested = %v, want s0 %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name  string
		nodes []corev1.Node
		want  map[string]bool
	}{
		{name: "same boot: not back", nodes: before, want: map[string]bool{}},
		{name: "rebooted, Ready", nodes: []corev1.Node{node("s0", "boot-2", corev1.ConditionTrue), before[1]}, want: map[string]bool{"s0": true}},
		{name: "rebooted, not Ready yet", nodes: []corev1.Node{node("s0", "boot-2", corev1.ConditionFalse), before[1]}, want: map[string]bool{}},
		{name: "no boot ID reported", nodes: []corev1.Node{node("s0", "", corev1.ConditionTrue), before[1]}, want: map[string]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Rebooted(f, boots, tc.nodes); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Rebooted = %v, want %v", got, tc.want)
			}
		})
	}
	// Rebooted, its endpoints are spares again; the record forgets them.
	more, added := Replenish(f, rec.Table, 2, Rebooted(f, boots, []corev1.Node{node("s0", "boot-2", corev1.ConditionTrue), before[1]}))
	if len(added) != 2 || roles(more) != "SSLLLLL." {
		t.Fatalf("Replenish: added %v, roles %s; want s0's endpoints spares (SSLLLLL.)", added, roles(more))
	}
	if left := Vacancies(f, more, nil, boots, at); len(left) != 0 {
		t.Errorf("Vacancies once spares again = %v, want none", left)
	}
}
