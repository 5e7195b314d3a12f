// Package console is the shift crew's read-only web console: a page per
// run with the fabric drawn as SVG (leaves, ports, the endpoints on them
// coloured by what runs there), the rank table, conditions and failovers,
// refreshed every few seconds. Server-rendered HTML and SVG, no script.
// Layout and rendering are pure functions; Handler reads the objects.
package console

import (
	"fmt"
	"html"
	"sort"
	"strings"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// The map's geometry, in SVG user units: a column per leaf, a slot per
// port down it.
const (
	minLeafWidth = 150
	charWidth    = 7 // of the 11 px monospace labels
	leafGap      = 20
	slotHeight   = 22
	headerSpace  = 30
	margin       = 10
)

// Placed is an endpoint at its leaf and port, where the map draws it.
type Placed struct {
	Endpoint ebv1.FabricEndpoint
	X, Y     int
}

// Map is a Fabric laid out: its size, its leaves' width (wide enough for
// the longest endpoint label) and every endpoint's place.
type Map struct {
	Width, Height int
	LeafWidth     int
	Leaves        int32
	Ports         int32
	Endpoints     []Placed
}

// Layout places each endpoint of the fabric in its leaf's column at its
// port's slot: once each, two endpoints never on one slot (the Fabric's
// validation refuses a port twice).
func Layout(fabric *ebv1.Fabric) Map {
	s := fabric.Spec
	longest := 0
	for _, e := range s.Endpoints {
		longest = max(longest, len(label(e, maxLabelRank)))
	}
	m := Map{Leaves: s.Leaves, Ports: s.PortsPerLeaf, LeafWidth: max(minLeafWidth, charWidth*longest+16),
		Height: 2*margin + headerSpace + int(s.PortsPerLeaf)*slotHeight}
	m.Width = 2*margin + int(s.Leaves)*(m.LeafWidth+leafGap) - leafGap
	for _, e := range s.Endpoints {
		m.Endpoints = append(m.Endpoints, Placed{Endpoint: e, X: m.leafX(e.Leaf) + 4, Y: portY(e.Port)})
	}
	sort.Slice(m.Endpoints, func(i, j int) bool {
		a, b := m.Endpoints[i].Endpoint, m.Endpoints[j].Endpoint
		return a.Leaf < b.Leaf || (a.Leaf == b.Leaf && a.Port < b.Port)
	})
	return m
}

func (m Map) leafX(leaf int32) int { return margin + int(leaf)*(m.LeafWidth+leafGap) }

// maxLabelRank is the widest rank a label is sized for.
const maxLabelRank = 9999

// label is what an endpoint's box says: its port, server and NUMA node,
// and the rank on it (rank < 0: none).
func label(e ebv1.FabricEndpoint, rank int32) string {
	text := fmt.Sprintf("%d %s/%d", e.Port, e.Node, e.NUMA)
	if rank >= 0 {
		text += fmt.Sprintf(" r%d", rank)
	}
	return text
}
func portY(port int32) int { return margin + headerSpace + int(port)*slotHeight }

// Occupant is what runs on an endpoint, for its colour and its tooltip.
type Occupant struct {
	Run   string // namespace/name
	Rank  int32
	Role  ebv1.RankRole
	State string // the builder's, as last polled
}

// class is an endpoint's colour class in the page's style sheet: failed
// is an endpoint a unit failed on in the last failover, now free.
func class(o *Occupant, unschedulable, failed bool) string {
	switch {
	case unschedulable:
		return "down"
	case o == nil && failed:
		return "failed"
	case o == nil:
		return "free"
	case o.Role == ebv1.RoleSpare:
		return "spare"
	case o.Role == ebv1.RoleDummy:
		return "dummy"
	case o.State == "RUNNING":
		return "live"
	default:
		return "trouble"
	}
}

// SVG draws the map: a column per leaf with its number, a slot per port,
// and each endpoint as a box named by its server and NUMA node, coloured by
// its occupant (on, keyed by endpoint name), whether the scheduler can use
// it (unschedulable: why not) and whether a unit failed there in the last
// failover (failed: what), and titled with the details.
func SVG(m Map, on map[string]Occupant, unschedulable, failed map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="fabric" width="%d" height="%d" viewBox="0 0 %d %d">`,
		m.Width, m.Height, m.Width, m.Height)
	for leaf := int32(0); leaf < m.Leaves; leaf++ {
		x := m.leafX(leaf)
		fmt.Fprintf(&b, `<g class="leaf" id="leaf-%d"><rect x="%d" y="%d" width="%d" height="%d"/>`+
			`<text x="%d" y="%d">leaf %d</text></g>`, leaf, x, margin, m.LeafWidth, m.Height-2*margin,
			x+6, margin+18, leaf)
	}
	for _, p := range m.Endpoints {
		e := p.Endpoint
		var occupant *Occupant
		if o, ok := on[e.Name]; ok {
			occupant = &o
		}
		down, isDown := unschedulable[e.Name]
		title := fmt.Sprintf("%s: node %s, NUMA %d, leaf %d port %d", e.Name, e.Node, e.NUMA, e.Leaf, e.Port)
		if len(e.Streams) > 0 {
			title += ", fibres " + strings.Join(e.Streams, ",")
		}
		rank := int32(-1)
		if occupant != nil {
			title += fmt.Sprintf("; %s rank %d (%s) %s", occupant.Run, occupant.Rank, occupant.Role, occupant.State)
			rank = occupant.Rank
		}
		if isDown {
			title += "; unschedulable: " + down
		}
		what, hasFailed := failed[e.Name]
		if hasFailed {
			title += "; last failover: " + what
		}
		fmt.Fprintf(&b, `<g class="endpoint %s" id="endpoint-%s" data-leaf="%d" data-port="%d"><title>%s</title>`+
			`<rect x="%d" y="%d" width="%d" height="%d"/><text x="%d" y="%d">%s</text></g>`,
			class(occupant, isDown, hasFailed), html.EscapeString(e.Name), e.Leaf, e.Port, html.EscapeString(title),
			p.X, p.Y, m.LeafWidth-8, slotHeight-4, p.X+4, p.Y+13, html.EscapeString(label(e, rank)))
	}
	b.WriteString(`</svg>`)
	return b.String()
}
