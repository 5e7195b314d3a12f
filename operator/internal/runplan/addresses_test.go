package runplan

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/planner"
)

func TestGiveAddresses(t *testing.T) {
	ips := func(kv ...string) map[int32]string {
		m := map[int32]string{}
		for i, v := range kv {
			m[int32(i)] = v
		}
		return m
	}
	uids := ips("uid-a", "uid-b")
	for _, tc := range []struct {
		name    string
		given   GivenAddresses
		epoch   int64
		ips     map[int32]string
		want    GivenAddresses
		changed bool
	}{
		{"first epoch", GivenAddresses{}, 1, ips("10.0.0.1"), GivenAddresses{1, ips("10.0.0.1"), ips("uid-a")}, true},
		{"same epoch, same addresses", GivenAddresses{1, ips("10.0.0.1"), ips("uid-a")}, 1, ips("10.0.0.1"),
			GivenAddresses{1, ips("10.0.0.1"), ips("uid-a")}, false},
		{"same epoch, a rank's pod runs at last: added", GivenAddresses{1, ips("10.0.0.1"), ips("uid-a")}, 1,
			ips("10.0.0.1", "10.0.0.2"), GivenAddresses{1, ips("10.0.0.1", "10.0.0.2"), uids}, true},
		{"same epoch, a rank's IP moved: the first given stays, with its pod", GivenAddresses{1, ips("10.0.0.1"), ips("uid-old")}, 1,
			ips("10.0.0.9"), GivenAddresses{1, ips("10.0.0.1"), ips("uid-old")}, false},
		{"a record without pods keeps none for the ranks it has", GivenAddresses{Epoch: 1, IPs: ips("10.0.0.1")}, 1,
			ips("10.0.0.1", "10.0.0.2"), GivenAddresses{1, ips("10.0.0.1", "10.0.0.2"), map[int32]string{1: "uid-b"}}, true},
		{"a new epoch starts afresh", GivenAddresses{1, ips("10.0.0.1", "10.0.0.2"), uids}, 2,
			ips("10.0.0.9"), GivenAddresses{2, ips("10.0.0.9"), ips("uid-a")}, true},
		{"a new epoch with no pod running yet", GivenAddresses{1, ips("10.0.0.1"), ips("uid-a")}, 2,
			nil, GivenAddresses{2, map[int32]string{}, map[int32]string{}}, true},
		{"no record and no address", GivenAddresses{Epoch: 1}, 1, nil, GivenAddresses{1, map[int32]string{}, map[int32]string{}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := tc.given.Give(tc.epoch, tc.ips, uids)
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
	pods := map[int32]string{0: "uid-a", 1: "uid-b", 2: "uid-c", 3: "uid-d"}
	given := GivenAddresses{Epoch: 3, IPs: map[int32]string{0: "10.0.0.1", 1: "10.0.0.2", 2: "10.0.0.3", 3: "10.0.0.4"}, Pods: pods}
	all := map[int32]builderapi.Report{0: {}, 1: {}, 2: {}, 3: {}}
	moved := map[int32]string{0: "10.0.0.1", 1: "10.0.1.7", 2: "10.0.0.3", 3: "10.0.1.8"}
	for _, tc := range []struct {
		name    string
		given   GivenAddresses
		ips     map[int32]string
		uids    map[int32]string
		reports map[int32]builderapi.Report
		want    []int
	}{
		{"nothing moved", given, given.IPs, pods, all, nil},
		{"a restarted node's two pods", given, moved, pods, all, []int{1, 3}},
		{"moved but its builder does not answer yet: it waits", given, moved, pods,
			map[int32]builderapi.Report{0: {}, 1: {}, 2: {}}, []int{1}},
		{"moved but its pod is not running: it waits", given, map[int32]string{0: "10.0.0.1", 2: "10.0.0.3", 3: "10.0.1.8"}, pods, all, []int{3}},
		{"a record of another epoch says nothing", GivenAddresses{Epoch: 2, IPs: given.IPs}, moved, pods, all, nil},
		{"a rank never given an address (its name was sent)", GivenAddresses{Epoch: 3, IPs: map[int32]string{0: "10.0.0.1"}}, moved, pods, all, nil},
		{"a spare's address moved: nobody dials it", given, moved, pods, all, []int{1}},
		// A deleted pod's replacement answering before its peers' loss of
		// the old builder was polled: the loss fails it over, not a readdress.
		{"a replaced pod is not moved", given, moved, map[int32]string{0: "uid-a", 1: "uid-b2", 2: "uid-c", 3: "uid-d"}, all, []int{3}},
		{"a record without pods takes any answer for moved", GivenAddresses{Epoch: 3, IPs: given.IPs}, moved,
			map[int32]string{1: "uid-b2", 3: "uid-d2"}, all, []int{1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := table
			if strings.HasPrefix(tc.name, "a spare") {
				table.Ranks = slices.Clone(table.Ranks)
				table.Ranks[3].Role = planner.Spare
			}
			if got := MovedAddresses(table, tc.given, tc.ips, tc.uids, tc.reports); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("MovedAddresses = %v, want %v", got, tc.want)
			}
		})
	}
	rec := Readdress(table, []int{3, 1})
	if rec.Table.Epoch != 4 || rec.Outcome != ebv1.OutcomeRejoined || len(rec.Moves) != 2 ||
		rec.Moves[0].FailedRank != 1 || rec.Moves[1].FailedRank != 3 || rec.Moves[0].Reason != ReasonAddressChanged || rec.Moves[0].SpareRank != nil {
		t.Errorf("Readdress = epoch %d, %s, moves %+v; want epoch 4, Rejoined, ranks 1 and 3 onto themselves for %s",
			rec.Table.Epoch, rec.Outcome, rec.Moves, ReasonAddressChanged)
	}
}
