package planner

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"daq.io/eventbuilder/operator/internal/shortlist"
)

// Layout says how the two halves of an event-builder unit are placed.
type Layout string

const (
	// Folded runs a unit's readout unit (RU) and builder unit (BU) on one
	// endpoint: one endpoint per unit.
	Folded Layout = "Folded"
	// Unfolded runs them on two endpoints: two endpoints per unit. The RUs
	// run on the live endpoints that read streams (readout is physical),
	// the first in rank order where there are more, topped up in rank order
	// where there are fewer; the BUs on the rest. RU and BU of unit u, the
	// u-th of each in rank order, have the same unit id; where every
	// endpoint reads streams, or none does, the first half of the live
	// ranks are RUs and the second BUs.
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
	RU   Function = "RU"    // unfolded: reads its endpoint's streams, sends
	BU   Function = "BU"    // unfolded: receives, builds, writes the output
)

// UnitID names a unit's role in the run: its place in the event stream and
// its output. It stays with the unit when a failover moves it to another
// rank; readout streams stay with their endpoint.
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
	// Unit, Function and Streams are set on live ranks only; Streams are
	// the endpoint's, read by an RU.
	Unit     UnitID
	Function Function
	Streams  []string
	// SourceUnread marks a live rank whose unit lost its readout: the
	// unit read streams until a failover moved it to a spare without
	// fibres, where it runs its BU alone. Every MEP keeps the unit's
	// source slot, as missing, and the run's incompleteEvents policy
	// decides what becomes of those events. A unit that never read (the
	// plan put it where no fibres are) has no source to miss.
	SourceUnread bool
	// Home is, on a live rank whose unit a failure moved off the endpoint
	// whose readout streams it read, that endpoint: the unit goes back
	// there once it is a warm spare again (Rehome). Empty on a unit at
	// home, or one that never read streams.
	Home string
}

// RankTable is a plan: the schedule's ranks and what runs on each.
type RankTable struct {
	// Epoch numbers the table; every failover increments it, and builders
	// switch tables together at a phase boundary.
	Epoch  int64
	Layout Layout
	// LeavesInUse are the leaves the schedule spans, ascending; the leaf
	// at position i holds ranks i*C .. (i+1)*C-1, C = N/len(LeavesInUse)
	// port columns (PortsPerLeaf, or fewer where columns are unused).
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

// N is the number of ranks in the schedule: the port columns in use on
// every leaf in use.
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
// epoch 1. The rank of port p on the i-th leaf in use is i*PortsPerLeaf+p,
// or, where only some port columns hold live or spare endpoints and the
// smaller table overloads no link, i*C+j for p the j-th of the C columns in
// use: the same port order on every leaf, which with linear shifting and
// the routing rule keeps every leaf-spine link within its capacity. A
// table that would still overload a link is refused (ErrLinkOverload).
// Which endpoints are live, spare or idle is described at
// selectEndpoints; the result does not depend on the order of
// fabric.Endpoints.
func Plan(fabric Fabric, req Request) (RankTable, error) {
	if err := fabric.Validate(); err != nil {
		return RankTable{}, fmt.Errorf("invalid fabric: %w", err)
	}
	if err := req.Validate(); err != nil {
		return RankTable{}, fmt.Errorf("invalid request: %w", err)
	}
	eps := slices.Clone(fabric.Endpoints)
	slices.SortFunc(eps, byLeafPort)
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
	t := number(fabric, req, sel, unschedulable, everyPort(fabric))
	if fewer := portsInUse(sel); len(fewer) < fabric.PortsPerLeaf {
		// Only the port columns some live or spare endpoint sits on: fewer
		// dummies, but the even spread over the spines is no longer given,
		// so it is kept only if it plays without an overload with every
		// spare live as well (a failover must not find it overloading).
		compact := number(fabric, req, sel, unschedulable, fewer)
		if v, err := CheckLinkLoad(fabric, sparesLive(compact)); err == nil && len(v) == 0 {
			t = compact
		}
	}
	violations, err := CheckLinkLoad(fabric, t)
	if err != nil {
		return RankTable{}, err
	}
	if len(violations) > 0 {
		return RankTable{}, fmt.Errorf("%w: %s%s; every link carries at most linksPerPair (%d) flows in a phase: %s",
			ErrLinkOverload, violations[0], more(len(violations)-1), fabric.LinksPerPair, overloadCause(fabric))
	}
	// A spare no unit can ever move to would let the run believe it has a
	// spare it has not: refused, so the crew sizes spares to what fits.
	if stranded, first := strandedSpares(fabric, t); len(stranded) > 0 {
		return RankTable{}, fmt.Errorf("%w: %w", ErrLinkOverload, fieldErr("spares",
			"ask for fewer spares, or give the links room for them: "+overloadCause(fabric),
			"%d of the %d spares could take no unit: moving any live unit onto %s overloads a link (%s)",
			len(stranded), req.Spares, strings.Join(stranded, ", "), first))
	}
	return t, nil
}

// strandedSpares are the spares of t (which overloads no link) onto which
// every live unit that may fail over there would overload a link, with
// the first such overload. Where t plays with every spare live at once,
// none is: a link's flows only grow with the ranks that send or receive,
// so any failover fits. A spare no unit may move to for other reasons (the
// same server, no fibres for an RU) is not counted: that is no link's
// doing.
func strandedSpares(fabric Fabric, t RankTable) (stranded []string, first Violation) {
	if v, err := CheckLinkLoad(fabric, sparesLive(t)); err != nil || len(v) == 0 {
		return nil, Violation{}
	}
	endpoint := fabric.ByName()
	physical := readsStreams(fabric)
	for _, spare := range t.Ranks {
		if spare.Role != Spare {
			continue
		}
		ep := endpoint[spare.Endpoint]
		var refused []Violation
		fits := false
		for _, r := range t.Ranks {
			if r.Role != Live || endpoint[r.Endpoint].Node == ep.Node || (needsFibres(fabric, r) && len(ep.Streams) == 0) {
				continue
			}
			v, _ := CheckLinkLoad(fabric, t.moveUnit(r.Rank, spare.Rank, ep, physical))
			if fits = len(v) == 0; fits {
				break
			}
			refused = append(refused, v[0])
		}
		if !fits && len(refused) > 0 {
			if len(stranded) == 0 {
				first = refused[0]
			}
			stranded = append(stranded, spare.Endpoint)
		}
	}
	return stranded, first
}

// overloadCause says why a leaf's ports overload its links to the spines,
// and the fixes for that cause: fewer spine links than ports (spines x
// linksPerPair < portsPerLeaf), or a port count the global-port routing
// does not spread evenly over the spines. Only a cause that holds is named:
// 40 ports over 7 spines of 6 links have room (42) but spread unevenly.
func overloadCause(f Fabric) string {
	var causes []string
	if room := f.Spines * f.LinksPerPair; room < f.PortsPerLeaf {
		causes = append(causes, fmt.Sprintf("spines x linksPerPair (%d x %d = %d) is below portsPerLeaf (%d): "+
			"add spines or links per pair, or cable the endpoints on at most %d ports per leaf",
			f.Spines, f.LinksPerPair, room, f.PortsPerLeaf, room))
	}
	if f.Routing != RoutingLeafPortModSpines && f.PortsPerLeaf%f.Spines != 0 {
		causes = append(causes, fmt.Sprintf("portsPerLeaf (%d) is not a multiple of spines (%d), so routing %s (by the global port) "+
			"spreads a leaf's ports unevenly over the spines: route by the port on the leaf (routing %s), "+
			"or add spines or links per pair until the uneven spread fits",
			f.PortsPerLeaf, f.Spines, cmp.Or(f.Routing, RoutingPortModSpines), RoutingLeafPortModSpines))
	}
	if len(causes) == 0 {
		// Not a table Plan builds: its ranks break the same port order on
		// every leaf.
		return "the ranks do not keep the same port order on every leaf: plan the run again"
	}
	return strings.Join(causes, "; and ")
}

// ErrLinkOverload: the schedule would put more flows on a leaf-spine link
// than it has links, in some phase.
var ErrLinkOverload = errors.New("the schedule overloads a leaf-spine link")

func more(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d more phase-links)", n)
}

// sparesLive is a copy of t with every spare rank live, reading and
// building (RU+BU): the most flows t can carry after failovers.
func sparesLive(t RankTable) RankTable {
	t.Ranks = slices.Clone(t.Ranks)
	for i := range t.Ranks {
		if t.Ranks[i].Role == Spare {
			t.Ranks[i].Role, t.Ranks[i].Function = Live, RUBU
		}
	}
	return t
}

// everyPort is every port of a leaf, ascending: the full port columns.
func everyPort(fabric Fabric) []int {
	ports := make([]int, fabric.PortsPerLeaf)
	for p := range ports {
		ports[p] = p
	}
	return ports
}

// portsInUse is the ports some live or spare endpoint of the selection
// sits on, on any leaf, ascending: the fewest port columns.
func portsInUse(sel selection) []int {
	var ports []int
	for _, ep := range slices.Concat(sel.live, sel.spares) {
		ports = append(ports, ep.Port)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// number builds the epoch-1 table of the selection with the given port
// columns: port ports[j] of the i-th leaf in use is rank i*len(ports)+j, the
// same permutation on every leaf.
func number(fabric Fabric, req Request, sel selection, unschedulable []Endpoint, ports []int) RankTable {
	t := RankTable{
		Epoch:         1,
		Layout:        cmp.Or(req.Layout, Folded),
		LeavesInUse:   sel.leaves,
		Ranks:         make([]Rank, len(sel.leaves)*len(ports)),
		Idle:          endpointNames(sel.idle),
		Unschedulable: endpointNames(unschedulable),
	}
	position, column := map[int]int{}, map[int]int{} // absolute leaf, port -> position in the schedule
	for j, p := range ports {
		column[p] = j
	}
	for i, l := range sel.leaves {
		position[l] = i
		for j, p := range ports {
			r := i*len(ports) + j
			t.Ranks[r] = Rank{Rank: r, Leaf: l, Port: p, Role: Dummy, Unit: NoUnit}
		}
	}
	rankOf := func(ep Endpoint) *Rank { return &t.Ranks[position[ep.Leaf]*len(ports)+column[ep.Port]] }
	for _, ep := range sel.spares {
		r := rankOf(ep)
		r.Role, r.Endpoint = Spare, ep.Name
	}
	// sel.live is in (leaf, port) order, which is rank order.
	rus := ruEndpoints(sel.live, req.Units)
	physical := readsStreams(fabric)
	var ru, bu UnitID
	for k, ep := range sel.live {
		r := rankOf(ep)
		r.Role, r.Endpoint = Live, ep.Name
		switch {
		case t.Layout == Folded:
			r.Unit, r.Function, r.Streams = UnitID(k), foldedFunction(physical, ep), slices.Clone(ep.Streams)
		case rus[ep.Name]:
			r.Unit, r.Function, r.Streams = ru, RU, slices.Clone(ep.Streams)
			ru++
		default:
			r.Unit, r.Function = bu, BU
			bu++
		}
	}
	return t
}

// readsStreams says whether the fabric's readout is physical: some endpoint
// lists streams. Otherwise RUs make their data (a generator, files).
func readsStreams(fabric Fabric) bool {
	return slices.ContainsFunc(fabric.Endpoints, func(ep Endpoint) bool { return len(ep.Streams) > 0 })
}

// foldedFunction is what a folded unit runs on endpoint ep: RU and BU, or,
// where the readout is physical and ep has no fibres, its BU alone (a
// partly unfolded unit: it builds its share of the events from the
// sources the set has).
func foldedFunction(physical bool, ep Endpoint) Function {
	if physical && len(ep.Streams) == 0 {
		return BU
	}
	return RUBU
}

// ruEndpoints picks where an unfolded run's units' RUs run among live (in
// rank order): the endpoints that read streams first, then those that do
// not, each in rank order.
func ruEndpoints(live []Endpoint, units int) map[string]bool {
	ordered := slices.Concat(byReadout(live))
	rus := map[string]bool{}
	for _, ep := range ordered[:min(units, len(ordered))] {
		rus[ep.Name] = true
	}
	return rus
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
