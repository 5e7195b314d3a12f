package planner

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// propertySeed fixes every generated sequence: a counterexample names its
// sequence number, and the same seed and number replay it.
const propertySeed = 31

const propertySequences = 10_000

// TestPlannerInvariants plays random sequences of failovers, dropped
// units, moved BUs and Fabric edits on random fabrics and checks after
// every step what an online crew relies on: every stream is read by one
// RU or named unread, every BU that lost its source says so, no link is
// overloaded, the two halves of a failed server do not land on one spare
// server while a free one was usable, a failover finds no spare only when
// none is schedulable, off the failed server and (for an RU alone)
// fibred, whatever the unit's server or leaf lost before (a server lost
// while its node stays Ready included), and a Fabric that does not match
// the table is refused, naming the field.
func TestPlannerInvariants(t *testing.T) {
	planned := 0
	for seq := range uint64(propertySequences) {
		s := newScenario(seq)
		if s == nil {
			continue // Plan refused the generated fabric: nothing to play
		}
		planned++
		if bad := s.play(); bad != "" {
			t.Fatalf("counterexample, seed %d sequence %d:\n  %s\nviolates: %s", propertySeed, seq, strings.Join(s.steps, "\n  "), bad)
		}
	}
	// Most generated fabrics must plan, or the test checks little.
	if planned < propertySequences/2 {
		t.Fatalf("only %d of %d generated fabrics planned", planned, propertySequences)
	}
	t.Logf("%d of %d sequences planned and played", planned, propertySequences)
}

// scenario is one random sequence: the fabric and table as they stand,
// the steps so far, and what the checks need to remember.
type scenario struct {
	rng    *rand.Rand
	fabric Fabric
	table  RankTable
	steps  []string
	// hadSource: the unit read a stream at some step, so a BU of it that
	// reads none now has a source to miss.
	hadSource map[UnitID]bool
	// leftFrom is the unit that failed over from an endpoint.
	leftFrom map[string]UnitID
}

// newScenario generates a fabric and a request and plans them; nil where
// Plan refuses.
func newScenario(seq uint64) *scenario {
	rng := rand.New(rand.NewPCG(propertySeed, seq))
	f := randomFabric(rng)
	ready := 0
	for _, ep := range f.Endpoints {
		if ep.Schedulable {
			ready++
		}
	}
	req := Request{Layout: Folded}
	if rng.IntN(2) == 0 {
		req.Layout = Unfolded
	}
	perUnit := req.endpointsPerUnit()
	if ready < perUnit {
		return nil
	}
	req.Spares = rng.IntN(min(5, ready-perUnit) + 1)
	req.Units = 1 + rng.IntN((ready-req.Spares)/perUnit)
	table, err := Plan(f, req)
	if err != nil {
		return nil
	}
	s := &scenario{rng: rng, fabric: f, table: table, hadSource: map[UnitID]bool{}, leftFrom: map[string]UnitID{}}
	s.log("Plan(%s) with %+v: %s", describe(f), req, s.describeTable())
	return s
}

// randomFabric is 1-4 leaves of 2-8 ports, 1-4 spines, 1-3 links per
// pair, either routing, servers of 1 or 2 NUMA halves on adjacent ports,
// some slots empty, most servers fibred (none in one fabric of eight),
// one in twelve not Ready.
func randomFabric(rng *rand.Rand) Fabric {
	f := Fabric{Leaves: 1 + rng.IntN(4), Spines: 1 + rng.IntN(4), PortsPerLeaf: 2 + rng.IntN(7), LinksPerPair: 1 + rng.IntN(3)}
	if rng.IntN(2) == 0 {
		f.Routing = RoutingLeafPortModSpines
	}
	halves := 1 + rng.IntN(2)
	physical := rng.IntN(8) > 0
	server := 0
	for leaf := range f.Leaves {
		for port := 0; port+halves <= f.PortsPerLeaf; port += halves {
			if rng.IntN(8) == 0 {
				continue
			}
			node := fmt.Sprintf("s%d", server)
			server++
			fibred, ready := physical && rng.IntN(3) > 0, rng.IntN(12) > 0
			for numa := range halves {
				ep := Endpoint{Name: fmt.Sprintf("%s-%d", node, numa), Node: node, NUMA: numa, Leaf: leaf, Port: port + numa, Schedulable: ready}
				if fibred {
					ep.Streams = []string{ep.Name + "-mfp"}
				}
				f.Endpoints = append(f.Endpoints, ep)
			}
		}
	}
	return f
}

// play runs 1-8 random steps and returns the first violation, or "".
func (s *scenario) play() string {
	if bad := s.check(); bad != "" {
		return bad
	}
	for range 1 + s.rng.IntN(8) {
		live := s.live()
		if len(live) == 0 {
			return ""
		}
		rank := live[s.rng.IntN(len(live))]
		var bad string
		switch op := s.rng.IntN(20); {
		case op < 6:
			bad = s.failOver(rank)
		case op < 8:
			bad = s.serverDown(s.table.Ranks[rank].Endpoint, true)
		case op < 10:
			bad = s.serverDown(s.table.Ranks[rank].Endpoint, false)
		case op < 11:
			bad = s.drop(rank)
		case op < 14:
			bad = s.moveBU(rank)
		case op < 16:
			s.serverUp()
		default:
			bad = s.mismatchedFabricRefused(rank)
		}
		if bad == "" {
			bad = s.check()
		}
		if bad != "" {
			return bad
		}
	}
	return ""
}

func (s *scenario) log(format string, args ...any) {
	s.steps = append(s.steps, fmt.Sprintf(format, args...))
}

// live is the live ranks of the table.
func (s *scenario) live() []int {
	var out []int
	for _, r := range s.table.Ranks {
		if r.Role == Live {
			out = append(out, r.Rank)
		}
	}
	return out
}

func (s *scenario) endpoint(name string) (Endpoint, bool) {
	i := slices.IndexFunc(s.fabric.Endpoints, func(ep Endpoint) bool { return ep.Name == name })
	if i < 0 {
		return Endpoint{}, false
	}
	return s.fabric.Endpoints[i], true
}

func (s *scenario) node(name string) string {
	ep, _ := s.endpoint(name)
	return ep.Node
}

// noSpare says whether err is a failover that found no usable spare: the
// run then drops the unit (runplan.Recover).
func noSpare(err error) bool {
	return errors.Is(err, ErrNoSpare) || errors.Is(err, ErrSpareWouldConflict)
}

// failOver fails the unit of rank over as the run does: to a spare, or,
// with none usable, dropped.
func (s *scenario) failOver(rank int) string {
	failed := s.table.Ranks[rank]
	next, res, err := Failover(s.fabric, s.table, rank)
	if noSpare(err) {
		s.log("Failover(rank %d, %s %s unit %d): %v", rank, failed.Endpoint, failed.Function, failed.Unit, err)
		if spare, ok := s.usableSpare(failed); ok && errors.Is(err, ErrNoSpare) {
			return fmt.Sprintf("Failover(rank %d) found no spare, though spare %s is schedulable, on another server and fibred where an RU needs it", rank, spare)
		}
		return s.drop(rank)
	}
	if err != nil {
		return fmt.Sprintf("Failover(rank %d): %v", rank, err)
	}
	s.log("Failover(rank %d, %s %s unit %d) -> rank %d (%s) %s%s", rank, failed.Endpoint, failed.Function, failed.Unit,
		res.SpareRank, res.SpareEndpoint, next.Ranks[res.SpareRank].Function, unreadMark(next.Ranks[res.SpareRank]))
	if bad := s.apartFromSibling(rank, res, next); bad != "" {
		return bad
	}
	s.leftFrom[failed.Endpoint] = failed.Unit
	s.table = next
	return ""
}

// apartFromSibling checks that the unit Failover moved did not land on the
// server that runs the unit which failed from its endpoint's sibling NUMA
// half (a failed server's two units on one spare server), unless no spare
// on a server that runs no unit was usable: Failover refuses them all.
func (s *scenario) apartFromSibling(rank int, res FailoverResult, next RankTable) string {
	failedNode, spareNode := s.node(res.FailedEndpoint), s.node(res.SpareEndpoint)
	for _, sibling := range s.fabric.Endpoints {
		unit, left := s.leftFrom[sibling.Name]
		if sibling.Node != failedNode || sibling.Name == res.FailedEndpoint || !left || unit == res.Unit {
			continue
		}
		together := slices.ContainsFunc(next.Ranks, func(r Rank) bool {
			return r.Role == Live && r.Unit == unit && s.node(r.Endpoint) == spareNode
		})
		if !together {
			continue
		}
		busy := map[string]bool{}
		for _, r := range s.table.Ranks {
			busy[s.node(r.Endpoint)] = busy[s.node(r.Endpoint)] || r.Role == Live
		}
		// The same failover with the spares on busy servers out of reach.
		onlyFree := s.fabric
		onlyFree.Endpoints = slices.Clone(s.fabric.Endpoints)
		for _, r := range s.table.Ranks {
			if i := slices.IndexFunc(onlyFree.Endpoints, func(ep Endpoint) bool { return ep.Name == r.Endpoint }); r.Role == Spare && busy[s.node(r.Endpoint)] {
				onlyFree.Endpoints[i].Schedulable = false
			}
		}
		if _, alt, err := Failover(onlyFree, s.table, rank); err == nil {
			return fmt.Sprintf("unit %d from %s joined unit %d (failed from its sibling %s) on server %s, though spare %s on a server running no unit was usable",
				res.Unit, res.FailedEndpoint, unit, sibling.Name, spareNode, alt.SpareEndpoint)
		}
	}
	return ""
}

// usableSpare is a spare of the table that Failover of failed may take,
// link load aside: schedulable, on another server, and fibred where
// failed is an RU alone and the readout is physical.
func (s *scenario) usableSpare(failed Rank) (string, bool) {
	fibres := failed.Function == RU && readsStreams(s.fabric)
	for _, r := range s.table.Ranks {
		ep, ok := s.endpoint(r.Endpoint)
		if r.Role == Spare && ok && ep.Schedulable && ep.Node != s.node(failed.Endpoint) && (!fibres || len(ep.Streams) > 0) {
			return r.Endpoint, true
		}
	}
	return "", false
}

// serverDown fails over each live unit of the server of endpoint name, in
// rank order: the server taken out (node not Ready, notReady), or lost
// while its node stays Ready (its builders unreachable).
func (s *scenario) serverDown(name string, notReady bool) string {
	node := s.node(name)
	if !notReady {
		s.log("server %s lost, its node Ready", node)
	} else {
		s.log("server %s not Ready", node)
		for i := range s.fabric.Endpoints {
			if s.fabric.Endpoints[i].Node == node {
				s.fabric.Endpoints[i].Schedulable = false
			}
		}
	}
	for _, r := range s.live() {
		if s.node(s.table.Ranks[r].Endpoint) != node {
			continue
		}
		if bad := s.failOver(r); bad != "" {
			return bad
		}
	}
	return ""
}

// serverUp brings a server that is not Ready back (no unit returns to it:
// the planner has no function that makes spares of returning servers).
func (s *scenario) serverUp() {
	var down []int
	for i, ep := range s.fabric.Endpoints {
		if !ep.Schedulable {
			down = append(down, i)
		}
	}
	if len(down) == 0 {
		return
	}
	node := s.fabric.Endpoints[down[s.rng.IntN(len(down))]].Node
	s.log("server %s Ready again", node)
	for i := range s.fabric.Endpoints {
		if s.fabric.Endpoints[i].Node == node {
			s.fabric.Endpoints[i].Schedulable = true
		}
	}
}

func (s *scenario) drop(rank int) string {
	r := s.table.Ranks[rank]
	next, err := DropUnit(s.fabric, s.table, rank)
	if err != nil {
		return fmt.Sprintf("DropUnit(rank %d): %v", rank, err)
	}
	s.log("DropUnit(rank %d, %s %s unit %d): %s", rank, r.Endpoint, r.Function, r.Unit, unitRanks(next, r.Unit))
	s.table = next
	return ""
}

// moveBU moves the BU of rank to a spare as the run does for a stalled
// output: with no spare usable, the unit is dropped.
func (s *scenario) moveBU(rank int) string {
	r := s.table.Ranks[rank]
	next, res, err := MoveBU(s.fabric, s.table, rank)
	switch {
	case r.Function == RU && err != nil:
		s.log("MoveBU(rank %d, %s RU unit %d): refused, %v", rank, r.Endpoint, r.Unit, err)
		return ""
	case noSpare(err):
		s.log("MoveBU(rank %d, %s %s unit %d): %v", rank, r.Endpoint, r.Function, r.Unit, err)
		return s.drop(rank)
	case err != nil:
		return fmt.Sprintf("MoveBU(rank %d): %v", rank, err)
	}
	s.log("MoveBU(rank %d, %s %s unit %d) -> rank %d (%s) %s", rank, r.Endpoint, r.Function, r.Unit,
		res.SpareRank, res.SpareEndpoint, next.Ranks[res.SpareRank].Function)
	s.table = next
	return ""
}

// mismatchedFabricRefused edits the Fabric so that it no longer describes
// the table's cabling (two endpoints on one port, an endpoint of the table
// re-cabled to a free port, or its entry removed), checks that Failover,
// MoveBU and DropUnit refuse it naming a field, and undoes the edit.
func (s *scenario) mismatchedFabricRefused(rank int) string {
	kept := s.fabric
	s.fabric.Endpoints = slices.Clone(kept.Endpoints)
	defer func() { s.fabric = kept }()
	name := s.table.Ranks[rank].Endpoint
	at := slices.IndexFunc(s.fabric.Endpoints, func(ep Endpoint) bool { return ep.Name == name })
	var edit string
	switch s.rng.IntN(3) {
	case 0:
		other := s.rng.IntN(len(s.fabric.Endpoints))
		if other == at {
			return ""
		}
		s.fabric.Endpoints[other].Leaf, s.fabric.Endpoints[other].Port = s.fabric.Endpoints[at].Leaf, s.fabric.Endpoints[at].Port
		edit = fmt.Sprintf("%s cabled onto %s's port", s.fabric.Endpoints[other].Name, name)
	case 1:
		free, ok := s.freePort()
		if !ok {
			return ""
		}
		s.fabric.Endpoints[at].Leaf, s.fabric.Endpoints[at].Port = free[0], free[1]
		edit = fmt.Sprintf("%s re-cabled to leaf %d port %d", name, free[0], free[1])
	default:
		s.fabric.Endpoints = slices.Delete(s.fabric.Endpoints, at, at+1)
		edit = fmt.Sprintf("%s's entry removed", name)
		if len(s.fabric.Endpoints) == 0 {
			return ""
		}
	}
	var err error
	call := ""
	switch s.rng.IntN(3) {
	case 0:
		call = "Failover"
		_, _, err = Failover(s.fabric, s.table, rank)
	case 1:
		call = "MoveBU"
		_, _, err = MoveBU(s.fabric, s.table, rank)
	default:
		call = "DropUnit"
		_, err = DropUnit(s.fabric, s.table, rank)
	}
	s.log("Fabric edited (%s), then %s(rank %d): %v; edit undone", edit, call, rank, err)
	if fe := (*FieldError)(nil); !errors.As(err, &fe) {
		return fmt.Sprintf("%s accepted a Fabric that does not match the table (%s): want a refusal naming the field", call, edit)
	}
	return ""
}

// freePort is a random port of the fabric no endpoint is cabled to.
func (s *scenario) freePort() ([2]int, bool) {
	used := map[[2]int]bool{}
	for _, ep := range s.fabric.Endpoints {
		used[[2]int{ep.Leaf, ep.Port}] = true
	}
	var free [][2]int
	for l := range s.fabric.Leaves {
		for p := range s.fabric.PortsPerLeaf {
			if !used[[2]int{l, p}] {
				free = append(free, [2]int{l, p})
			}
		}
	}
	if len(free) == 0 {
		return [2]int{}, false
	}
	return free[s.rng.IntN(len(free))], true
}

// check returns the first invariant the table breaks, or "".
func (s *scenario) check() string {
	cabled := map[string][]string{}
	var streams []string
	for _, ep := range s.fabric.Endpoints {
		cabled[ep.Name] = ep.Streams
		streams = append(streams, ep.Streams...)
	}
	// Every stream is read by exactly one live RU (one that lists it and
	// has it cabled), or named by UnreadStreams.
	readers := map[string]int{}
	for _, r := range s.table.Ranks {
		if r.Role != Live || r.Function == BU {
			continue
		}
		for _, st := range r.Streams {
			if !slices.Contains(cabled[r.Endpoint], st) {
				return fmt.Sprintf("rank %d (%s) reads stream %s, which is not cabled to it", r.Rank, r.Endpoint, st)
			}
			readers[st]++
		}
	}
	unread := map[string]bool{}
	for _, u := range UnreadStreams(s.fabric, s.table) {
		for _, st := range u.Streams {
			unread[st] = true
		}
	}
	for _, st := range streams {
		if n := readers[st]; n > 1 || (n == 1) == unread[st] {
			return fmt.Sprintf("stream %s is read by %d live RUs and listed unread: %v", st, n, unread[st])
		}
	}
	// A BU that builds without a stream, where its unit had one, is marked
	// SourceUnread, and no other rank is.
	reading := map[UnitID]bool{}
	for _, r := range s.table.Ranks {
		if r.Role == Live && r.Function != BU && len(r.Streams) > 0 {
			reading[r.Unit] = true
			s.hadSource[r.Unit] = true
		}
	}
	for _, r := range s.table.Ranks {
		if r.Role != Live {
			if r.SourceUnread {
				return fmt.Sprintf("rank %d is %s and marked SourceUnread", r.Rank, r.Role)
			}
			continue
		}
		want := r.Function == BU && s.hadSource[r.Unit] && !reading[r.Unit]
		if r.SourceUnread != want {
			return fmt.Sprintf("rank %d (%s, %s of unit %d) SourceUnread=%v, want %v: %s", r.Rank, r.Endpoint, r.Function, r.Unit,
				r.SourceUnread, want, unitRanks(s.table, r.Unit))
		}
	}
	v, err := CheckLinkLoad(s.fabric, s.table)
	if err != nil {
		return err.Error()
	}
	if len(v) > 0 {
		return fmt.Sprintf("%d link overloads, first %v", len(v), v[0])
	}
	return ""
}

// unitRanks spells where a unit runs: "unit 3 on rank 2 (e) RU [s], ...".
func unitRanks(t RankTable, unit UnitID) string {
	var on []string
	for _, r := range t.Ranks {
		if r.Role == Live && r.Unit == unit {
			on = append(on, fmt.Sprintf("rank %d (%s) %s %v%s", r.Rank, r.Endpoint, r.Function, r.Streams, unreadMark(r)))
		}
	}
	if len(on) == 0 {
		return fmt.Sprintf("unit %d runs nowhere", unit)
	}
	return fmt.Sprintf("unit %d on %s", unit, strings.Join(on, ", "))
}

func unreadMark(r Rank) string {
	if r.SourceUnread {
		return " SourceUnread"
	}
	return ""
}

// describeTable spells a table a rank a word: role, endpoint, function,
// unit.
func (s *scenario) describeTable() string {
	var w []string
	for _, r := range s.table.Ranks {
		switch r.Role {
		case Live:
			w = append(w, fmt.Sprintf("%d:%s/%s/u%d", r.Rank, r.Endpoint, r.Function, r.Unit))
		case Spare:
			w = append(w, fmt.Sprintf("%d:spare/%s", r.Rank, r.Endpoint))
		}
	}
	return strings.Join(w, " ")
}

// describe spells a fabric: its switches and every endpoint as
// name@leaf:port, with its streams and "down" when not Ready.
func describe(f Fabric) string {
	var eps []string
	for _, ep := range f.Endpoints {
		e := fmt.Sprintf("%s@%d:%d", ep.Name, ep.Leaf, ep.Port)
		if len(ep.Streams) > 0 {
			e += "+fibre"
		}
		if !ep.Schedulable {
			e += " down"
		}
		eps = append(eps, e)
	}
	return fmt.Sprintf("%d leaves x %d ports, %d spines x %d links, routing %q; %s",
		f.Leaves, f.PortsPerLeaf, f.Spines, f.LinksPerPair, f.Routing, strings.Join(eps, ", "))
}
