package runplan

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/planner"
)

func TestGiveAddresses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		given   GivenAddresses
		epoch   int64
		ips     map[int32]string
		want    GivenAddresses
		changed bool
	}{
		{"first epoch", GivenAddresses{}, 1, map[int32]string{0: "10.0.0.1"}, GivenAddresses{1, map[int32]string{0: "10.0.0.1"}}, true},
		{"same epoch, same addresses", GivenAddresses{1, map[int32]string{0: "10.0.0.1"}}, 1, map[int32]string{0: "10.0.0.1"},
			GivenAddresses{1, map[int32]string{0: "10.0.0.1"}}, false},
		{"same epoch, a rank's pod runs at last: added", GivenAddresses{1, map[int32]string{0: "10.0.0.1"}}, 1,
			map[int32]string{0: "10.0.0.1", 1: "10.0.0.2"}, GivenAddresses{1, map[int32]string{0: "10.0.0.1", 1: "10.0.0.2"}}, true},
		{"same epoch, a rank's IP moved: the first given stays", GivenAddresses{1, map[int32]string{0: "10.0.0.1"}}, 1,
			map[int32]string{0: "10.0.0.9"}, GivenAddresses{1, map[int32]string{0: "10.0.0.1"}}, false},
		{"a new epoch starts afresh", GivenAddresses{1, map[int32]string{0: "10.0.0.1", 1: "10.0.0.2"}}, 2,
			map[int32]string{0: "10.0.0.9"}, GivenAddresses{2, map[int32]string{0: "10.0.0.9"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := tc.given.Give(tc.epoch, tc.ips)
			if !reflect.DeepEqual(got, tc.want) || changed != tc.changed {
				t.Errorf("Give(%d, %v) = %v, %v; want %v, %v", tc.epoch, tc.ips, got, changed, tc.want, tc.changed)
			}
		})
	}
}

// A node restart gives its pods new IPs: the builders configured before
// dial the old ones for ever and report nobody lost. The moved ranks
// answering from their new IPs are taken back at a new epoch.
func TestMovedAddresses(t *testing.T) {
	table, err := Plan(&ebv1.EventBuilderRunSpec{Units: 4}, nil, 2) // LLLL at epoch 3
	if err != nil {
		t.Fatal(err)
	}
	given := GivenAddresses{Epoch: 3, IPs: map[int32]string{0: "10.0.0.1", 1: "10.0.0.2", 2: "10.0.0.3", 3: "10.0.0.4"}}
	all := map[int32]builderstatus.Report{0: {}, 1: {}, 2: {}, 3: {}}
	moved := map[int32]string{0: "10.0.0.1", 1: "10.0.1.7", 2: "10.0.0.3", 3: "10.0.1.8"}
	for _, tc := range []struct {
		name    string
		given   GivenAddresses
		ips     map[int32]string
		reports map[int32]builderstatus.Report
		want    []int
	}{
		{"nothing moved", given, given.IPs, all, nil},
		{"a restarted node's two pods", given, moved, all, []int{1, 3}},
		{"moved but its builder does not answer yet: it waits", given, moved,
			map[int32]builderstatus.Report{0: {}, 1: {}, 2: {}}, []int{1}},
		{"moved but its pod is not running: it waits", given, map[int32]string{0: "10.0.0.1", 2: "10.0.0.3", 3: "10.0.1.8"}, all, []int{3}},
		{"a record of another epoch says nothing", GivenAddresses{Epoch: 2, IPs: given.IPs}, moved, all, nil},
		{"a rank never given an address (its name was sent)", GivenAddresses{Epoch: 3, IPs: map[int32]string{0: "10.0.0.1"}}, moved, all, nil},
		{"a spare's address moved: nobody dials it", given, moved, all, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := table
			if strings.HasPrefix(tc.name, "a spare") {
				table.Ranks = slices.Clone(table.Ranks)
				table.Ranks[3].Role = planner.Spare
			}
			if got := MovedAddresses(table, tc.given, tc.ips, tc.reports); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("MovedAddresses = %v, want %v", got, tc.want)
			}
		})
	}
	// The poll's reports count only where they came from the pod the rank
	// has now: a deleted pod's last report is not its successor's answer.
	poll := &builderstatus.Poll{
		Pods:    map[int32]string{0: "uid-a", 1: "uid-b-deleted", 2: "uid-c", 3: "uid-d"},
		Reports: map[int32]builderstatus.Report{0: {Rank: 0}, 1: {Rank: 1}, 3: {Rank: 3}},
	}
	current := map[int32]string{0: "uid-a", 1: "uid-b-new", 2: "uid-c", 3: ""}
	if got := ReportsOfPods(poll, current); len(got) != 1 || got[0].Rank != 0 {
		t.Errorf("ReportsOfPods = %v, want rank 0's alone (1: another pod answered; 2: none; 3: no UID known)", got)
	}
	if got := MovedAddresses(table, given, moved, ReportsOfPods(poll, current)); got != nil {
		t.Errorf("MovedAddresses with a replaced pod's report = %v, want none: its successor has not answered", got)
	}

	rec := Readdress(table, []int{3, 1})
	if rec.Table.Epoch != 4 || rec.Outcome != ebv1.OutcomeRejoined || len(rec.Moves) != 2 ||
		rec.Moves[0].FailedRank != 1 || rec.Moves[1].FailedRank != 3 || rec.Moves[0].Reason != ReasonAddressChanged || rec.Moves[0].SpareRank != nil {
		t.Errorf("Readdress = epoch %d, %s, moves %+v; want epoch 4, Rejoined, ranks 1 and 3 onto themselves for %s",
			rec.Table.Epoch, rec.Outcome, rec.Moves, ReasonAddressChanged)
	}
}
