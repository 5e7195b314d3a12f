package runplan

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/planner"
)

func TestNUMAAlignment(t *testing.T) {
	aligned := &ebv1.RankNUMA{Node: ptr.To(int32(0)), Aligned: true}
	off := &ebv1.RankNUMA{Node: ptr.To(int32(1)), Misplaced: "CPUs (cpus 0-63)"}
	rank := func(r int32, role ebv1.RankRole, numa *ebv1.RankNUMA) ebv1.RankStatus {
		return ebv1.RankStatus{Rank: r, Role: role, Pod: fmt.Sprintf("eb-%d", r), Node: "n1", NUMA: numa}
	}
	many := []ebv1.RankStatus{}
	for r := range int32(12) {
		many = append(many, rank(r, ebv1.RoleLive, off))
	}
	for _, tc := range []struct {
		name   string
		ranks  []ebv1.RankStatus
		want   metav1.ConditionStatus // "" for no condition
		saying []string
	}{
		{name: "no report: no condition", ranks: []ebv1.RankStatus{rank(0, ebv1.RoleLive, nil)}},
		{name: "a spare's report does not count", ranks: []ebv1.RankStatus{rank(0, ebv1.RoleSpare, off)}},
		{name: "all aligned", ranks: []ebv1.RankStatus{rank(0, ebv1.RoleLive, aligned), rank(1, ebv1.RoleLive, aligned),
			rank(2, ebv1.RoleSpare, off)}, want: metav1.ConditionTrue, saying: []string{"2 live units"}},
		{name: "one off its node", ranks: []ebv1.RankStatus{rank(0, ebv1.RoleLive, aligned), rank(3, ebv1.RoleLive, off)},
			want: metav1.ConditionFalse, saying: []string{"1 of 2", "rank 3 (pod eb-3, node n1): not on NUMA node 1: CPUs (cpus 0-63)",
				"static CPU manager", "single-numa-node"}},
		{name: "a farm's worth named in part", ranks: many, want: metav1.ConditionFalse,
			saying: []string{"12 of 12", "rank 7 ", "and 4 more (status.ranks[].numa)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := NUMAAlignment(tc.ranks, 3)
			if !ok {
				if tc.want != "" {
					t.Fatalf("no condition, want %s", tc.want)
				}
				return
			}
			if c.Type != ebv1.ConditionNUMAAligned || c.Status != tc.want || c.ObservedGeneration != 3 {
				t.Fatalf("%+v, want %s", c, tc.want)
			}
			for _, s := range tc.saying {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q does not say %q", c.Message, s)
				}
			}
			if strings.Contains(c.Message, "rank 8 ") {
				t.Errorf("message names more than %d ranks: %q", maxNamed, c.Message)
			}
		})
	}
}

func TestMisalignedUnitsArePlannedMoves(t *testing.T) {
	table := planner.RankTable{Ranks: []planner.Rank{
		{Rank: 0, Role: planner.Live, Endpoint: "a"},
		{Rank: 1, Role: planner.Live, Endpoint: "b"},
		{Rank: 2, Role: planner.Live, Endpoint: "c"},
		{Rank: 3, Role: planner.Spare, Endpoint: "d"},
		{Rank: 4, Role: planner.Live, Endpoint: "e"},
		{Rank: 5, Role: planner.Live, Endpoint: "f"},
	}}
	aligned := &builderapi.NUMA{Requested: "0", Node: ptr.To(int32(0)), Pinned: true, CPUsLocal: true, MemoryLocal: true}
	cpusOff := &builderapi.NUMA{Requested: "0", Node: ptr.To(int32(0)), Pinned: true, MemoryLocal: true}
	deviceOff := &builderapi.NUMA{Requested: "0", Node: ptr.To(int32(0)), Pinned: true, CPUsLocal: true, MemoryLocal: true,
		DeviceLocal: ptr.To(false)}
	reports := map[int32]builderapi.Report{
		0: {NUMA: aligned},
		1: {NUMA: cpusOff},
		2: {NUMA: deviceOff},
		3: {NUMA: cpusOff},            // a spare: not a unit
		4: {NUMA: &builderapi.NUMA{}}, // nothing asked
		5: {NUMA: cpusOff},            // failing already
	}
	got := Misaligned(table, reports, []Failure{{Rank: 5, Reason: ReasonPeerLost}})
	want := []Failure{{Rank: 1, Reason: ebv1.ReasonNUMAMisaligned, Planned: true}, {Rank: 2, Reason: ebv1.ReasonNUMAMisaligned, Planned: true}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Misaligned = %v, want %v", got, want)
	}

	// Every unit still building misaligned: the last waits, to carry the
	// set's place in the event stream to the spares that join.
	reports[0], reports[4] = builderapi.Report{NUMA: cpusOff}, builderapi.Report{NUMA: cpusOff}
	got = Misaligned(table, reports, []Failure{{Rank: 5, Reason: ReasonPeerLost}})
	if fmt.Sprint(got) != fmt.Sprint([]Failure{{Rank: 0, Reason: ebv1.ReasonNUMAMisaligned, Planned: true},
		{Rank: 1, Reason: ebv1.ReasonNUMAMisaligned, Planned: true}, {Rank: 2, Reason: ebv1.ReasonNUMAMisaligned, Planned: true}}) {
		t.Errorf("every unit misaligned: Misaligned = %v, want ranks 0, 1, 2 moved and rank 4 staying", got)
	}
}
