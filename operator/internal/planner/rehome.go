package planner

import (
	"fmt"
	"strings"
)

// Rehome moves back onto its own endpoint every unit that a failure moved
// off the endpoint whose readout streams it read (Rank.Home), once that
// endpoint is a usable warm spare of t again: its server back, offered
// again (runplan.Replenish), its spare pod Ready (the caller leaves cold
// spares out of fabric). Readout is physical: the unit's fibres end there
// only, so until it is home every event lacks those streams. The rank it
// leaves stays a warm spare on its endpoint, its builder standing by, as
// it was before the failure moved the unit there; in a folded table the
// unit runs RU+BU again (a unit moved to a spare without fibres ran its BU
// alone, its source unread). A move that would add a link overload is not
// made: the unit stays, for a later call. All moves land in one table at
// the epoch after t's, returned with what was done, each result's failed
// rank being the rank the unit leaves; with nothing to do, t itself and no
// results. A fabric that does not describe t is refused, as by Failover.
func Rehome(fabric Fabric, t RankTable) (RankTable, []FailoverResult, error) {
	if err := fabric.validateFor(t); err != nil {
		return RankTable{}, nil, err
	}
	endpoint := fabric.ByName()
	physical := readsStreams(fabric)
	next := t
	var done []FailoverResult
	for _, away := range t.Ranks {
		if away.Role != Live || away.Home == "" {
			continue
		}
		home, ok := next.RankOf(away.Home)
		if !ok || next.Ranks[home].Role != Spare || !endpoint[away.Home].Schedulable {
			continue
		}
		before, err := CheckLinkLoad(fabric, next)
		if err != nil {
			return RankTable{}, nil, err
		}
		moved := next.moveHome(away.Rank, home, endpoint[away.Home], physical)
		after, err := CheckLinkLoad(fabric, moved)
		if err != nil {
			return RankTable{}, nil, err
		}
		if len(addedOverloads(before, after)) > 0 {
			continue
		}
		next = moved
		done = append(done, FailoverResult{
			FailedRank: away.Rank, FailedEndpoint: away.Endpoint, SpareRank: home, SpareEndpoint: away.Home,
			Unit: away.Unit, Function: moved.Ranks[home].Function,
			Reason: fmt.Sprintf("unit %d goes home to %s (rank %d), a warm spare again, where its readout streams %s end; "+
				"%s (rank %d) is a warm spare again", away.Unit, away.Home, home,
				strings.Join(endpoint[away.Home].Streams, ","), away.Endpoint, away.Rank),
		})
	}
	return atNextEpoch(t, next, done)
}

// moveHome returns a copy of t at the next epoch with the unit of live
// rank from back on spare rank to, on its Home endpoint home (moveUnit,
// which clears the home once the unit is on it), and from a warm spare on
// its own endpoint again.
func (t RankTable) moveHome(from, to int, home Endpoint, physical bool) RankTable {
	next := t.moveUnit(from, to, home, physical)
	next.Ranks[from].Role, next.Ranks[from].Endpoint = Spare, t.Ranks[from].Endpoint
	return next
}
