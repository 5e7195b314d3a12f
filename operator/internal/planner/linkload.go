package planner

import (
	"errors"
	"fmt"
)

// Direction is the way a flow crosses a leaf-spine link.
type Direction string

const (
	Up   Direction = "up"   // leaf to spine
	Down Direction = "down" // spine to leaf
)

// Link is the bundle of LinksPerPair links between one leaf and one spine,
// in one direction.
type Link struct {
	Direction Direction
	Leaf      int
	Spine     int
}

func (l Link) String() string {
	if l.Direction == Up {
		return fmt.Sprintf("leaf %d -> spine %d", l.Leaf, l.Spine)
	}
	return fmt.Sprintf("spine %d -> leaf %d", l.Spine, l.Leaf)
}

// Violation is a link that carries more flows in one phase than it has
// links.
type Violation struct {
	Phase    int
	Link     Link
	Flows    int
	Capacity int
}

func (v Violation) String() string {
	return fmt.Sprintf("phase %d: %s carries %d flows over %d links", v.Phase, v.Link, v.Flows, v.Capacity)
}

// CheckLinkLoad plays the linear-shifting schedule of the table over all N
// phases (in phase n rank i sends to rank (n+i) mod N) and returns every
// (phase, link) whose flows exceed LinksPerPair, in phase order. Flows go
// from a live rank that sends (RU+BU or RU) to a live rank that receives
// (RU+BU or BU); dummies and spares move nothing, and a flow within one leaf
// crosses no spine. The spine is the routing rule applied to the
// destination's (Leaf, Port) as recorded in the table, so a table that does
// not follow the rank formula is checked as it stands. O(N^2).
func CheckLinkLoad(fabric Fabric, t RankTable) ([]Violation, error) {
	if errs := fabric.validateShape(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid fabric: %w", errors.Join(errs...))
	}
	n := t.N()
	leaf := make([]int, n)
	spine := make([]int, n)
	receives := make([]bool, n)
	var senders []int
	for i, r := range t.Ranks {
		if r.Rank != i || r.Leaf < 0 || r.Leaf >= fabric.Leaves || r.Port < 0 || r.Port >= fabric.PortsPerLeaf {
			return nil, fmt.Errorf("rank table entry %d (rank %d, leaf %d, port %d) does not fit the fabric (%d leaves, %d ports per leaf)",
				i, r.Rank, r.Leaf, r.Port, fabric.Leaves, fabric.PortsPerLeaf)
		}
		leaf[i], spine[i] = r.Leaf, fabric.spine(r.Leaf, r.Port)
		if r.Role != Live {
			continue
		}
		if r.Function != BU {
			senders = append(senders, i)
		}
		receives[i] = r.Function != RU
	}

	// up[l*Spines+s] and down[s*Leaves+l] count one phase's flows.
	up := make([]int, fabric.Leaves*fabric.Spines)
	down := make([]int, fabric.Spines*fabric.Leaves)
	var out []Violation
	for phase := range n {
		for _, src := range senders {
			dst := src + phase
			if dst >= n {
				dst -= n
			}
			if !receives[dst] || leaf[src] == leaf[dst] {
				continue
			}
			up[leaf[src]*fabric.Spines+spine[dst]]++
			down[spine[dst]*fabric.Leaves+leaf[dst]]++
		}
		out = collect(out, phase, up, fabric, Up)
		out = collect(out, phase, down, fabric, Down)
	}
	return out, nil
}

// collect appends the over-capacity links of one phase's counts and zeroes
// the counts for the next phase.
func collect(out []Violation, phase int, counts []int, fabric Fabric, dir Direction) []Violation {
	for i, flows := range counts {
		if flows > fabric.LinksPerPair {
			l := Link{Direction: dir, Leaf: i / fabric.Spines, Spine: i % fabric.Spines}
			if dir == Down {
				l.Leaf, l.Spine = i%fabric.Leaves, i/fabric.Leaves
			}
			out = append(out, Violation{Phase: phase, Link: l, Flows: flows, Capacity: fabric.LinksPerPair})
		}
		counts[i] = 0
	}
	return out
}
