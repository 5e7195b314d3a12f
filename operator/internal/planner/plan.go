package planner

import (
	"cmp"
	"fmt"
	"slices"

	"daq.io/eventbuilder/operator/internal/shortlist"
)

// Layout says how the two halves of an event-builder unit are placed.
type Layout string

const (
	// Folded runs a unit's readout unit (RU) and builder unit (BU) on one
	// endpoint: one endpoint per unit.
	Folded Layout = "Folded"
	// Unfolded runs them on two endpoints: two endpoints per unit. The
	// live ranks in rank order are split in two halves: the first half are
	// RUs, the second BUs, RU and BU of unit u having the same unit id.
	// The schedule is unchanged (rank i sends to rank (n+i) mod N) but only
	// RU-to-BU flows move data, so an RU sends in about half of the phases.
	Unfolded Layout = "Unfolded"
)

// Request is what a run asks of the planner.
type Request struct {
	// Units is the number of live event-builder units.
	Units int
	// Spares is the number of warm spare endpoints (a spare server is two).
	Spares int
	// Layout is Folded or Unfolded; empty means Folded.
	Layout Layout
}

// endpointsPerUnit is 1 when folded, 2 when unfolded.
func (r Request) endpointsPerUnit() int {
	if r.Layout == Unfolded {
		return 2
	}
	return 1
}

// Role is what a rank does in the schedule.
type Role string

const (
	// Live ranks run a unit and move data.
	Live Role = "Live"
	// Dummy ranks keep the schedule in step and move no data: an empty
	// port, or a port whose endpoint is unschedulable, idle or failed.
	Dummy Role = "Dummy"
	// Spare ranks are dummies whose endpoint runs a warm spare, ready to
	// take over a failed unit.
	Spare Role = "Spare"
)

// Function is the part of a unit a live rank runs.
type Function string

const (
	RUBU Function = "RU+BU" // folded: both
	RU   Function = "RU"    // unfolded: reads the unit's streams, sends
	BU   Function = "BU"    // unfolded: receives, builds, writes the output
)

// UnitID names a unit's role in the run: its readout streams and its
// output. It stays with the unit when a failover moves it to another rank.
type UnitID int

// NoUnit is the UnitID of ranks that are not live.
const NoUnit UnitID = -1

// Rank is one entry of the rank table.
type Rank struct {
	Rank int
	// Leaf (absolute index) and Port are where this rank's port is.
	Leaf int
	Port int
	Role Role
	// Endpoint is the endpoint running on this port: set for Live and
	// Spare ranks, empty for dummies.
	Endpoint string
	// Unit, Function and Streams are set on live ranks only.
	Unit     UnitID
	Function Function
	Streams  []string
}

// RankTable is a plan: the schedule's ranks and what runs on each.
type RankTable struct {
	// Epoch numbers the table; every failover increments it, and builders
	// switch tables together at a phase boundary.
	Epoch  int64
	Layout Layout
	// LeavesInUse are the leaves the schedule spans, ascending; the leaf
	// at position i holds ranks i*PortsPerLeaf .. (i+1)*PortsPerLeaf-1.
	LeavesInUse []int
	// Ranks is indexed by rank; its length is N.
	Ranks []Rank
	// Idle are schedulable endpoints on leaves in use that the run does
	// not need; their ranks are dummies.
	Idle []string
	// Unschedulable are endpoints left out because their node is unknown
	// or not Ready.
	Unschedulable []string
}

// N is the number of ranks in the schedule: every server-facing port of
// the leaves in use.
func (t RankTable) N() int { return len(t.Ranks) }

// RankOf returns the rank of an endpoint that runs a live unit or a spare.
func (t RankTable) RankOf(endpoint string) (int, bool) {
	for _, r := range t.Ranks {
		if r.Endpoint == endpoint {
			return r.Rank, true
		}
	}
	return 0, false
}

// Count returns the number of ranks with the role.
func (t RankTable) Count(role Role) int {
	n := 0
	for _, r := range t.Ranks {
		if r.Role == role {
			n++
		}
	}
	return n
}

// Plan validates the fabric and the request and builds the rank table at
// epoch 1. The rank of port p on the i-th leaf in use is i*PortsPerLeaf+p:
// the same port order on every leaf, which with linear shifting and the
// routing rule keeps every leaf-spine link within its capacity. Which
// endpoints are live, spare or idle is described at selectEndpoints; the
// result does not depend on the order of fabric.Endpoints.
func Plan(fabric Fabric, req Request) (RankTable, error) {
	if err := fabric.Validate(); err != nil {
		return RankTable{}, fmt.Errorf("invalid fabric: %w", err)
	}
	if err := req.Validate(); err != nil {
		return RankTable{}, fmt.Errorf("invalid request: %w", err)
	}
	eps := slices.Clone(fabric.Endpoints)
	slices.SortFunc(eps, func(a, b Endpoint) int {
		return cmp.Or(cmp.Compare(a.Leaf, b.Leaf), cmp.Compare(a.Port, b.Port))
	})
	var ready, unschedulable []Endpoint
	for _, ep := range eps {
		if ep.Schedulable {
			ready = append(ready, ep)
		} else {
			unschedulable = append(unschedulable, ep)
		}
	}
	live := req.Units * req.endpointsPerUnit()
	if need := live + req.Spares; len(ready) < need {
		err := fmt.Errorf("need %d schedulable endpoints (%d for %d %s units, %d spares), have %d",
			need, live, req.Units, cmp.Or(req.Layout, Folded), req.Spares, len(ready))
		if len(unschedulable) > 0 {
			err = fmt.Errorf("%w; not schedulable: %s", err, names(unschedulable))
		}
		return RankTable{}, err
	}

	sel := selectEndpoints(ready, live, req.Spares)
	t := RankTable{
		Epoch:         1,
		Layout:        cmp.Or(req.Layout, Folded),
		LeavesInUse:   sel.leaves,
		Ranks:         make([]Rank, len(sel.leaves)*fabric.PortsPerLeaf),
		Idle:          endpointNames(sel.idle),
		Unschedulable: endpointNames(unschedulable),
	}
	position := map[int]int{} // absolute leaf -> position among leaves in use
	for i, l := range sel.leaves {
		position[l] = i
		for p := range fabric.PortsPerLeaf {
			r := i*fabric.PortsPerLeaf + p
			t.Ranks[r] = Rank{Rank: r, Leaf: l, Port: p, Role: Dummy, Unit: NoUnit}
		}
	}
	rankOf := func(ep Endpoint) *Rank { return &t.Ranks[position[ep.Leaf]*fabric.PortsPerLeaf+ep.Port] }
	for _, ep := range sel.spares {
		r := rankOf(ep)
		r.Role, r.Endpoint = Spare, ep.Name
	}
	// sel.live is in (leaf, port) order, which is rank order.
	for k, ep := range sel.live {
		r := rankOf(ep)
		r.Role, r.Endpoint = Live, ep.Name
		switch {
		case t.Layout == Folded:
			r.Unit, r.Function, r.Streams = UnitID(k), RUBU, slices.Clone(ep.Streams)
		case k < req.Units:
			r.Unit, r.Function, r.Streams = UnitID(k), RU, slices.Clone(ep.Streams)
		default:
			r.Unit, r.Function = UnitID(k-req.Units), BU
		}
	}
	return t, nil
}

func endpointNames(eps []Endpoint) []string {
	var out []string
	for _, ep := range eps {
		out = append(out, ep.Name)
	}
	return out
}

// names lists endpoint names for an error message, at most a handful.
func names(eps []Endpoint) string {
	return shortlist.Join(eps, ", ", func(ep Endpoint) string { return ep.Name })
}
