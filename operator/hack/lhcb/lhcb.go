// Package lhcb shapes the fabrics the operator's benchmarks run on: the
// LHCb event-builder network (18 leaves, 10 spines, 20 server ports per
// leaf, 2 links per leaf-spine pair, 163 servers) with warm spare
// servers, or a smaller fabric of the same kind. Each server has two NUMA
// endpoints on consecutive ports; a server with readout streams (three
// per endpoint) runs units, a spare server has none and holds spares.
package lhcb

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// Shape is a fabric's cabling: how many servers each leaf has, and which
// leaves hold a spare server in their last slot.
type Shape struct {
	ServersPerLeaf []int
	SpareLeaves    []int
	Spines         int32
	PortsPerLeaf   int32
	LinksPerPair   int32
}

// Farm is the LHCb cabling (163 servers) with one spare server added on
// each of leaves 11-14: 167 servers, 334 endpoints on the 360 ports.
var Farm = Shape{
	ServersPerLeaf: []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 9, 9, 9, 9, 7, 7, 7},
	SpareLeaves:    []int{11, 12, 13, 14},
	Spines:         10, PortsPerLeaf: 20, LinksPerPair: 2,
}

// Small is a fabric of the same kind with servers servers on leaves of
// five (the last leaf takes the rest), a spare server on each of the last
// two leaves, and as many uplinks as ports (no link overloaded by the
// linear-shifting schedule): the shape of a smoke test.
func Small(servers int) Shape {
	s := Shape{Spines: 5, PortsPerLeaf: 10, LinksPerPair: 2}
	for left := servers; left > 0; left -= 5 {
		s.ServersPerLeaf = append(s.ServersPerLeaf, min(left, 5))
	}
	leaves := len(s.ServersPerLeaf)
	s.SpareLeaves = []int{max(leaves-2, 0), leaves - 1}
	return s
}

// Scaled is a fabric of the LHCb kind for any number of servers: leaves
// of ten servers (20 ports; the last leaf takes the rest), 10 spines with
// 2 links to every leaf, and a spare server in the last slot of each of
// the last spareServers leaves.
func Scaled(servers, spareServers int) Shape {
	s := Shape{Spines: 10, PortsPerLeaf: 20, LinksPerPair: 2}
	for left := servers; left > 0; left -= 10 {
		s.ServersPerLeaf = append(s.ServersPerLeaf, min(left, 10))
	}
	for leaf := len(s.ServersPerLeaf) - 1; leaf >= 0 && len(s.SpareLeaves) < spareServers; leaf-- {
		s.SpareLeaves = append(s.SpareLeaves, leaf)
	}
	return s
}

// Servers is the number of servers.
func (s Shape) Servers() int {
	n := 0
	for _, k := range s.ServersPerLeaf {
		n += k
	}
	return n
}

// SpareServers is the number of servers that hold spares.
func (s Shape) SpareServers() int {
	seen := map[int]bool{}
	for _, leaf := range s.SpareLeaves {
		seen[leaf] = true
	}
	return len(seen)
}

// Units is the number of units the fabric's readout servers run (two
// each); the spare servers' endpoints are the spares.
func (s Shape) Units() int32 { return int32(2 * (s.Servers() - s.SpareServers())) }

// Spares is the number of spare endpoints.
func (s Shape) Spares() int32 { return int32(2 * s.SpareServers()) }

// NodeName is the name of the i-th server's Node.
func NodeName(i int) string { return fmt.Sprintf("sim-eb%03d", i) }

// Fabric is the Fabric object of the shape and the names of its servers'
// Nodes, in the order of their leaves and slots.
func (s Shape) Fabric(name string) (*ebv1.Fabric, []string) {
	spare := map[int]bool{}
	for _, leaf := range s.SpareLeaves {
		spare[leaf] = true
	}
	f := &ebv1.Fabric{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: ebv1.FabricSpec{Leaves: int32(len(s.ServersPerLeaf)), Spines: s.Spines, PortsPerLeaf: s.PortsPerLeaf,
			LinksPerPair: s.LinksPerPair},
	}
	var nodes []string
	for leaf, n := range s.ServersPerLeaf {
		for slot := range n {
			node := NodeName(len(nodes))
			nodes = append(nodes, node)
			for numa := range 2 {
				endpoint := fmt.Sprintf("%s-numa%d", node, numa)
				ep := ebv1.FabricEndpoint{
					Name: endpoint, Node: node, NUMA: int32(numa), RDMADevice: fmt.Sprintf("mlx5_%d", numa),
					Netdev: fmt.Sprintf("ib%d", numa), Leaf: int32(leaf), Port: int32(2*slot + numa),
				}
				if !(spare[leaf] && slot == n-1) {
					ep.Streams = []string{endpoint + "-mfp0", endpoint + "-mfp1", endpoint + "-mfp2"}
				}
				f.Spec.Endpoints = append(f.Spec.Endpoints, ep)
			}
		}
	}
	return f, nodes
}
