package runplan

import (
	"fmt"
	"strings"
	"testing"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
)

// Ranks that answer and are all lost to each other fail one at a time: the
// highest whose unit did not move last; failures of other kinds, and a
// loss a rank that answers and is not lost judged, stay as they are.
func TestOneOfMutualLoss(t *testing.T) {
	f, table := plan(t, 5, 2, nil) // LLSSLLL. (live 0 1 4 5 6; units 0-4 in rank order)
	table.Epoch = 3
	at := func(lost ...int32) builderapi.Report {
		return builderapi.Report{State: builderapi.StateRunning, Epoch: 3, LostPeers: lost}
	}
	everyone := map[int32]builderapi.Report{0: at(1, 4, 5, 6), 1: at(0, 4, 5, 6), 4: at(0, 1, 5, 6), 5: at(0, 1, 4, 6), 6: at(0, 1, 4, 5)}
	withoutFour := map[int32]builderapi.Report{0: at(1, 4, 5, 6), 1: at(0, 4, 5, 6), 5: at(0, 1, 4, 6), 6: at(0, 1, 4, 5)}
	movedUnit := func(units ...int32) *ebv1.FailoverStatus {
		fs := &ebv1.FailoverStatus{}
		for _, u := range units {
			fs.Moves = append(fs.Moves, ebv1.UnitMove{Unit: u})
		}
		return fs
	}
	for _, tc := range []struct {
		name    string
		reports map[int32]builderapi.Report
		last    *ebv1.FailoverStatus
		want    string
	}{
		{"every rank that answers lost to all the others (starved, or split): the highest", everyone, nil, "6:PeerLost"},
		{"rank 6's unit moved last: the next highest", everyone, movedUnit(4), "5:PeerLost"},
		{"every unit moved last: the highest", everyone, movedUnit(0, 1, 2, 3, 4), "6:PeerLost"},
		{"rank 4 silent and reported by all: it fails too", withoutFour, nil, "4:PeerLost 6:PeerLost"},
		{"one rank lost by the rest: as it was", map[int32]builderapi.Report{0: at(4), 1: at(4), 4: at(0, 1, 5, 6), 5: at(4), 6: at(4)},
			nil, "4:PeerLost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failures := Failures(table, Endpoints(f), Nodes{"s0": true, "s1": true, "s2": true, "s3": true}, nil, tc.reports)
			var got []string
			for _, fl := range OneOfMutualLoss(table, tc.reports, failures, tc.last) {
				got = append(got, fmt.Sprintf("%d:%s", fl.Rank, fl.Reason))
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("failures %q, want %q (of %v)", s, tc.want, failures)
			}
		})
	}
	// A node failure beside the mutual loss is no peer loss: it stays.
	failures := []Failure{{Rank: 0, Reason: ReasonPeerLost}, {Rank: 1, Reason: ebv1.EndpointNodeNotReady}, {Rank: 4, Reason: ReasonPeerLost},
		{Rank: 5, Reason: ReasonPeerLost}, {Rank: 6, Reason: ReasonPeerLost}}
	reports := map[int32]builderapi.Report{0: at(4, 5, 6), 4: at(0, 5, 6), 5: at(0, 4, 6), 6: at(0, 4, 5)}
	if got := OneOfMutualLoss(table, reports, failures, nil); fmt.Sprint(got) != fmt.Sprint([]Failure{failures[1], failures[4]}) {
		t.Errorf("with a node failure: %v, want rank 1's NodeNotReady and rank 6's PeerLost", got)
	}
}
