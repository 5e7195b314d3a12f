package planner

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Errors Failover returns when it cannot replace a failed unit; the caller
// applies the run's failure policy (run degraded, or stop).
var (
	ErrNoSpare = errors.New("no warm spare left")
	// ErrSpareWouldConflict: every schedulable spare would overload a
	// leaf-spine link in some phase.
	ErrSpareWouldConflict = errors.New("every spare left would overload a link")
)

// NoSpareReason is why no spare took a failed unit over, from the error
// Failover (or MoveBU, Restore) returned with ErrNoSpare or
// ErrSpareWouldConflict: the error without the failed rank it begins with
// ("no warm spare left (spares not schedulable: ...)").
func NoSpareReason(err error) string {
	if inner := errors.Unwrap(err); inner != nil {
		return inner.Error()
	}
	return err.Error()
}

// FailoverResult says what Failover did and why.
type FailoverResult struct {
	FailedRank     int
	FailedEndpoint string
	SpareRank      int
	SpareEndpoint  string
	// Unit and Function moved from the failed rank to the spare rank.
	Unit     UnitID
	Function Function
	// Epoch is the epoch of the new table.
	Epoch  int64
	Reason string
}

// Failover moves the unit of a failed live rank onto a warm spare and
// returns the new table at the next epoch; t is left unchanged. The failed
// rank becomes a dummy; the spare rank goes live with the failed rank's
// unit id and function, so the run keeps its outputs. Readout is physical:
// the failed endpoint's streams are fibres into its cards and stay there,
// unread (UnreadStreams names them) until the unit goes home once the
// endpoint is a spare again (Rehome: the unit's Home records it) or the
// Fabric shows them cabled to another endpoint; an RU on the spare reads the spare's own streams, and a
// folded unit on a spare without fibres (where the Fabric lists streams)
// runs its BU alone; an RU alone (unfolded, or a folded unit's RU half
// after MoveBU) takes only a spare with fibres (it would read nothing
// elsewhere), and a BU alone keeps its source unread (SourceUnread).
//
// Of the spares whose endpoint is still schedulable in fabric, on another
// server than the failed endpoint (never its sibling NUMA half), it
// prefers, where the failed endpoint's server lost its other half before,
// one on a server that runs no unit; then one on another leaf than the
// failed rank's (a failure seen only as lost peers may be that leaf); then
// the lowest rank; and takes the first whose table adds no link overload
// to t's (CheckLinkLoad): no phase's link carries more flows than it did,
// where it is over capacity. It never guesses from the table that a leaf
// is lost (see the package doc). Use t.RankOf to find the rank of a failed
// endpoint.
func Failover(fabric Fabric, t RankTable, failedRank int) (RankTable, FailoverResult, error) {
	if err := fabric.validateFor(t); err != nil {
		return RankTable{}, FailoverResult{}, err
	}
	failed, err := t.liveRank(failedRank)
	if err != nil {
		return RankTable{}, FailoverResult{}, fmt.Errorf("failed %w", err)
	}
	return toSpare(fabric, t, failed, asItRuns(fabric, t, failedRank))
}

// asItRuns moves what rank `from` of t runs onto a spare (moveUnit).
func asItRuns(fabric Fabric, t RankTable, from int) func(spare Rank, ep Endpoint) RankTable {
	physical := readsStreams(fabric)
	return func(spare Rank, ep Endpoint) RankTable { return t.moveUnit(from, spare.Rank, ep, physical) }
}

// ErrNoFibredSpare: an RU alone (unfolded, or a folded unit's RU half
// after MoveBU) failed where the readout is physical, and no spare left
// has fibres for it to read.
var ErrNoFibredSpare = fmt.Errorf("%w with readout fibres for an RU", ErrNoSpare)

// needsFibres says whether the spare for failed rank r must have readout
// streams: an RU alone (unfolded, or the RU half of a folded unit whose BU
// moved) reads nothing anywhere else, and would hold a spare while its
// BU builds without the source; dropped instead, it leaves that BU marked
// SourceUnread. A whole folded unit runs its BU alone on a spare without
// fibres instead.
func needsFibres(fabric Fabric, r Rank) bool {
	return r.Function == RU && readsStreams(fabric)
}

// DropUnit makes live rank `rank` a dummy and returns the new table at the
// next epoch (builders switch to it as to a failover's); t is left
// unchanged. Its unit (or, where the unit runs on two ranks, that
// half of it) is lost. Where the lost half read streams and the unit's BU
// runs on, that BU's source is unread: every MEP keeps the slot, as
// missing (Rank.SourceUnread). Like Failover, it refuses a fabric that is
// invalid or does not describe t.
func DropUnit(fabric Fabric, t RankTable, rank int) (RankTable, error) {
	if err := fabric.validateFor(t); err != nil {
		return RankTable{}, err
	}
	lost, err := t.liveRank(rank)
	if err != nil {
		return RankTable{}, err
	}
	next := t
	next.Epoch++
	next.Ranks = slices.Clone(t.Ranks)
	next.Ranks[rank] = Rank{Rank: rank, Leaf: lost.Leaf, Port: lost.Port, Role: Dummy, Unit: NoUnit}
	if lost.Function == BU || (len(lost.Streams) == 0 && !lost.SourceUnread) {
		return next, nil
	}
	for i, r := range next.Ranks {
		if r.Role == Live && r.Unit == lost.Unit && r.Function == BU {
			next.Ranks[i].SourceUnread = true
		}
	}
	return next, nil
}

// MoveBU moves the BU of a live rank's unit onto a warm spare and returns
// the new table at the next epoch; t is left unchanged. The rank keeps
// reading its streams as the unit's RU; the spare runs the unit's BU, so
// the unit's output (its consumer, its share of the events) moves to
// another machine: a partly unfolded unit, the reference design's remedy
// for a server that can no longer take its events (section IV-B, a failed
// GPU). A rank that runs its unit's BU alone moves whole (Failover). The
// spare is chosen as Failover chooses it.
func MoveBU(fabric Fabric, t RankTable, rank int) (RankTable, FailoverResult, error) {
	if err := fabric.validateFor(t); err != nil {
		return RankTable{}, FailoverResult{}, err
	}
	r, err := t.liveRank(rank)
	switch {
	case err != nil:
		return RankTable{}, FailoverResult{}, fmt.Errorf("failed %w", err)
	case r.Function == RU:
		return RankTable{}, FailoverResult{}, fmt.Errorf("rank %d runs no BU: there is no BU to move", rank)
	case r.Function == BU:
		return Failover(fabric, t, rank)
	}
	return toSpare(fabric, t, r, func(spare Rank, _ Endpoint) RankTable {
		next := t
		next.Epoch++
		next.Ranks = slices.Clone(t.Ranks)
		src, dst := &next.Ranks[rank], &next.Ranks[spare.Rank]
		dst.Role, dst.Unit, dst.Function, dst.Streams, dst.SourceUnread = Live, src.Unit, BU, nil, false
		src.Function = RU
		return next
	})
}

// toSpare moves what `move` moves off live rank `failed` onto the first
// usable spare (Failover says which) and says what it did. A failed rank
// numbered -1 is a unit no rank runs (Restore): no server or leaf of its
// own to avoid.
func toSpare(fabric Fabric, t RankTable, failed Rank, move func(spare Rank, ep Endpoint) RankTable) (RankTable, FailoverResult, error) {
	failedRank, restoring := failed.Rank, failed.Rank < 0
	who := fmt.Sprintf("rank %d (%s) failed", failedRank, failed.Endpoint)
	if restoring {
		who = fmt.Sprintf("unit %d (%s) runs on no rank", failed.Unit, failed.Function)
	}
	before, err := CheckLinkLoad(fabric, t)
	if err != nil {
		return RankTable{}, FailoverResult{}, err
	}

	endpoint := fabric.ByName()
	// A spare on the failed endpoint's server (its other NUMA half) shares
	// what may have failed: the server, its power, its cabling.
	node := func(name string) string { return endpoint[name].Node }
	sibling := func(r Rank) bool { return node(r.Endpoint) != "" && node(r.Endpoint) == node(failed.Endpoint) }
	fibres := needsFibres(fabric, failed)
	// The table keeps no history, but its vacated endpoints are the traces
	// of earlier moves: a server that lost its other half should not put
	// both its units on one spare server. (No lost leaf is read from them:
	// see the package doc.)
	serverLostAHalf := false
	for _, ep := range Vacated(fabric, t) {
		serverLostAHalf = serverLostAHalf || ep.Node == node(failed.Endpoint)
	}
	var candidates []Rank
	var gone, siblings, bare []string
	for _, r := range t.Ranks {
		switch {
		case r.Role != Spare:
		case !endpoint[r.Endpoint].Schedulable:
			gone = append(gone, r.Endpoint)
		case sibling(r):
			siblings = append(siblings, r.Endpoint)
		case fibres && len(endpoint[r.Endpoint].Streams) == 0:
			bare = append(bare, r.Endpoint)
		default:
			candidates = append(candidates, r)
		}
	}
	if len(candidates) == 0 {
		noSpare := ErrNoSpare
		if fibres {
			noSpare = ErrNoFibredSpare
		}
		err := noSpare // with why each spare could not, then who failed (NoSpareReason)
		if len(gone) > 0 {
			err = fmt.Errorf("%w (spares not schedulable: %s)", err, strings.Join(gone, ", "))
		}
		if len(siblings) > 0 {
			err = fmt.Errorf("%w (spares on the failed endpoint's server, never used for it: %s)", err, strings.Join(siblings, ", "))
		}
		if len(bare) > 0 {
			err = fmt.Errorf("%w (spares without fibres, where an RU reads nothing: %s)", err, strings.Join(bare, ", "))
		}
		return RankTable{}, FailoverResult{}, fmt.Errorf("%s: %w", who, err)
	}
	busy := map[string]bool{} // servers that run a unit
	for _, r := range t.Ranks {
		if r.Role == Live && r.Rank != failedRank {
			busy[node(r.Endpoint)] = true
		}
	}
	sameLeaf := func(r Rank) bool { return !restoring && r.Leaf == failed.Leaf }
	shared := func(r Rank) bool { return serverLostAHalf && busy[node(r.Endpoint)] }
	slices.SortStableFunc(candidates, func(a, b Rank) int {
		return cmp.Or(compareFalseFirst(shared(a), shared(b)), compareFalseFirst(sameLeaf(a), sameLeaf(b)), cmp.Compare(a.Rank, b.Rank))
	})

	var passed []string
	for _, spare := range candidates {
		next := move(spare, endpoint[spare.Endpoint])
		after, err := CheckLinkLoad(fabric, next)
		if err != nil {
			return RankTable{}, FailoverResult{}, err
		}
		if added := addedOverloads(before, after); len(added) > 0 {
			passed = append(passed, fmt.Sprintf("%s (rank %d) would add %d link overloads (%s)", spare.Endpoint, spare.Rank, len(added), added[0]))
			continue
		}
		why := fmt.Sprintf("spare %s (rank %d) is the lowest-ranked one on another leaf (%d) than the failed unit's (%d)",
			spare.Endpoint, spare.Rank, spare.Leaf, failed.Leaf)
		switch {
		case restoring:
			why = fmt.Sprintf("spare %s (rank %d) is the lowest-ranked usable one", spare.Endpoint, spare.Rank)
		case sameLeaf(spare):
			why = fmt.Sprintf("no usable spare on another leaf than %d; spare %s (rank %d) is on the failed unit's leaf", failed.Leaf, spare.Endpoint, spare.Rank)
		}
		switch {
		case shared(spare):
			why += "; no usable spare on a server that runs no unit, though the failed endpoint's server lost its other half before"
		case serverLostAHalf:
			why += "; its server runs no unit (the failed endpoint's server lost its other half before)"
		}
		why += fmt.Sprintf("; link check: %d overloads in %d phases", len(after), next.N())
		if len(passed) > 0 {
			why += "; passed over " + strings.Join(passed, ", ")
		}
		return next, FailoverResult{
			FailedRank: failedRank, FailedEndpoint: failed.Endpoint,
			SpareRank: spare.Rank, SpareEndpoint: spare.Endpoint,
			Unit: failed.Unit, Function: next.Ranks[spare.Rank].Function,
			Epoch: next.Epoch, Reason: why,
		}, nil
	}
	return RankTable{}, FailoverResult{}, fmt.Errorf("%s: %w", who, fmt.Errorf("%w: %s", ErrSpareWouldConflict, strings.Join(passed, ", ")))
}

// addedOverloads are the (phase, link)s of after that carry more flows
// than in before: the overloads a move adds. On a table that overloads
// already, fewer overloads elsewhere do not make up for a new one (the
// counts of before and after say nothing of which links they are).
func addedOverloads(before, after []Violation) []Violation {
	type phaseLink struct {
		phase int
		link  Link
	}
	flows := map[phaseLink]int{}
	for _, v := range before {
		flows[phaseLink{v.Phase, v.Link}] = v.Flows
	}
	var added []Violation
	for _, v := range after {
		if v.Flows > flows[phaseLink{v.Phase, v.Link}] {
			added = append(added, v)
		}
	}
	return added
}

// compareFalseFirst orders false before true.
func compareFalseFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// Vacated are the endpoints of fabric cabled to a port of t that run no
// rank and are neither idle nor unschedulable when planned: their unit
// moved to a spare or was dropped. (A table read back from its ConfigMap
// has no Unschedulable list: an endpoint not Ready at the plan is then
// counted too.)
func Vacated(fabric Fabric, t RankTable) []Endpoint {
	ports, named := map[[2]int]bool{}, map[string]bool{}
	for _, r := range t.Ranks {
		ports[[2]int{r.Leaf, r.Port}] = true
		named[r.Endpoint] = true
	}
	var out []Endpoint
	for _, ep := range fabric.Endpoints {
		if ports[[2]int{ep.Leaf, ep.Port}] && !named[ep.Name] && !slices.Contains(t.Idle, ep.Name) && !slices.Contains(t.Unschedulable, ep.Name) {
			out = append(out, ep)
		}
	}
	return out
}

// liveRank returns rank `rank` of t, or why it runs no unit.
func (t RankTable) liveRank(rank int) (Rank, error) {
	if rank < 0 || rank >= t.N() {
		return Rank{}, fmt.Errorf("rank %d is not in the table (ranks 0..%d)", rank, t.N()-1)
	}
	if r := t.Ranks[rank]; r.Role != Live {
		return Rank{}, fmt.Errorf("rank %d is %s, not live: it runs no unit", rank, r.Role)
	}
	return t.Ranks[rank], nil
}

// split says whether the unit of live rank r runs on another live rank
// too: its BU moved (MoveBU), so r runs its RU and the other its BU.
func (t RankTable) split(r int) bool {
	return slices.ContainsFunc(t.Ranks, func(o Rank) bool { return o.Rank != r && o.Role == Live && o.Unit == t.Ranks[r].Unit })
}

// moveUnit returns a copy of t at the next epoch with the unit of rank
// from moved onto the spare rank to, on endpoint spare, and from made a
// dummy. In a folded table the function follows the spare's fibres
// (foldedFunction); in an unfolded one, and for either half of a folded
// unit whose BU moved, the spare runs the failed function. A BU alone on
// the spare has its source unread where the moved rank read streams (a
// whole unit onto a spare without fibres) or had its source unread
// already (a BU whose RU was lost keeps that wherever it goes). The unit
// keeps its Home: the endpoint it read streams on before its first move.
func (t RankTable) moveUnit(from, to int, spare Endpoint, physical bool) RankTable {
	next := t
	next.Epoch++
	next.Ranks = slices.Clone(t.Ranks)
	src, dst := &next.Ranks[from], &next.Ranks[to]
	dst.Role, dst.Unit, dst.Function, dst.Streams = Live, src.Unit, src.Function, nil
	if t.Layout == Folded && !t.split(from) {
		dst.Function = foldedFunction(physical, spare)
	}
	dst.SourceUnread = dst.Function == BU && (len(src.Streams) > 0 || src.SourceUnread)
	if dst.Function != BU {
		dst.Streams = slices.Clone(spare.Streams)
	}
	dst.Home = src.Home
	if dst.Home == "" && len(src.Streams) > 0 {
		dst.Home = src.Endpoint
	}
	if dst.Home == dst.Endpoint {
		dst.Home = "" // failed over onto its own endpoint, a spare again
	}
	src.Role, src.Endpoint, src.Unit, src.Function, src.Streams, src.SourceUnread, src.Home = Dummy, "", NoUnit, "", nil, false, ""
	return next
}
