package planner

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// endpoints spells a table's endpoints one word a rank, "-" for none.
func endpoints(t RankTable) string {
	var w []string
	for _, r := range t.Ranks {
		w = append(w, cmp.Or(r.Endpoint, "-"))
	}
	return strings.Join(w, " ")
}

func TestPlanFig8(t *testing.T) {
	tests := []struct {
		name          string
		fabric        Fabric
		req           Request
		leaves        []int
		roles         string
		endpoints     string
		idle          []string
		unschedulable []string
	}{
		{name: "every port live", fabric: fig8(), req: Request{Units: 8},
			leaves: []int{0, 1, 2, 3}, roles: "LLLLLLLL", endpoints: "t0 t1 t2 t3 t4 t5 t6 t7"},
		{name: "unschedulable node is a dummy and reported", fabric: unschedulable(fig8(), "t5"), req: Request{Units: 7},
			leaves: []int{0, 1, 2, 3}, roles: "LLLLLDLL", endpoints: "t0 t1 t2 t3 t4 - t6 t7", unschedulable: []string{"t5"}},
		{name: "empty port is a dummy", fabric: func() Fabric { f := fig8(); f.Endpoints = slices.Delete(f.Endpoints, 5, 6); return f }(), req: Request{Units: 7},
			leaves: []int{0, 1, 2, 3}, roles: "LLLLLDLL", endpoints: "t0 t1 t2 t3 t4 - t6 t7"},
		{name: "spares on different leaves", fabric: fig8(), req: Request{Units: 6, Spares: 2},
			leaves: []int{0, 1, 2, 3}, roles: "LSLSLLLL", endpoints: "t0 t1 t2 t3 t4 t5 t6 t7"},
		{name: "small run uses one leaf", fabric: fig8(), req: Request{Units: 2},
			leaves: []int{0}, roles: "LL", endpoints: "t0 t1"},
		{name: "surplus endpoint left idle", fabric: fig8(), req: Request{Units: 3},
			leaves: []int{0, 1}, roles: "LDLL", endpoints: "t0 - t2 t3", idle: []string{"t1"}},
		{name: "leaf without schedulable endpoints is skipped", fabric: unschedulable(fig8(), "t0", "t1"), req: Request{Units: 2},
			leaves: []int{1}, roles: "LL", endpoints: "t2 t3", unschedulable: []string{"t0", "t1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Plan(tc.fabric, tc.req)
			if err != nil {
				t.Fatalf("Plan() error: %v", err)
			}
			if want := len(tc.leaves) * tc.fabric.PortsPerLeaf; got.N() != want {
				t.Errorf("N = %d, want %d", got.N(), want)
			}
			if !slices.Equal(got.LeavesInUse, tc.leaves) {
				t.Errorf("LeavesInUse = %v, want %v", got.LeavesInUse, tc.leaves)
			}
			if roles(got) != tc.roles {
				t.Errorf("roles = %s, want %s", roles(got), tc.roles)
			}
			if endpoints(got) != tc.endpoints {
				t.Errorf("endpoints = %s, want %s", endpoints(got), tc.endpoints)
			}
			if !slices.Equal(got.Idle, tc.idle) || !slices.Equal(got.Unschedulable, tc.unschedulable) {
				t.Errorf("Idle, Unschedulable = %v, %v; want %v, %v", got.Idle, got.Unschedulable, tc.idle, tc.unschedulable)
			}
			if got.Epoch != 1 {
				t.Errorf("Epoch = %d, want 1", got.Epoch)
			}
			for i, r := range got.Ranks {
				if r.Rank != i || r.Leaf != got.LeavesInUse[i/tc.fabric.PortsPerLeaf] || r.Port != i%tc.fabric.PortsPerLeaf {
					t.Errorf("rank %d at leaf %d port %d breaks rank = leaf position x ports + port", r.Rank, r.Leaf, r.Port)
				}
			}
			assertNoOverload(t, tc.fabric, got)
		})
	}
}

// assertNoOverload fails the test if any link carries more flows than it
// has links in any phase.
func assertNoOverload(t *testing.T, f Fabric, table RankTable) {
	t.Helper()
	v, err := CheckLinkLoad(f, table)
	if err != nil {
		t.Fatalf("CheckLinkLoad: %v", err)
	}
	if len(v) > 0 {
		t.Fatalf("%d link overloads, first %v", len(v), v[0])
	}
}

func TestPlanUnitsAndStreams(t *testing.T) {
	tests := []struct {
		name      string
		req       Request
		functions []Function
		units     []UnitID
	}{
		{name: "folded", req: Request{Units: 6, Spares: 2},
			functions: []Function{RUBU, "", RUBU, "", RUBU, RUBU, RUBU, RUBU},
			units:     []UnitID{0, NoUnit, 1, NoUnit, 2, 3, 4, 5}},
		{name: "unfolded: RUs then BUs", req: Request{Units: 3, Spares: 2, Layout: Unfolded},
			functions: []Function{RU, "", RU, "", RU, BU, BU, BU},
			units:     []UnitID{0, NoUnit, 1, NoUnit, 2, 0, 1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fig8()
			got, err := Plan(f, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range got.Ranks {
				if r.Function != tc.functions[i] || r.Unit != tc.units[i] {
					t.Errorf("rank %d: %s unit %d, want %s unit %d", i, r.Function, r.Unit, tc.functions[i], tc.units[i])
				}
				var want []string
				if r.Function == RUBU || r.Function == RU {
					want = f.Endpoints[i].Streams // fig8 endpoint i is on rank i
				}
				if !slices.Equal(r.Streams, want) {
					t.Errorf("rank %d streams = %v, want %v", i, r.Streams, want)
				}
			}
			assertNoOverload(t, f, got)
		})
	}
}

func TestPlanErrors(t *testing.T) {
	bad := fig8()
	bad.Endpoints[7].Port = 5
	tests := []struct {
		name   string
		fabric Fabric
		req    Request
		field  string // a FieldError on this field, if any
		says   []string
	}{
		{name: "invalid fabric", fabric: bad, req: Request{Units: 1}, field: "endpoints[7].port", says: []string{"invalid fabric", `"t7"`}},
		{name: "invalid request", fabric: fig8(), req: Request{Units: 0}, field: "units", says: []string{"invalid request"}},
		{name: "not enough schedulable endpoints", fabric: unschedulable(fig8(), "t5", "t6"), req: Request{Units: 5, Spares: 2},
			says: []string{"need 7 schedulable endpoints (5 for 5 Folded units, 2 spares), have 6", "not schedulable: t5, t6"}},
		{name: "unfolded needs two endpoints a unit", fabric: fig8(), req: Request{Units: 5, Layout: Unfolded},
			says: []string{"need 10 schedulable endpoints (10 for 5 Unfolded units, 0 spares), have 8"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Plan(tc.fabric, tc.req)
			if err == nil {
				t.Fatal("Plan() succeeded, want an error")
			}
			var fe *FieldError
			if tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field) {
				t.Errorf("Plan() = %v, want a FieldError on %s", err, tc.field)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Plan() = %q, want it to say %q", err, s)
				}
			}
		})
	}
}

func TestPlanDeterministic(t *testing.T) {
	f := lhcb()
	req := Request{Units: 318, Spares: 8}
	want, err := Plan(f, req)
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(5) {
		shuffled := f
		shuffled.Endpoints = slices.Clone(f.Endpoints)
		rand.New(rand.NewPCG(seed, seed)).Shuffle(len(shuffled.Endpoints), func(i, j int) {
			shuffled.Endpoints[i], shuffled.Endpoints[j] = shuffled.Endpoints[j], shuffled.Endpoints[i]
		})
		got, err := Plan(shuffled, req)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: plan depends on the order of the endpoints", seed)
		}
	}
}

func TestPlanLHCb(t *testing.T) {
	f := lhcb()
	if len(f.Endpoints) != 326 {
		t.Fatalf("lhcb fabric has %d endpoints, want 326", len(f.Endpoints))
	}
	got, err := Plan(f, Request{Units: 318, Spares: 8})
	if err != nil {
		t.Fatal(err)
	}
	if got.N() != 360 || len(got.LeavesInUse) != 18 {
		t.Fatalf("N = %d over %d leaves, want 360 over 18", got.N(), len(got.LeavesInUse))
	}
	if l, s, d := got.Count(Live), got.Count(Spare), got.Count(Dummy); l != 318 || s != 8 || d != 34 {
		t.Fatalf("live, spare, dummy = %d, %d, %d; want 318, 8, 34", l, s, d)
	}
	next := UnitID(0)
	for _, r := range got.Ranks {
		if r.Role == Live {
			if r.Unit != next || len(r.Streams) != 3 {
				t.Fatalf("rank %d: unit %d with %d streams, want unit %d with 3", r.Rank, r.Unit, len(r.Streams), next)
			}
			next++
		}
	}
	assertNoOverload(t, f, got)
}

func TestPlanSpares(t *testing.T) {
	tests := []struct {
		name   string
		spares int
		want   []string // spare endpoints, rank order
	}{
		{name: "four whole servers on the four first full leaves", spares: 8, want: []string{
			"eb009-numa0", "eb009-numa1", "eb019-numa0", "eb019-numa1", "eb029-numa0", "eb029-numa1", "eb039-numa0", "eb039-numa1"}},
		{name: "odd count splits only the last server", spares: 3, want: []string{
			"eb009-numa0", "eb009-numa1", "eb019-numa1"}},
		{name: "none", spares: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Plan(lhcb(), Request{Units: 318, Spares: tc.spares})
			if err != nil {
				t.Fatal(err)
			}
			var spares []string
			for _, r := range got.Ranks {
				if r.Role == Spare {
					spares = append(spares, r.Endpoint)
				}
			}
			if !slices.Equal(spares, tc.want) {
				t.Errorf("spares = %v, want %v", spares, tc.want)
			}
		})
	}
}

func TestPlanFewestLeaves(t *testing.T) {
	tests := []struct {
		name   string
		fabric Fabric
		units  int
		leaves []int
		idle   int
	}{
		{name: "one full leaf", fabric: lhcb(), units: 20, leaves: []int{0}},
		{name: "two leaves, ten idle", fabric: lhcb(), units: 30, leaves: []int{0, 1}, idle: 10},
		{name: "fullest leaves first", fabric: unschedulable(lhcb(), "eb000-numa0"), units: 39, leaves: []int{1, 2}, idle: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Plan(tc.fabric, Request{Units: tc.units})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.LeavesInUse, tc.leaves) || len(got.Idle) != tc.idle {
				t.Errorf("leaves %v with %d idle, want %v with %d", got.LeavesInUse, len(got.Idle), tc.leaves, tc.idle)
			}
			if got.Count(Live) != tc.units {
				t.Errorf("%d live, want %d", got.Count(Live), tc.units)
			}
			assertNoOverload(t, tc.fabric, got)
		})
	}
}

// halfCabled is leaves x portsPerLeaf ports of which only ports 0..cabled-1
// of every leaf have an endpoint, one server each.
func halfCabled(leaves, portsPerLeaf, cabled, spines, links int) Fabric {
	f := Fabric{Leaves: leaves, Spines: spines, PortsPerLeaf: portsPerLeaf, LinksPerPair: links}
	for l := range leaves {
		for p := range cabled {
			name := fmt.Sprintf("l%dp%d", l, p)
			f.Endpoints = append(f.Endpoints, Endpoint{Name: name, Node: name, Leaf: l, Port: p, Schedulable: true})
		}
	}
	return f
}

// Ranks cover only the port columns some live or spare endpoint sits on,
// the same columns on every leaf, when that plays without an overload.
func TestPlanRanksOnlyThePortColumnsInUse(t *testing.T) {
	tests := []struct {
		name   string
		fabric Fabric
		req    Request
		n      int
		ports  []int // the port of ranks 0.. on the first leaf in use
	}{
		// The case: ports 0-9 of 20 on 4 leaves: 40 ranks, not 80.
		{name: "half of every leaf cabled", fabric: halfCabled(4, 20, 10, 10, 2), req: Request{Units: 40}, n: 40,
			ports: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{name: "spares keep their column", fabric: halfCabled(4, 20, 10, 10, 2), req: Request{Units: 36, Spares: 4}, n: 40},
		{name: "every port cabled", fabric: fig8(), req: Request{Units: 8}, n: 8, ports: []int{0, 1}},
		{name: "a column cabled on one leaf only is kept on all", fabric: func() Fabric {
			f := halfCabled(2, 8, 2, 4, 2)
			f.Endpoints = append(f.Endpoints, Endpoint{Name: "l1p5", Node: "l1p5", Leaf: 1, Port: 5, Schedulable: true})
			return f
		}(), req: Request{Units: 5}, n: 6, ports: []int{0, 1, 5}},
		// Global-port routing with 7 ports over 4 spines: the 5 columns in
		// use would overload a link where all 7 do not, so all 7 stay.
		{name: "fewer columns would overload: all kept", fabric: func() Fabric {
			f := Fabric{Leaves: 3, Spines: 4, PortsPerLeaf: 7, LinksPerPair: 1}
			for _, lp := range [][2]int{{0, 0}, {0, 3}, {0, 4}, {1, 4}, {1, 6}, {2, 5}, {2, 6}} {
				name := fmt.Sprintf("l%dp%d", lp[0], lp[1])
				f.Endpoints = append(f.Endpoints, Endpoint{Name: name, Node: name, Leaf: lp[0], Port: lp[1], Schedulable: true})
			}
			return f
		}(), req: Request{Units: 7}, n: 21, ports: []int{0, 1, 2, 3, 4, 5, 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mustPlan(t, tc.fabric, tc.req)
			if got.N() != tc.n || got.Count(Live) != tc.req.Units || got.Count(Spare) != tc.req.Spares {
				t.Fatalf("N = %d with %d live and %d spares, want N = %d with %d and %d",
					got.N(), got.Count(Live), got.Count(Spare), tc.n, tc.req.Units, tc.req.Spares)
			}
			columns := got.N() / len(got.LeavesInUse)
			for i, r := range got.Ranks { // one permutation: the same port at the same column on every leaf
				if first := got.Ranks[i%columns]; r.Port != first.Port || r.Leaf != got.LeavesInUse[i/columns] {
					t.Errorf("rank %d is leaf %d port %d, want leaf %d port %d", i, r.Leaf, r.Port, got.LeavesInUse[i/columns], first.Port)
				}
			}
			for j, p := range tc.ports {
				if got.Ranks[j].Port != p {
					t.Errorf("rank %d on port %d, want %d", j, got.Ranks[j].Port, p)
				}
			}
			assertNoOverload(t, tc.fabric, got)
		})
	}
}

// A fabric whose schedule would overload a link is refused with the link,
// the phase, and the cause that holds with its fixes: too few spine links
// for a leaf's ports, or a port count the global-port routing spreads
// unevenly over the spines (the 40 ports over 7 spines of 6 links
// have room for 42 flows; 40 does not divide by 7).
func TestPlanRefusesAnOverloadingFabric(t *testing.T) {
	const uneven, short = "is not a multiple of spines", "is below portsPerLeaf"
	tests := []struct {
		name    string
		fabric  Fabric
		units   int
		says    []string
		notSays string
		fixed   func(*Fabric) // the fix the message names, which plans
	}{
		{name: "7 ports over 4 spines of 2 links", fabric: halfCabled(3, 7, 7, 4, 2), units: 21,
			says:    []string{"carries 3 flows over 2 links", "phase ", "leaf ", "spine ", "portsPerLeaf (7) " + uneven + " (4)", "routing LeafPortModSpines"},
			notSays: short, fixed: func(f *Fabric) { f.Routing = RoutingLeafPortModSpines }},
		{name: "40 ports over 7 spines of 6 links", fabric: halfCabled(3, 40, 40, 7, 6), units: 120,
			says:    []string{"portsPerLeaf (40) " + uneven + " (7)", "routing LeafPortModSpines"},
			notSays: short, fixed: func(f *Fabric) { f.Routing = RoutingLeafPortModSpines }},
		{name: "4 ports over 2 spines of 1 link", fabric: halfCabled(2, 4, 4, 2, 1), units: 8,
			says:    []string{"spines x linksPerPair (2 x 1 = 2) " + short + " (4): add spines or links per pair"},
			notSays: uneven, fixed: func(f *Fabric) { f.LinksPerPair = 2 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Plan(tc.fabric, Request{Units: tc.units})
			if !errors.Is(err, ErrLinkOverload) {
				t.Fatalf("Plan() = %d ranks, %v; want ErrLinkOverload", got.N(), err)
			}
			for _, says := range tc.says {
				if !strings.Contains(err.Error(), says) {
					t.Errorf("Plan() = %q, want it to say %q", err, says)
				}
			}
			if strings.Contains(err.Error(), tc.notSays) {
				t.Errorf("Plan() = %q, names a cause that does not hold (%q)", err, tc.notSays)
			}
			tc.fixed(&tc.fabric)
			assertNoOverload(t, tc.fabric, mustPlan(t, tc.fabric, Request{Units: tc.units}))
		})
	}
}

// Plan refuses spares that no unit could fail over to without overloading
// a link, naming spec field spares and the fix: 3 leaves of 4 ports over 3
// spines of one link, 9 endpoints, 7 units and one spare (l0p3, rank 3),
// onto which every failover was refused. With a second link per pair, the
// fix it names, the spare fits.
func TestPlanRefusesSparesThatCouldTakeNoUnit(t *testing.T) {
	f := Fabric{Leaves: 3, Spines: 3, PortsPerLeaf: 4, LinksPerPair: 1}
	for _, name := range []string{"l0p0", "l0p1", "l0p2", "l0p3", "l1p1", "l1p2", "l2p0", "l2p1", "l2p3"} {
		var leaf, port int
		fmt.Sscanf(name, "l%dp%d", &leaf, &port)
		f.Endpoints = append(f.Endpoints, Endpoint{Name: name, Node: name, Leaf: leaf, Port: port, Schedulable: true})
	}
	_, err := Plan(f, Request{Units: 7, Spares: 1})
	fields := fieldErrors(t, err)
	if !errors.Is(err, ErrLinkOverload) || len(fields) != 1 || fields[0].Field != "spares" ||
		!strings.Contains(err.Error(), "1 of the 1 spares could take no unit: moving any live unit onto l0p3 overloads a link (phase ") ||
		!strings.Contains(fields[0].Fix, "ask for fewer spares") {
		t.Fatalf("Plan() = %v; want ErrLinkOverload with a FieldError on spares naming l0p3 and the fix", err)
	}
	f.LinksPerPair = 2
	assertNoOverload(t, f, sparesLive(mustPlan(t, f, Request{Units: 7, Spares: 1})))
}

// fibred gives the named servers' endpoints a readout stream each.
func fibred(f Fabric, nodes ...string) Fabric {
	f.Endpoints = slices.Clone(f.Endpoints)
	for i, ep := range f.Endpoints {
		if slices.Contains(nodes, ep.Node) {
			f.Endpoints[i].Streams = []string{ep.Name + "-mfp0"}
		}
	}
	return f
}

// The fabrics and runs of the controller's envtests (smallFabric: 2
// leaves of 4 ports, 2 spines, four dual-NUMA servers) and of e2e
// (workerFabric: one leaf of 4 ports, one spine, two servers) plan as
// those tests expect, spares included: Plan refuses only spares that could
// never take a unit, and these can. Each live rank failing alone (its
// node Ready) then moves to a spare, but for those listed in stuck: with
// no spare, or only its sibling, or none that adds no link overload.
func TestPlanAcceptsTheOperatorTestsFabrics(t *testing.T) {
	small, workers := servers(4, 2, 2, 2), servers(4, 1, 2)
	tests := []struct {
		name      string
		fabric    Fabric
		req       Request
		functions string
		stuck     []int
	}{
		{"smallFabric 5 units 2 spares", small, Request{Units: 5, Spares: 2}, "RU+BU RU+BU S S RU+BU RU+BU RU+BU -", []int{5}},
		{"smallFabric 5 units 3 spares", small, Request{Units: 5, Spares: 3}, "RU+BU RU+BU S S RU+BU RU+BU RU+BU S", nil},
		{"smallFabric 5 units 1 spare", small, Request{Units: 5, Spares: 1}, "RU+BU RU+BU RU+BU S RU+BU RU+BU - -", []int{2}},
		{"smallFabric 3 units 1 spare", small, Request{Units: 3, Spares: 1}, "RU+BU RU+BU RU+BU S", []int{2}},
		{"smallFabric 2 units 2 spares", small, Request{Units: 2, Spares: 2}, "RU+BU RU+BU S S", nil},
		{"smallFabric 4 units", small, Request{Units: 4}, "RU+BU RU+BU RU+BU RU+BU", []int{0, 1, 2, 3}},
		{"smallFabric 2 units", small, Request{Units: 2}, "RU+BU RU+BU", []int{0, 1}},
		{"smallFabric unfolded 3 units 2 spares, all fibred", fibred(small, "s0", "s1", "s2", "s3"), Request{Units: 3, Spares: 2, Layout: Unfolded},
			"RU RU S S RU BU BU BU", []int{4}},
		{"smallFabric 5 units 2 spares, s0 and s1 fibred", fibred(small, "s0", "s1"), Request{Units: 5, Spares: 2},
			"RU+BU RU+BU RU+BU RU+BU BU - S S", nil},
		{"smallFabric 5 units 2 spares, s3 fibred", fibred(small, "s3"), Request{Units: 5, Spares: 2},
			"BU - S S BU BU RU+BU RU+BU", nil},
		{"workerFabric 2 units 2 spares", workers, Request{Units: 2, Spares: 2}, "RU+BU RU+BU S S", nil},
		{"readoutFabric 2 units 2 spares, both fibred", fibred(workers, "s0", "s1"), Request{Units: 2, Spares: 2}, "RU+BU RU+BU S S", nil},
		{"readoutFabric 2 units 2 spares, s0 fibred", fibred(workers, "s0"), Request{Units: 2, Spares: 2}, "RU+BU RU+BU S S", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table := mustPlan(t, tc.fabric, tc.req)
			var got []string
			for _, r := range table.Ranks {
				switch r.Role {
				case Live:
					got = append(got, string(r.Function))
				case Spare:
					got = append(got, "S")
				default:
					got = append(got, "-")
				}
			}
			if s := strings.Join(got, " "); s != tc.functions {
				t.Fatalf("planned %s, want %s", s, tc.functions)
			}
			for _, r := range table.Ranks {
				if r.Role != Live {
					continue
				}
				_, _, err := Failover(tc.fabric, table, r.Rank)
				noSpare := errors.Is(err, ErrNoSpare) || errors.Is(err, ErrSpareWouldConflict)
				if stuck := slices.Contains(tc.stuck, r.Rank); (err != nil && !noSpare) || noSpare != stuck {
					t.Errorf("rank %d fails over: %v; want it stuck: %v", r.Rank, err, stuck)
				}
			}
		})
	}
}
