package runplan

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/planner"
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
	rest := VacancyRest{First: 15 * time.Second, Max: 2 * time.Minute}
	boots := Vacancies(f, rec.Table, BootIDs(before), nil, at, rest)
	if want := map[string]Vacancy{"s0-0": {BootID: "boot-1", Since: at, Times: 1}, "s0-1": {BootID: "boot-1", Since: at, Times: 1}}; !reflect.DeepEqual(boots, want) {
		t.Fatalf("Vacancies = %v, want %v", boots, want)
	}
	// A later table keeps what was recorded, whatever the node reports then.
	if again := Vacancies(f, rec.Table, map[string]string{"s0": "boot-2"}, boots, at.Add(time.Minute), rest); !reflect.DeepEqual(again, boots) {
		t.Errorf("Vacancies over a record = %v, want it kept: %v", again, boots)
	}
	// Not rebooted (its pod failed, a hang, a blip), Ready: offered again
	// after a rest.
	alive := map[string]bool{"s0": true}
	for _, tc := range []struct {
		name  string
		since time.Duration
		rest  VacancyRest
		ready corev1.ConditionStatus
		heard map[string]bool
		want  bool
	}{
		{"rested", 15 * time.Second, rest, corev1.ConditionTrue, alive, true},
		{"not rested yet", 14 * time.Second, rest, corev1.ConditionTrue, alive, false},
		{"rested, not Ready", 5 * time.Minute, rest, corev1.ConditionFalse, alive, false},
		{"no builder heard there: maybe dead, still Ready", 119 * time.Second, rest, corev1.ConditionTrue, nil, false},
		{"no builder heard there, the longest rest over", 2 * time.Minute, rest, corev1.ConditionTrue, nil, true},
		{"never offered again (0)", time.Hour, VacancyRest{Max: time.Hour}, corev1.ConditionTrue, alive, false},
	} {
		got := Rested(f, boots, []corev1.Node{node("s0", "boot-1", tc.ready)}, tc.heard, at.Add(tc.since), tc.rest)
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
	if left := Vacancies(f, more, nil, boots, at, VacancyRest{First: rest.First}); len(left) != 0 {
		t.Errorf("Vacancies once spares again, kept for no time (no Max) = %v, want none", left)
	}
}

// An endpoint's rest doubles with each vacancy in a row, up to Max; the
// zero First never offers one again.
func TestVacancyRestDoublesUpToItsMax(t *testing.T) {
	for _, tc := range []struct {
		name string
		rest VacancyRest
		want map[int]time.Duration // by vacancies in a row
	}{
		{"default", VacancyRest{First: 15 * time.Second, Max: 2 * time.Minute},
			map[int]time.Duration{0: 15 * time.Second, 1: 15 * time.Second, 2: 30 * time.Second, 3: time.Minute, 4: 2 * time.Minute, 5: 2 * time.Minute, 100: 2 * time.Minute}},
		{"Max below First: First", VacancyRest{First: time.Minute, Max: time.Second}, map[int]time.Duration{1: time.Minute, 3: time.Minute}},
		{"Max not a doubling of First", VacancyRest{First: 10 * time.Second, Max: 25 * time.Second}, map[int]time.Duration{2: 20 * time.Second, 3: 25 * time.Second}},
		{"never", VacancyRest{Max: time.Minute}, map[int]time.Duration{1: 0, 5: 0}},
	} {
		for times, want := range tc.want {
			if got := tc.rest.For(times); got != want {
				t.Errorf("%s: For(%d) = %s, want %s", tc.name, times, got, want)
			}
		}
	}
}

// An endpoint vacated again soon after it was offered again rests twice as
// long; one that held for the longest rest starts again at the first.
func TestAnEndpointVacatedAgainSoonRestsLonger(t *testing.T) {
	f, table := plan(t, 5, 2, nil) // LLSSLLL., spares on s1 (ranks 2, 3)
	rest := VacancyRest{First: 15 * time.Second, Max: 2 * time.Minute}
	ready := []corev1.Node{{}}
	ready[0].Name = "s0"
	ready[0].Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	at := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	heard := map[string]bool{"s0": true} // s0's other unit answers: alive
	offer := func(t0 planner.RankTable) planner.RankTable {
		t.Helper()
		more, added := Replenish(f, t0, 2, map[string]bool{"s0": true})
		if len(added) != 1 || added[0] != "s0-0" {
			t.Fatalf("Replenish: added %v, want s0-0", added)
		}
		return more
	}
	// Rank 0's unit fails over: s0-0 vacated, its first vacancy.
	rec, err := Recover(f, table, []Failure{{Rank: 0, Reason: ReasonPeerLost}}, ebv1.FailureRunDegraded)
	if err != nil || len(rec.Moves) != 1 {
		t.Fatalf("Recover: %+v, %v", rec.Moves, err)
	}
	failed := rec.Table
	v := Vacancies(f, failed, nil, nil, at, rest)
	if got := v["s0-0"]; got.Times != 1 || got.Offered != nil {
		t.Fatalf("first vacancy: %+v, want times 1, not offered", got)
	}
	if Rested(f, v, ready, heard, at.Add(14*time.Second), rest)["s0"] || !Rested(f, v, ready, heard, at.Add(15*time.Second), rest)["s0"] {
		t.Errorf("first vacancy: want s0 rested after 15 s, not before")
	}
	// Offered again after 15 s: the record keeps when.
	offeredAt := at.Add(15 * time.Second)
	back := offer(failed)
	v = Vacancies(f, back, nil, v, offeredAt, rest)
	if got := v["s0-0"]; got.Offered == nil || !got.Offered.Equal(offeredAt) || got.Times != 1 {
		t.Fatalf("offered again: %+v, want times 1 offered at %s", got, offeredAt)
	}
	if Rested(f, v, ready, heard, offeredAt.Add(time.Hour), rest)["s0"] || len(Rebooted(f, v, ready)) != 0 {
		t.Errorf("an endpoint offered again is not vacated: want s0 neither rested nor rebooted")
	}
	// A unit put back there (restored, or home) fails again a minute
	// later, as the first did: 30 s rest.
	again := at.Add(75 * time.Second)
	v = Vacancies(f, failed, nil, v, again, rest)
	if got := v["s0-0"]; got.Times != 2 || got.Offered != nil || !got.Since.Equal(again) {
		t.Fatalf("vacated again within Max of its offer: %+v, want times 2 since %s", got, again)
	}
	if Rested(f, v, ready, heard, again.Add(29*time.Second), rest)["s0"] || !Rested(f, v, ready, heard, again.Add(30*time.Second), rest)["s0"] {
		t.Errorf("second vacancy in a row: want s0 rested after 30 s, not before")
	}
	// Offered again, it holds for Max: the record forgets it, and the next
	// vacancy is a first again.
	v = Vacancies(f, back, nil, v, again.Add(30*time.Second), rest)
	later := again.Add(30*time.Second + rest.Max)
	kept := func(v map[string]Vacancy, now time.Time) map[string]Vacancy {
		return Vacancies(f, back, nil, v, now, rest)
	}
	if left := kept(v, later); len(left) != 0 {
		t.Errorf("an offer that held for Max: record %v, want none", left)
	}
	if got := Vacancies(f, failed, nil, kept(v, later), later, rest)["s0-0"]; got.Times != 1 {
		t.Errorf("vacated after an offer that held: %+v, want times 1", got)
	}
}

// A server is heard where a builder of the run answered the poll.
func TestHeardAreTheNodesOfTheBuildersThatAnswered(t *testing.T) {
	pod := func(node string) *corev1.Pod { p := &corev1.Pod{}; p.Spec.NodeName = node; return p }
	pods := map[int32]*corev1.Pod{0: pod("s0"), 1: pod("s0"), 2: pod("s1"), 3: pod("")}
	got := Heard(pods, map[int32]builderapi.Report{1: {}, 3: {}, 7: {}})
	if want := map[string]bool{"s0": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("Heard = %v, want %v (rank 0 silent, rank 2 not polled, rank 3 not scheduled, rank 7 no pod)", got, want)
	}
}
