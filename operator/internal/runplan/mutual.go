package runplan

import (
	"slices"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/planner"
)

// OneOfMutualLoss keeps, of failures (Failures), one PeerLost failure of
// the ranks that answered when their peers' reports name every one of them
// (two or more): each timed the others out, a split between them or all of
// them starved of CPU (seen on kind under a restarting server). The reports
// cannot say which failed, and failing them all over would stop every unit
// for one broken link; the next epoch, with one on a spare, shows whether
// the rest reach each other. The one kept is the highest rank whose unit
// did not move in the last failover (last), else the highest: a unit whose
// link is broken cannot keep pushing a healthy peer from spare to spare.
// Other failures (a rank that did not answer, a node, a pod) stay.
func OneOfMutualLoss(t planner.RankTable, reports map[int32]builderapi.Report, failures []Failure, last *ebv1.FailoverStatus) []Failure {
	peerLost := map[int]bool{}
	for _, f := range failures {
		if f.Reason == ReasonPeerLost {
			peerLost[f.Rank] = true
		}
	}
	var answered []int
	for _, r := range t.Ranks {
		if _, ok := currentReport(t, reports, int32(r.Rank)); ok && r.Role == planner.Live {
			if !peerLost[r.Rank] {
				return failures // a rank that answered and is not lost: the majority had a judge
			}
			answered = append(answered, r.Rank)
		}
	}
	if len(answered) < 2 {
		return failures
	}
	moved := func(rank int) bool {
		return last != nil && slices.ContainsFunc(last.Moves, func(m ebv1.UnitMove) bool { return int(m.Unit) == int(t.Ranks[rank].Unit) })
	}
	keep := answered[len(answered)-1]
	for _, r := range slices.Backward(answered) {
		if !moved(r) {
			keep = r
			break
		}
	}
	return slices.DeleteFunc(slices.Clone(failures), func(f Failure) bool {
		return f.Reason == ReasonPeerLost && f.Rank != keep && slices.Contains(answered, f.Rank)
	})
}
