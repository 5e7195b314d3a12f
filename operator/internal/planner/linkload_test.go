package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// reversedOn returns a copy of t whose entries on the given leaves have their
// ports reversed: ranks no longer follow the same port order everywhere
// unless every leaf is given.
func reversedOn(t RankTable, f Fabric, leaves ...int) RankTable {
	t.Ranks = slices.Clone(t.Ranks)
	for i := range t.Ranks {
		if slices.Contains(leaves, t.Ranks[i].Leaf) {
			t.Ranks[i].Port = f.PortsPerLeaf - 1 - t.Ranks[i].Port
		}
	}
	return t
}

// shuffled returns a copy of t whose entries' ports are dealt out at
// random, seeded.
func shuffled(t RankTable, seed uint64) RankTable {
	t.Ranks = slices.Clone(t.Ranks)
	rand.New(rand.NewPCG(seed, seed)).Shuffle(len(t.Ranks), func(i, j int) {
		a, b := &t.Ranks[i], &t.Ranks[j]
		a.Leaf, a.Port, b.Leaf, b.Port = b.Leaf, b.Port, a.Leaf, a.Port
	})
	return t
}

func mustPlan(t testing.TB, f Fabric, req Request) RankTable {
	t.Helper()
	table, err := Plan(f, req)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func TestCheckLinkLoad(t *testing.T) {
	fig8Full := mustPlan(t, fig8(), Request{Units: 8})
	lhcbFull := mustPlan(t, lhcb(), Request{Units: 318, Spares: 8})
	lhcbAll := func() Fabric { // every one of the 360 ports cabled and live
		f := Fabric{Leaves: 18, Spines: 10, PortsPerLeaf: 20, LinksPerPair: 2}
		for r := range 360 {
			name := fmt.Sprintf("p%d", r)
			f.Endpoints = append(f.Endpoints, Endpoint{Name: name, Node: name, Leaf: r / 20, Port: r % 20, Schedulable: true})
		}
		return f
	}()
	// 4 ports per leaf over 2 spines and 1 link: 2 flows a link at full load.
	oversubscribed := Fabric{Leaves: 4, Spines: 2, PortsPerLeaf: 4, LinksPerPair: 1}
	_, oversubscribedFull := tableFromRoles(oversubscribed, []int{0, 1, 2, 3}, strings.Repeat("L", 16))
	// 5 ports per leaf over 3 spines, 2 links, leaf 1 empty: ranks differ
	// from global ports by 5 on leaves 2 and 3, so rank 4 (leaf 0 port 4,
	// global 4) and rank 5 (leaf 2 port 0, global 10) share spine 1.
	skipped := Fabric{Leaves: 4, Spines: 3, PortsPerLeaf: 5, LinksPerPair: 2}
	for _, leaf := range []int{0, 2, 3} {
		for p := range 5 {
			name := fmt.Sprintf("l%dp%d", leaf, p)
			skipped.Endpoints = append(skipped.Endpoints, Endpoint{Name: name, Node: name, Leaf: leaf, Port: p, Schedulable: true})
		}
	}
	_, skippedTable := tableFromRoles(skipped, []int{0, 2, 3}, strings.Repeat("L", 15)) // Plan refuses it
	skippedLeafRouted := skipped
	skippedLeafRouted.Routing = RoutingLeafPortModSpines

	tests := []struct {
		name       string
		fabric     Fabric
		table      RankTable
		overloaded bool
	}{
		{name: "fig8 full", fabric: fig8(), table: fig8Full},
		{name: "lhcb plan", fabric: lhcb(), table: lhcbFull},
		{name: "lhcb every port live", fabric: lhcbAll, table: mustPlan(t, lhcbAll, Request{Units: 360})},
		{name: "lhcb same reversed port order on every leaf", fabric: lhcb(), table: reversedOn(lhcbFull, lhcb(), lhcbFull.LeavesInUse...)},
		{name: "lhcb reversed port order on one leaf", fabric: lhcb(), table: reversedOn(lhcbFull, lhcb(), 0), overloaded: true},
		{name: "lhcb ports dealt at random", fabric: lhcb(), table: shuffled(lhcbFull, 1), overloaded: true},
		{name: "oversubscribed fabric", fabric: oversubscribed, table: oversubscribedFull, overloaded: true},
		{name: "skipped leaf, global-port routing", fabric: skipped, table: skippedTable, overloaded: true},
		{name: "skipped leaf, leaf-port routing", fabric: skippedLeafRouted, table: mustPlan(t, skippedLeafRouted, Request{Units: 15})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := CheckLinkLoad(tc.fabric, tc.table)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(v) > 0; got != tc.overloaded {
				t.Fatalf("overloaded = %v (%d violations), want %v", got, len(v), tc.overloaded)
			}
			for _, x := range v {
				if x.Flows <= x.Capacity || x.Capacity != tc.fabric.LinksPerPair {
					t.Fatalf("bogus violation %v", x)
				}
			}
		})
	}
}

// TestCheckLinkLoadExact checks small cases worked out by hand.
func TestCheckLinkLoadExact(t *testing.T) {
	// Fig. 8 with the two ports of leaf 0 swapped: rank 0 sits on spine 1
	// and rank 1 on spine 0. A leaf whose two destinations straddle ranks
	// 1,2 or 7,0 then sends both up one spine, unless one destination is
	// on its own leaf.
	swapped := fig8()
	swappedTable := reversedOn(mustPlan(t, swapped, Request{Units: 8}), swapped, 0)
	// 3 leaves of 4 ports, 2 spines, 1 link; live ranks 0 and 2 (leaf 0,
	// spine 0), 7 (leaf 1, spine 1) and 9 (leaf 2, spine 1). Phase 5: 7->0
	// and 9->2 both come down spine 0 to leaf 0. Phase 7: 0->7 and 2->9
	// both go up from leaf 0 to spine 1. Every other phase has one flow.
	fourPorts, fourPortsTable := tableFromRoles(Fabric{Leaves: 3, Spines: 2, PortsPerLeaf: 4, LinksPerPair: 1}, []int{0, 1, 2}, "LDLD"+"DDDL"+"DLDD")

	tests := []struct {
		name   string
		fabric Fabric
		table  RankTable
		want   []string
	}{
		{name: "fig8, leaf 0 swapped", fabric: swapped, table: swappedTable, want: []string{
			"phase 3: leaf 2 -> spine 1 carries 2 flows over 1 links",
			"phase 3: leaf 3 -> spine 0 carries 2 flows over 1 links",
			"phase 5: leaf 1 -> spine 1 carries 2 flows over 1 links",
			"phase 5: leaf 2 -> spine 0 carries 2 flows over 1 links",
		}},
		{name: "uplink and downlink", fabric: fourPorts, table: fourPortsTable, want: []string{
			"phase 5: spine 0 -> leaf 0 carries 2 flows over 1 links",
			"phase 7: leaf 0 -> spine 1 carries 2 flows over 1 links",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := CheckLinkLoad(tc.fabric, tc.table)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range v {
				got = append(got, x.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestCheckLinkLoadErrors(t *testing.T) {
	table := mustPlan(t, fig8(), Request{Units: 8})
	small := fig8()
	small.Leaves = 2
	zero := fig8()
	zero.Spines = 0
	for name, f := range map[string]Fabric{"table beyond the fabric": small, "invalid fabric": zero} {
		if _, err := CheckLinkLoad(f, table); err == nil {
			t.Errorf("%s: CheckLinkLoad succeeded, want an error", name)
		}
	}
}
