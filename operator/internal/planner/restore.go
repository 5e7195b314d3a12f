package planner

import (
	"errors"
	"slices"
)

// Restore puts back onto warm spares the units of a run of `units` units
// that no live rank of t runs: dropped by a failure that found no spare
// (DropUnit), while spares have come back since (a server restarted and
// offered again). Each goes where Failover would send it, lowest unit
// first, onto the lowest-ranked usable spare that adds no link overload: a
// folded unit runs RU+BU on a spare with fibres, its BU alone on one
// without (it never read: nothing to mark unread); an unfolded unit's
// missing RU takes only a spare with fibres (where readout is physical),
// and its BU marked SourceUnread reads again; a missing BU takes any spare.
// A spare on a server where an endpoint was vacated (its unit moved or
// was dropped, and the server is not back: replenished, its endpoints are
// spares again) is not used, as Failover never uses a failed endpoint's
// sibling: it shares what may have failed. A unit with no usable spare
// stays missing, for a later call. All moves
// land in one table at the epoch after t's, returned with what was done;
// with nothing restored, t itself and no results. A fabric that does not
// describe t is refused, as by Failover.
func Restore(fabric Fabric, t RankTable, units int) (RankTable, []FailoverResult, error) {
	if err := fabric.validateFor(t); err != nil {
		return RankTable{}, nil, err
	}
	physical := readsStreams(fabric)
	fabric = withoutSuspectServers(fabric, t)
	next := t
	var done []FailoverResult
	for _, lost := range missingUnits(t, units) {
		placed, res, err := toSpare(fabric, next, lost, func(spare Rank, ep Endpoint) RankTable {
			return next.placeUnit(lost, spare.Rank, ep, physical)
		})
		switch {
		case errors.Is(err, ErrNoSpare) || errors.Is(err, ErrSpareWouldConflict):
			continue
		case err != nil:
			return RankTable{}, nil, err
		}
		next, done = placed, append(done, res)
	}
	return atNextEpoch(t, next, done)
}

// atNextEpoch is next at the epoch after t's, with the moves done there;
// t itself where none was.
func atNextEpoch(t, next RankTable, done []FailoverResult) (RankTable, []FailoverResult, error) {
	if len(done) == 0 {
		return t, nil, nil
	}
	next.Epoch = t.Epoch + 1
	for i := range done {
		done[i].Epoch = next.Epoch
	}
	return next, done, nil
}

// missingUnits are the units, or unfolded halves, of a run of `units`
// units that no live rank of t runs, as phantom ranks numbered -1: a
// folded unit whole (RU+BU), an unfolded one by its RU or BU. A folded
// unit of which one half runs (its BU moved, then its RU was lost) is not
// missing: its BU builds, marked SourceUnread.
func missingUnits(t RankTable, units int) []Rank {
	has := map[UnitID]map[Function]bool{}
	for _, r := range t.Ranks {
		if r.Role == Live {
			if has[r.Unit] == nil {
				has[r.Unit] = map[Function]bool{}
			}
			has[r.Unit][r.Function] = true
		}
	}
	functions := []Function{RUBU}
	if t.Layout == Unfolded {
		functions = []Function{RU, BU}
	}
	var out []Rank
	for u := range UnitID(units) {
		for _, f := range functions {
			if (f == RUBU && len(has[u]) == 0) || (f != RUBU && !has[u][f]) {
				out = append(out, Rank{Rank: -1, Leaf: -1, Role: Live, Unit: u, Function: f})
			}
		}
	}
	return out
}

// placeUnit returns a copy of t, its epoch unchanged, with the missing
// unit (or half) `lost` live on spare rank `to`, on endpoint spare: a
// folded unit by the spare's fibres (foldedFunction), an RU reading the
// spare's streams, its unit's BU no longer missing its source.
func (t RankTable) placeUnit(lost Rank, to int, spare Endpoint, physical bool) RankTable {
	next := t
	next.Ranks = slices.Clone(t.Ranks)
	dst := &next.Ranks[to]
	dst.Role, dst.Unit, dst.Function, dst.Streams, dst.SourceUnread = Live, lost.Unit, lost.Function, nil, false
	if lost.Function == RUBU {
		dst.Function = foldedFunction(physical, spare)
	}
	if dst.Function != BU {
		dst.Streams = slices.Clone(spare.Streams)
	}
	if lost.Function == RU {
		for i, r := range next.Ranks {
			if r.Role == Live && r.Unit == lost.Unit && r.Function == BU {
				next.Ranks[i].SourceUnread = false
			}
		}
	}
	return next
}

// withoutSuspectServers is fabric with every endpoint of a server that
// has a vacated endpoint in t made unschedulable.
func withoutSuspectServers(fabric Fabric, t RankTable) Fabric {
	suspect := map[string]bool{}
	for _, ep := range Vacated(fabric, t) {
		suspect[ep.Node] = ep.Node != ""
	}
	fabric.Endpoints = slices.Clone(fabric.Endpoints)
	for i, ep := range fabric.Endpoints {
		if suspect[ep.Node] {
			fabric.Endpoints[i].Schedulable = false
		}
	}
	return fabric
}
