package planner

import (
	"cmp"
	"slices"
)

// selection is which schedulable endpoints a plan uses, and how. Every
// list keeps (leaf, port) order.
type selection struct {
	leaves []int // leaves in use, ascending
	live   []Endpoint
	spares []Endpoint
	idle   []Endpoint // schedulable, on a leaf in use, but not needed
}

// selectEndpoints picks the endpoints of a plan from ready, the schedulable
// endpoints in (leaf, port) order, of which there are at least
// live+spares:
//
//  1. Leaves: the fewest leaves that hold live+spares endpoints, taking the
//     leaves with the most schedulable endpoints first (lower index on a
//     tie). Every leaf in use adds a rank per port column in use, and
//     every unused port among them is a dummy, so fewer leaves means fewer
//     dummies.
//  2. Spares, then endpoints left idle, are taken by spread: whole servers,
//     round-robin across the leaves in use.
//  3. The rest are live.
func selectEndpoints(ready []Endpoint, live, spares int) selection {
	leaves := fewestLeaves(ready, live+spares)
	var onLeaves []Endpoint
	for _, ep := range ready {
		if _, in := slices.BinarySearch(leaves, ep.Leaf); in {
			onLeaves = append(onLeaves, ep)
		}
	}
	spare, rest := spread(onLeaves, spares)
	idle, used := spread(rest, len(rest)-live)
	return selection{leaves: leaves, live: used, spares: spare, idle: idle}
}

// fewestLeaves returns, ascending, the fewest leaves whose ready endpoints
// number at least need.
func fewestLeaves(ready []Endpoint, need int) []int {
	count := map[int]int{}
	var leaves []int
	for _, ep := range ready {
		if count[ep.Leaf] == 0 {
			leaves = append(leaves, ep.Leaf)
		}
		count[ep.Leaf]++
	}
	slices.SortFunc(leaves, func(a, b int) int {
		return cmp.Or(cmp.Compare(count[b], count[a]), cmp.Compare(a, b))
	})
	got := 0
	for i, l := range leaves {
		if got += count[l]; got >= need {
			leaves = leaves[:i+1]
			break
		}
	}
	slices.Sort(leaves)
	return leaves
}

// spread takes n of the endpoints eps (in (leaf, port) order) a whole
// server at a time, so the two NUMA halves of a server stay together; only
// the last server taken is split when n is odd. Each server goes to the leaf
// that has given the fewest servers so far, then the one with the most
// endpoints left, then the lowest leaf; within a leaf the server on the
// highest ports goes first. Spares thus land on as many leaves as possible,
// so a failed unit usually has a spare on its own leaf, and they come from
// the fullest leaves, which evens out the live units per leaf.
func spread(eps []Endpoint, n int) (taken, left []Endpoint) {
	// A server's endpoints are indices into eps; its leaf is the leaf of
	// its first port.
	byNode := map[string][]int{}
	var nodes []string
	for i, ep := range eps {
		if byNode[ep.Node] == nil {
			nodes = append(nodes, ep.Node)
		}
		byNode[ep.Node] = append(byNode[ep.Node], i)
	}
	servers := map[int][][]int{} // per leaf, ascending first port
	remaining := map[int]int{}
	var leaves []int
	for _, node := range nodes {
		s := byNode[node]
		l := eps[s[0]].Leaf
		if servers[l] == nil {
			leaves = append(leaves, l)
		}
		servers[l] = append(servers[l], s)
		remaining[l] += len(s)
	}
	given := map[int]int{}
	take := make([]bool, len(eps))
	for n > 0 {
		best := -1
		for _, l := range leaves {
			if len(servers[l]) == 0 {
				continue
			}
			if best < 0 || cmp.Or(cmp.Compare(given[l], given[best]), cmp.Compare(remaining[best], remaining[l]), cmp.Compare(l, best)) < 0 {
				best = l
			}
		}
		last := len(servers[best]) - 1
		s := servers[best][last]
		servers[best] = servers[best][:last]
		k := min(len(s), n)
		for _, i := range s[len(s)-k:] {
			take[i] = true
		}
		given[best]++
		remaining[best] -= len(s)
		n -= k
	}
	for i, ep := range eps {
		if take[i] {
			taken = append(taken, ep)
		} else {
			left = append(left, ep)
		}
	}
	return taken, left
}
