package runplan

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// Placed is a rank whose pod runs on its endpoint.
type Placed struct {
	Rank     int
	Endpoint planner.Endpoint
}

// Placements are the live and spare ranks of t on their endpoints: the
// ranks that have pods on a fabric.
func Placements(t planner.RankTable, endpoints map[string]planner.Endpoint) []Placed {
	var out []Placed
	for _, r := range t.Ranks {
		ep, ok := endpoints[r.Endpoint]
		if (r.Role != planner.Live && r.Role != planner.Spare) || !ok {
			continue
		}
		out = append(out, Placed{Rank: r.Rank, Endpoint: ep})
	}
	return out
}

// Shortfall is a resource that the pods placed on a node ask for, together,
// more of than the node offers (allocatable), usually none at all: its
// device plugin is not running, or the name is wrong.
type Shortfall struct {
	Node      string
	Resource  corev1.ResourceName
	Want, Has resource.Quantity
	Ranks     []int
}

func (s Shortfall) String() string {
	has := "none"
	if !s.Has.IsZero() {
		has = s.Has.String()
	}
	return fmt.Sprintf("node %s offers %s %s, ranks %s ask for %s", s.Node, has, s.Resource,
		shortlist.Join(s.Ranks, ", ", func(r int) string { return fmt.Sprint(r) }), s.Want.String())
}

// Shortfalls finds, before any pod waits on it, each resource that the
// pods placed on a node ask for (requests, by endpoint), summed, beyond
// what the node offers, by node and resource, in order. Nodes missing from
// allocatable are left out: a node that is gone is a failure of its own.
func Shortfalls(placed []Placed, requests func(planner.Endpoint) corev1.ResourceList,
	allocatable map[string]corev1.ResourceList) []Shortfall {
	byKey := map[string]*Shortfall{}
	for _, p := range placed {
		node := p.Endpoint.Node
		offered, known := allocatable[node]
		if !known {
			continue
		}
		for name, want := range requests(p.Endpoint) {
			key := node + "\x00" + string(name)
			if byKey[key] == nil {
				byKey[key] = &Shortfall{Node: node, Resource: name, Has: offered[name]}
			}
			byKey[key].Want.Add(want)
			byKey[key].Ranks = append(byKey[key].Ranks, p.Rank)
		}
	}
	out := make([]Shortfall, 0, len(byKey))
	for _, s := range byKey {
		if s.Want.Cmp(s.Has) <= 0 {
			continue
		}
		slices.Sort(s.Ranks)
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Shortfall) int {
		return strings.Compare(a.Node+"\x00"+string(a.Resource), b.Node+"\x00"+string(b.Resource))
	})
	return out
}

// Allocatable is what each node of list offers to pods.
func Allocatable(list []corev1.Node) map[string]corev1.ResourceList {
	out := make(map[string]corev1.ResourceList, len(list))
	for i := range list {
		out[list[i].Name] = list[i].Status.Allocatable
	}
	return out
}
