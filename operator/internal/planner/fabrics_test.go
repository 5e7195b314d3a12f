package planner

import (
	"fmt"
	"strings"
)

// fig8 is the fat tree of Fig. 8 of the paper: 4 leaves of 2 server ports,
// 2 spines, one link per leaf-spine pair, terminals t0..t7 (one NUMA
// domain per server) cabled in order.
func fig8() Fabric {
	f := Fabric{Leaves: 4, Spines: 2, PortsPerLeaf: 2, LinksPerPair: 1}
	for i := range 8 {
		name := fmt.Sprintf("t%d", i)
		f.Endpoints = append(f.Endpoints, Endpoint{
			Name: name, Node: name, RDMADevice: "mlx5_0", Netdev: "ib0",
			Leaf: i / 2, Port: i % 2, Streams: []string{"s" + name}, Schedulable: true,
		})
	}
	return f
}

// lhcbServersPerLeaf places the 163 servers of the LHCb event builder on
// its 18 leaves of 10 server slots: 11 full leaves, four with 8 servers and
// three with 7 (the last of those with a gap in the middle).
var lhcbServersPerLeaf = []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 8, 8, 8, 8, 7, 7, 7}

// lhcb is the LHCb Run 3 fabric: 18 leaves, 10 spines, 20 server ports per
// leaf, 2 links per leaf-spine pair, and 163 dual-socket servers whose two
// NUMA domains sit on adjacent ports of one leaf: 326 endpoints on 360
// ports. Each endpoint reads three readout streams.
func lhcb() Fabric {
	f := Fabric{Leaves: 18, Spines: 10, PortsPerLeaf: 20, LinksPerPair: 2}
	server := 0
	for leaf, n := range lhcbServersPerLeaf {
		for slot := range n {
			if leaf == 17 && slot >= 3 {
				slot++ // leave ports 6 and 7 empty
			}
			for numa := range 2 {
				name := fmt.Sprintf("eb%03d-numa%d", server, numa)
				ep := Endpoint{
					Name: name, Node: fmt.Sprintf("eb%03d", server), NUMA: numa,
					RDMADevice: fmt.Sprintf("mlx5_%d", numa), Netdev: fmt.Sprintf("ib%d", numa),
					Leaf: leaf, Port: 2*slot + numa, Schedulable: true,
				}
				for s := range 3 {
					ep.Streams = append(ep.Streams, fmt.Sprintf("%s-mfp%d", name, s))
				}
				f.Endpoints = append(f.Endpoints, ep)
			}
			server++
		}
	}
	return f
}

// unschedulable marks the named endpoints not schedulable.
func unschedulable(f Fabric, names ...string) Fabric {
	f.Endpoints = append([]Endpoint(nil), f.Endpoints...)
	for i, ep := range f.Endpoints {
		for _, n := range names {
			if ep.Name == n {
				f.Endpoints[i].Schedulable = false
			}
		}
	}
	return f
}

// roles spells a table's roles one letter a rank: L live, S spare, D dummy.
func roles(t RankTable) string {
	var b strings.Builder
	for _, r := range t.Ranks {
		b.WriteByte(r.Role[0])
	}
	return b.String()
}

// tableFromRoles builds a folded table spanning the given leaves by hand,
// one role letter a rank (as roles spells them), and a fabric with a
// schedulable endpoint "e<rank>" on every live or spare port.
func tableFromRoles(f Fabric, leaves []int, spelled string) (Fabric, RankTable) {
	t := RankTable{Epoch: 1, Layout: Folded, LeavesInUse: leaves}
	unit := UnitID(0)
	for r, c := range spelled {
		rank := Rank{Rank: r, Leaf: leaves[r/f.PortsPerLeaf], Port: r % f.PortsPerLeaf, Role: Dummy, Unit: NoUnit}
		if c != 'D' {
			rank.Endpoint = fmt.Sprintf("e%d", r)
			f.Endpoints = append(f.Endpoints, Endpoint{Name: rank.Endpoint, Node: rank.Endpoint, Leaf: rank.Leaf, Port: rank.Port, Schedulable: true})
			rank.Role = Spare
		}
		if c == 'L' {
			rank.Role, rank.Unit, rank.Function = Live, unit, RUBU
			unit++
		}
		t.Ranks = append(t.Ranks, rank)
	}
	return f, t
}
