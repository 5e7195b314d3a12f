package planner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// readoutFabric is 4 leaves of 4 ports, 2 spines with 2 links per pair:
// leaves 0 to 2 hold readout servers (r0..r5, two NUMA endpoints each,
// every endpoint reading one stream), leaf 3 two servers with no fibres
// (x0, x1), as a farm keeps its warm spares.
func readoutFabric() Fabric {
	f := Fabric{Leaves: 4, Spines: 2, PortsPerLeaf: 4, LinksPerPair: 2}
	for leaf := range 4 {
		for port := range 4 {
			server, numa := leaf*2+port/2, port%2
			node := fmt.Sprintf("r%d", server)
			if leaf == 3 {
				node = fmt.Sprintf("x%d", server-6)
			}
			ep := Endpoint{Name: fmt.Sprintf("%s-numa%d", node, numa), Node: node, NUMA: numa, Leaf: leaf, Port: port, Schedulable: true}
			if leaf < 3 {
				ep.Streams = []string{ep.Name + "-mfp0"}
			}
			f.Endpoints = append(f.Endpoints, ep)
		}
	}
	return f
}

// unreadSummary is "endpoint: why" per unread endpoint.
func unreadSummary(unread []Unread) []string {
	var out []string
	for _, u := range unread {
		out = append(out, u.Endpoint+": "+u.Why)
	}
	return out
}

func TestPlanKeepsStreamsRead(t *testing.T) {
	tests := []struct {
		name   string
		fabric Fabric
		req    Request
		leaves []int
		spares []string
		unread []string
	}{
		{name: "the servers without fibres are the spares", fabric: readoutFabric(), req: Request{Units: 12, Spares: 2},
			leaves: []int{0, 1, 2, 3}, spares: []string{"x1-numa0", "x1-numa1"}},
		// 12 streams, 10 units: two stay unread whatever the plan, so the
		// readout leaves alone hold the units and spares (fewer dummies).
		{name: "more streams than units: two unread, named", fabric: readoutFabric(), req: Request{Units: 10, Spares: 2},
			leaves: []int{0, 1, 2}, spares: []string{"r1-numa0", "r1-numa1"},
			unread: []string{"r1-numa0: held as a warm spare (rank 2)", "r1-numa1: held as a warm spare (rank 3)"}},
		{name: "few units: a readout leaf and the spares' leaf", fabric: readoutFabric(), req: Request{Units: 4, Spares: 2},
			leaves: []int{0, 3}, spares: []string{"x1-numa0", "x1-numa1"},
			unread: []string{"r2-numa0: on leaf 1, which the schedule does not span: the run has no unit for it",
				"r2-numa1: on leaf 1, which the schedule does not span: the run has no unit for it",
				"r3-numa0: on leaf 1, which the schedule does not span: the run has no unit for it",
				"r3-numa1: on leaf 1, which the schedule does not span: the run has no unit for it",
				"r4-numa0: on leaf 2, which the schedule does not span: the run has no unit for it",
				"r4-numa1: on leaf 2, which the schedule does not span: the run has no unit for it",
				"r5-numa0: on leaf 2, which the schedule does not span: the run has no unit for it",
				"r5-numa1: on leaf 2, which the schedule does not span: the run has no unit for it"}},
		{name: "a readout node not Ready", fabric: unschedulable(readoutFabric(), "r0-numa0"), req: Request{Units: 11, Spares: 2},
			leaves: []int{0, 1, 2, 3}, spares: []string{"x1-numa0", "x1-numa1"},
			unread: []string{"r0-numa0: its node is not schedulable (unknown or not Ready)"}},
		{name: "unfolded: BUs on readout endpoints leave their streams unread", fabric: readoutFabric(), req: Request{Units: 6, Spares: 2, Layout: Unfolded},
			leaves: []int{0, 1, 2, 3}, spares: []string{"x1-numa0", "x1-numa1"},
			unread: []string{"r3-numa0: runs a BU only (rank 6), which reads no streams", "r3-numa1: runs a BU only (rank 7), which reads no streams",
				"r4-numa0: runs a BU only (rank 8), which reads no streams", "r4-numa1: runs a BU only (rank 9), which reads no streams",
				"r5-numa0: runs a BU only (rank 10), which reads no streams", "r5-numa1: runs a BU only (rank 11), which reads no streams"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table := mustPlan(t, tc.fabric, tc.req)
			var spares []string
			for _, r := range table.Ranks {
				if r.Role == Spare {
					spares = append(spares, r.Endpoint)
				}
			}
			if !slices.Equal(table.LeavesInUse, tc.leaves) || !slices.Equal(spares, tc.spares) {
				t.Errorf("leaves %v spares %v, want %v %v", table.LeavesInUse, spares, tc.leaves, tc.spares)
			}
			if got := unreadSummary(UnreadStreams(tc.fabric, table)); !slices.Equal(got, tc.unread) {
				t.Errorf("unread:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.unread, "\n"))
			}
			assertNoOverload(t, tc.fabric, table)
		})
	}
}

// Streams unread by the plan stay so when their node fails later: the run
// never read them, so no failure lost them. 3 units on leaves 0 and 3:
// r1-numa1 idle, leaves 1 and 2 not spanned; then every node the run does
// not use goes NotReady.
func TestStreamsUnreadByPlanAreNotLostWhenTheirNodeFails(t *testing.T) {
	f := readoutFabric()
	table := mustPlan(t, f, Request{Units: 3, Spares: 2})
	var unused []string
	for _, ep := range f.Endpoints {
		if _, ranked := table.RankOf(ep.Name); !ranked {
			unused = append(unused, ep.Name)
		}
	}
	down := unschedulable(f, unused...)
	got := UnreadStreams(down, table)
	if len(got) != 9 || got[0].Endpoint != "r1-numa1" || got[0].Why != "idle: the run has no unit for it" ||
		got[1].Why != "on leaf 1, which the schedule does not span: the run has no unit for it" {
		t.Errorf("unread %v, want r1-numa1 idle and leaves 1 and 2 not spanned", unreadSummary(got))
	}
	for _, u := range got {
		if u.Lost {
			t.Errorf("%s: %s: lost, want unread by plan", u.Endpoint, u.Why)
		}
	}
}

// An unfolded run's RUs run where the streams are, whatever their ranks:
// readoutFabric with leaf 0's fibres moved to leaf 3, so that the first
// ranks read nothing. 8 units on all 16 endpoints: the RUs on leaves 1 and
// 2, the BUs on leaves 0 and 3, whose 4 streams alone stay unread.
func TestUnfoldedRUsRunWhereTheStreamsAre(t *testing.T) {
	f := readoutFabric()
	for i := range f.Endpoints {
		switch ep := &f.Endpoints[i]; ep.Leaf {
		case 0:
			ep.Streams = nil
		case 3:
			ep.Streams = []string{ep.Name + "-mfp0"}
		}
	}
	table := mustPlan(t, f, Request{Units: 8, Layout: Unfolded})
	var functions []string
	units := map[UnitID]int{}
	for _, r := range table.Ranks {
		functions = append(functions, string(r.Function))
		units[r.Unit]++
		if (r.Function == RU) != (len(r.Streams) > 0) {
			t.Errorf("rank %d (%s) %s reads %v", r.Rank, r.Endpoint, r.Function, r.Streams)
		}
	}
	want := "BU BU BU BU RU RU RU RU RU RU RU RU BU BU BU BU"
	if got := strings.Join(functions, " "); got != want {
		t.Errorf("functions %s, want %s", got, want)
	}
	for u := range UnitID(8) {
		if units[u] != 2 {
			t.Errorf("unit %d on %d ranks, want its RU and its BU", u, units[u])
		}
	}
	if got := UnreadStreams(f, table); len(got) != 4 || got[0].Endpoint != "x0-numa0" {
		t.Errorf("unread %v, want leaf 3's 4 BU endpoints", unreadSummary(got))
	}
	assertNoOverload(t, f, table)
}

func TestFailoverLeavesTheFailedEndpointsStreamsUnread(t *testing.T) {
	f := readoutFabric()
	before := mustPlan(t, f, Request{Units: 12, Spares: 3})
	failed, _ := before.RankOf("r2-numa1")
	after, res, err := Failover(f, before, failed)
	if err != nil {
		t.Fatal(err)
	}
	spare := after.Ranks[res.SpareRank]
	if spare.Leaf != 3 || spare.Function != BU || len(spare.Streams) != 0 || res.Function != BU || !spare.SourceUnread {
		t.Errorf("spare rank %+v (moved %s), want a spare of leaf 3 running the unit's BU alone (it has no fibres), its source unread",
			spare, res.Function)
	}
	want := []string{"r2-numa1: no rank runs it: its unit moved to a spare or, with none left, was dropped (a failure or a drain)"}
	if got := unreadSummary(UnreadStreams(f, after)); !slices.Equal(got, want) {
		t.Errorf("unread %v, want %v", got, want)
	}
	// The unit fails again, onto another spare (also without fibres): its
	// source is still unread, and the first spare's rank is a dummy again.
	again, res2, err := Failover(f, after, res.SpareRank)
	if err != nil {
		t.Fatal(err)
	}
	if s := again.Ranks[res2.SpareRank]; s.Unit != spare.Unit || s.Function != BU || !s.SourceUnread {
		t.Errorf("second spare %+v, want unit %d's BU alone, its source still unread", s, spare.Unit)
	}
	if d := again.Ranks[res.SpareRank]; d.Role != Dummy || d.SourceUnread {
		t.Errorf("the first spare's rank after the unit left %+v, want a dummy", d)
	}
	// The Fabric edited to show the fibres re-cabled to the cards of the
	// spare that runs the unit now: the next plan reads them there.
	recabled := again.Ranks[res2.SpareRank].Endpoint
	for i := range f.Endpoints {
		if f.Endpoints[i].Name == recabled {
			f.Endpoints[i].Streams = []string{"r2-numa1-mfp0"}
		}
		if f.Endpoints[i].Name == "r2-numa1" {
			f.Endpoints[i].Streams, f.Endpoints[i].Schedulable = nil, false
		}
	}
	replanned := mustPlan(t, f, Request{Units: 12, Spares: 1})
	if got := UnreadStreams(f, replanned); len(got) != 0 {
		t.Errorf("after re-cabling, unread %v, want none", unreadSummary(got))
	}
	if r, ok := replanned.RankOf(recabled); !ok || replanned.Ranks[r].Role != Live || replanned.Ranks[r].Function != RUBU ||
		!slices.Equal(replanned.Ranks[r].Streams, []string{"r2-numa1-mfp0"}) {
		t.Errorf("%s after re-cabling: rank %d %+v, want live RU+BU reading r2-numa1-mfp0", recabled, r, replanned.Ranks[r])
	}
	for _, r := range replanned.Ranks {
		if r.SourceUnread {
			t.Errorf("after re-cabling rank %d %+v still has its source unread", r.Rank, r)
		}
	}
}

// Where the Fabric lists streams, a folded unit on an endpoint without
// fibres runs its BU alone (partly unfolded); where it lists none, every
// folded unit runs RU and BU (its RU makes its data).
func TestFoldedUnitsWithoutFibresRunTheirBUAlone(t *testing.T) {
	noStreams := readoutFabric()
	for i := range noStreams.Endpoints {
		noStreams.Endpoints[i].Streams = nil
	}
	for _, tc := range []struct {
		name   string
		fabric Fabric
		bus    []string
	}{
		{name: "14 units, 12 endpoints with fibres", fabric: readoutFabric(), bus: []string{"x0-numa0", "x0-numa1"}},
		{name: "no streams listed", fabric: noStreams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := mustPlan(t, tc.fabric, Request{Units: 14})
			var bus []string
			for _, r := range table.Ranks {
				switch {
				case r.Role != Live:
				case r.Function == BU:
					bus = append(bus, r.Endpoint)
					if r.SourceUnread {
						t.Errorf("rank %d on %s: planned where no fibres are, it has no source to miss", r.Rank, r.Endpoint)
					}
				case r.Function != RUBU:
					t.Errorf("rank %d runs %s", r.Rank, r.Function)
				}
			}
			if !slices.Equal(bus, tc.bus) {
				t.Errorf("BU-only ranks on %v, want %v", bus, tc.bus)
			}
		})
	}
}

// A BU whose machine can no longer take its events moves alone: the rank
// reads on as the unit's RU, a spare on another server runs its BU, and no
// stream goes unread. Either half fails over as what it runs.
func TestMoveBULeavesTheRUReadingWhereItsFibresAre(t *testing.T) {
	f := readoutFabric()
	before := mustPlan(t, f, Request{Units: 12, Spares: 4})
	rank, _ := before.RankOf("r0-numa0")
	after, res, err := MoveBU(f, before, rank)
	if err != nil {
		t.Fatal(err)
	}
	ru, bu := after.Ranks[rank], after.Ranks[res.SpareRank]
	if ru.Function != RU || !slices.Equal(ru.Streams, []string{"r0-numa0-mfp0"}) || ru.Unit != before.Ranks[rank].Unit {
		t.Errorf("rank %d after the move %+v, want the unit's RU reading r0-numa0-mfp0", rank, ru)
	}
	if bu.Role != Live || bu.Function != BU || bu.Unit != ru.Unit || bu.SourceUnread || len(bu.Streams) != 0 || bu.Leaf == ru.Leaf {
		t.Errorf("spare rank %d after the move %+v, want unit %d's BU on another leaf, its source read (by rank %d)", res.SpareRank, bu, ru.Unit, rank)
	}
	if res.Function != BU || after.Epoch != before.Epoch+1 || before.Ranks[rank].Function != RUBU {
		t.Errorf("result %+v epoch %d: want the BU moved at the next epoch, t unchanged", res, after.Epoch)
	}
	if got := UnreadStreams(f, after); len(got) != 0 {
		t.Errorf("unread %v, want none: the RU reads on", unreadSummary(got))
	}
	if v, err := CheckLinkLoad(f, after); err != nil || len(v) != 0 {
		t.Errorf("link load after the move: %v %v", v, err)
	}

	// The BU's machine fails next: the BU moves on, as a BU (the unit's RU
	// reads elsewhere), to a spare not on its server.
	again, res2, err := Failover(f, after, res.SpareRank)
	if err != nil {
		t.Fatal(err)
	}
	if s := again.Ranks[res2.SpareRank]; s.Function != BU || s.Unit != ru.Unit || s.SourceUnread {
		t.Errorf("the BU's second spare %+v, want unit %d's BU alone", s, ru.Unit)
	}
	if _, _, err := MoveBU(f, again, rank); err == nil || !strings.Contains(err.Error(), "runs no BU") {
		t.Errorf("MoveBU of an RU alone: %v, want it refused", err)
	}
	// A BU alone (no RU half to leave behind) moves whole.
	whole, res3, err := MoveBU(f, again, res2.SpareRank)
	if err != nil {
		t.Fatal(err)
	}
	if whole.Ranks[res2.SpareRank].Role != Dummy || whole.Ranks[res3.SpareRank].Function != BU {
		t.Errorf("MoveBU of a BU alone: %+v -> %+v, want it moved whole", whole.Ranks[res2.SpareRank], whole.Ranks[res3.SpareRank])
	}
}

// An unfolded RU reads nothing but where fibres are: its failover takes
// only a spare with streams. With none left, the RU is lost and the unit's
// BU builds on with the source unread; a BU takes any spare.
func TestAnUnfoldedRUFailsOverOnlyWhereFibresAre(t *testing.T) {
	f := readoutFabric() // 12 endpoints with fibres on leaves 0-2, 4 without on leaf 3
	table := mustPlan(t, f, Request{Units: 4, Spares: 2, Layout: Unfolded})
	var ru, bu int = -1, -1
	var spares []string
	for _, r := range table.Ranks {
		switch {
		case r.Role == Spare:
			spares = append(spares, r.Endpoint)
		case r.Role == Live && r.Function == RU && ru < 0:
			ru = r.Rank
		case r.Role == Live && r.Function == BU && bu < 0:
			bu = r.Rank
		}
	}
	for _, name := range spares {
		if !strings.HasPrefix(name, "x") {
			t.Fatalf("spares %v, want the endpoints without fibres", spares)
		}
	}
	_, _, err := Failover(f, table, ru)
	if !errors.Is(err, ErrNoSpare) || !errors.Is(err, ErrNoFibredSpare) || !strings.Contains(err.Error(), "spares without fibres, where an RU reads nothing: x") {
		t.Errorf("RU failover onto spares without fibres: %v, want ErrNoFibredSpare naming them", err)
	}
	if _, res, err := Failover(f, table, bu); err != nil || !strings.HasPrefix(res.SpareEndpoint, "x") {
		t.Errorf("BU failover: %+v %v, want a spare without fibres", res, err)
	}
	dropped, err := DropUnit(f, table, ru)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range dropped.Ranks {
		if r.Role == Live && r.Unit == table.Ranks[ru].Unit && (r.Function != BU || !r.SourceUnread) {
			t.Errorf("unit %d after its RU was lost: rank %d %+v, want its BU with the source unread", r.Unit, r.Rank, r)
		}
	}
	if dropped.Ranks[ru].Role != Dummy || table.Ranks[ru].Role != Live || dropped.Epoch != table.Epoch+1 {
		t.Errorf("DropUnit: rank %d %+v (t's %+v), epoch %d; want a dummy in the copy only, at the next epoch", ru, dropped.Ranks[ru], table.Ranks[ru], dropped.Epoch)
	}
	// No spare took the RU: its streams are named unread without claiming
	// that one did.
	wantUnread := table.Ranks[ru].Endpoint + ": no rank runs it: its unit moved to a spare or, with none left, was dropped (a failure or a drain)"
	if got := unreadSummary(UnreadStreams(f, dropped)); !slices.Contains(got, wantUnread) {
		t.Errorf("unread after the RU was dropped: %v, want %q", got, wantUnread)
	}

	// A spare with fibres of its own: the RU moves there and reads them.
	withFibres := mustPlan(t, f, Request{Units: 4, Spares: 6, Layout: Unfolded})
	ruRank := slices.IndexFunc(withFibres.Ranks, func(r Rank) bool { return r.Role == Live && r.Function == RU })
	next, res, err := Failover(f, withFibres, ruRank)
	if err != nil {
		t.Fatal(err)
	}
	if s := next.Ranks[res.SpareRank]; s.Function != RU || len(s.Streams) == 0 || s.SourceUnread {
		t.Errorf("RU failover with fibred spares: %+v, want an RU reading the spare's streams", s)
	}
}

// A BU that builds without the stream its unit read is marked
// SourceUnread however it got there, and an RU half never moves where it
// would read nothing: the reproducers on readoutFabric (the spares
// of 12 folded units are x0 and x1, ranks 12 to 15, without fibres; those
// of 10 are r1, ranks 2 and 3, with fibres).
func TestSourceUnreadFollowsTheUnitsBU(t *testing.T) {
	folded, foldedFibredSpares := Request{Units: 12, Spares: 4}, Request{Units: 10, Spares: 2}
	unfolded := Request{Units: 4, Spares: 2, Layout: Unfolded}
	tests := []struct {
		name   string
		req    Request
		steps  []string // "MoveBU r", "DropUnit r", or "fail r": Failover, dropping the unit with no spare left (runplan.Recover)
		trace  []string
		unread []int // live ranks marked SourceUnread at the end
	}{
		{name: "a split unit's RU finds no spare with fibres: dropped, its BU's source unread", req: folded,
			steps: []string{"MoveBU 0", "fail 0"},
			trace: []string{"MoveBU 0: BU to rank 12 (x0-numa0)", "fail 0: dropped, no spare with fibres left"}, unread: []int{12}},
		{name: "a split unit's RU moves onto a spare with fibres and reads there", req: foldedFibredSpares,
			steps: []string{"MoveBU 0", "fail 0"},
			trace: []string{"MoveBU 0: BU to rank 2 (r1-numa0)", "fail 0: RU to rank 3 (r1-numa1)"}},
		{name: "the BU of a split unit whose RU was lost keeps its source unread when it fails over", req: folded,
			steps: []string{"MoveBU 0", "DropUnit 0", "fail 12"},
			trace: []string{"MoveBU 0: BU to rank 12 (x0-numa0)", "DropUnit 0", "fail 12: BU to rank 14 (x1-numa0)"}, unread: []int{14}},
		{name: "an unfolded BU whose RU was lost keeps its source unread when it fails over", req: unfolded,
			steps: []string{"DropUnit 0", "fail 4"},
			trace: []string{"DropUnit 0", "fail 4: BU to rank 10 (x1-numa0)"}, unread: []int{10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := readoutFabric()
			table := mustPlan(t, f, tc.req)
			var trace []string
			for _, step := range tc.steps {
				var op string
				var rank int
				fmt.Sscanf(step, "%s %d", &op, &rank)
				var next RankTable
				var res FailoverResult
				var err error
				switch op {
				case "MoveBU":
					next, res, err = MoveBU(f, table, rank)
				case "fail":
					next, res, err = Failover(f, table, rank)
					if errors.Is(err, ErrNoSpare) {
						why := "no spare left"
						if errors.Is(err, ErrNoFibredSpare) {
							why = "no spare with fibres left"
						}
						trace = append(trace, fmt.Sprintf("%s: dropped, %s", step, why))
						next, err = DropUnit(f, table, rank)
					}
				case "DropUnit":
					next, err = DropUnit(f, table, rank)
				}
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if res.SpareEndpoint != "" {
					trace = append(trace, fmt.Sprintf("%s: %s to rank %d (%s)", step, res.Function, res.SpareRank, res.SpareEndpoint))
				} else if op == "DropUnit" {
					trace = append(trace, step)
				}
				table = next
			}
			var unread []int
			for _, r := range table.Ranks {
				if r.SourceUnread {
					unread = append(unread, r.Rank)
				}
				if r.Role == Live && r.Function != BU && len(r.Streams) == 0 {
					t.Errorf("rank %d (%s) runs %s with no streams to read", r.Rank, r.Endpoint, r.Function)
				}
			}
			if !slices.Equal(trace, tc.trace) || !slices.Equal(unread, tc.unread) {
				t.Errorf("steps:\n%s\nSourceUnread on %v; want:\n%s\non %v", strings.Join(trace, "\n"), unread, strings.Join(tc.trace, "\n"), tc.unread)
			}
		})
	}
}
