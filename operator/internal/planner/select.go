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
// live+spares. Readout is physical: an endpoint's streams are fibres into
// its cards, read only while it runs live, so the choice first keeps as
// many streams read as the run has units for, then saves dummies:
//
//  1. Leaves: the fewest leaves that hold live+spares endpoints, of which
//     min(live, endpoints with streams) read streams: first the leaves
//     with the most endpoints that read streams, until there are enough of
//     those, then the leaves with the most endpoints that read none, then
//     the fullest (lower index on a tie). Every leaf in use adds a rank per
//     port column in use, and every unused port among them is a dummy, so
//     fewer leaves means fewer dummies.
//  2. Spares, then endpoints left idle, are taken by spread (whole
//     servers, round-robin across the leaves in use), from the endpoints
//     that read no streams first.
//  3. The rest are live.
func selectEndpoints(ready []Endpoint, live, spares int) selection {
	leaves := fewestLeaves(ready, live, spares)
	var onLeaves []Endpoint
	for _, ep := range ready {
		if _, in := slices.BinarySearch(leaves, ep.Leaf); in {
			onLeaves = append(onLeaves, ep)
		}
	}
	spare, rest := spreadReadingLast(onLeaves, spares)
	idle, used := spreadReadingLast(rest, len(rest)-live)
	return selection{leaves: leaves, live: used, spares: spare, idle: idle}
}

// fewestLeaves returns, ascending, the fewest leaves (by the rule of
// selectEndpoints) whose ready endpoints number at least live+spares, with
// at least min(live, all that read streams) reading streams.
func fewestLeaves(ready []Endpoint, live, spares int) []int {
	count, reading := map[int]int{}, map[int]int{}
	var leaves []int
	totalReading := 0
	for _, ep := range ready {
		if count[ep.Leaf] == 0 {
			leaves = append(leaves, ep.Leaf)
		}
		count[ep.Leaf]++
		if len(ep.Streams) > 0 {
			reading[ep.Leaf]++
			totalReading++
		}
	}
	needReading := min(live, totalReading)
	slices.SortFunc(leaves, func(a, b int) int {
		return cmp.Or(cmp.Compare(reading[b], reading[a]), cmp.Compare(count[b], count[a]), cmp.Compare(a, b))
	})
	var chosen []int
	got, gotReading := 0, 0
	for len(leaves) > 0 && (got < live+spares || gotReading < needReading) {
		if gotReading >= needReading {
			// Enough streams read: the leaves with the most endpoints
			// that read none (spares, BUs) come next.
			slices.SortStableFunc(leaves, func(a, b int) int {
				return cmp.Or(cmp.Compare(count[b]-reading[b], count[a]-reading[a]), cmp.Compare(count[b], count[a]), cmp.Compare(a, b))
			})
		}
		l := leaves[0]
		leaves = leaves[1:]
		chosen = append(chosen, l)
		got, gotReading = got+count[l], gotReading+reading[l]
	}
	slices.Sort(chosen)
	return chosen
}

// spreadReadingLast takes n of eps by spread, from the endpoints that read
// no streams first; both results keep (leaf, port) order.
func spreadReadingLast(eps []Endpoint, n int) (taken, left []Endpoint) {
	reading, none := byReadout(eps)
	takenNone, leftNone := spread(none, min(n, len(none)))
	takenReading, leftReading := spread(reading, n-len(takenNone))
	taken, left = slices.Concat(takenNone, takenReading), slices.Concat(leftNone, leftReading)
	slices.SortFunc(taken, byLeafPort)
	slices.SortFunc(left, byLeafPort)
	return taken, left
}

// byReadout splits eps, keeping their order, into the endpoints that read
// streams and those that read none.
func byReadout(eps []Endpoint) (reading, none []Endpoint) {
	for _, ep := range eps {
		if len(ep.Streams) == 0 {
			none = append(none, ep)
		} else {
			reading = append(reading, ep)
		}
	}
	return reading, none
}

// byLeafPort orders endpoints by where they are cabled: rank order.
func byLeafPort(a, b Endpoint) int {
	return cmp.Or(cmp.Compare(a.Leaf, b.Leaf), cmp.Compare(a.Port, b.Port))
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
