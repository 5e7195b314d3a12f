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
	leafWidth   = 150
	leafGap     = 20
	slotHeight  = 22
	headerSpace = 30
	margin      = 10
)

// Placed is an endpoint at its leaf and port, where the map draws it.
type Placed struct {
	Endpoint ebv1.FabricEndpoint
	X, Y     int
}

// Map is a Fabric laid out: its size and every endpoint's place.
type Map struct {
	Width, Height int
	Leaves        int32
	Ports         int32
	Endpoints     []Placed
}

// Layout places each endpoint of the fabric in its leaf's column at its
// port's slot: once each, two endpoints never on one slot (the Fabric's
// validation refuses a port twice).
func Layout(fabric *ebv1.Fabric) Map {
	s := fabric.Spec
	m := Map{Leaves: s.Leaves, Ports: s.PortsPerLeaf,
		Width:  2*margin + int(s.Leaves)*(leafWidth+leafGap) - leafGap,
		Height: 2*margin + headerSpace + int(s.PortsPerLeaf)*slotHeight}
	for _, e := range s.Endpoints {
		m.Endpoints = append(m.Endpoints, Placed{Endpoint: e, X: leafX(e.Leaf) + 4, Y: portY(e.Port)})
	}
	sort.Slice(m.Endpoints, func(i, j int) bool {
		a, b := m.Endpoints[i].Endpoint, m.Endpoints[j].Endpoint
		return a.Leaf < b.Leaf || (a.Leaf == b.Leaf && a.Port < b.Port)
	})
	return m
}

func leafX(leaf int32) int { return margin + int(leaf)*(leafWidth+leafGap) }
func portY(port int32) int { return margin + headerSpace + int(port)*slotHeight }

// Occupant is what runs on an endpoint, for its colour and its tooltip.
type Occupant struct {
	Run   string // namespace/name
	Rank  int32
	Role  ebv1.RankRole
	State string // the builder's, as last polled
}

// class is an endpoint's colour class in the page's style sheet.
func class(o *Occupant, unschedulable bool) string {
	switch {
	case unschedulable:
		return "down"
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
// its occupant (on, keyed by endpoint name) and titled with the details.
func SVG(m Map, on map[string]Occupant, unschedulable map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="fabric" width="%d" height="%d" viewBox="0 0 %d %d">`,
		m.Width, m.Height, m.Width, m.Height)
	for leaf := int32(0); leaf < m.Leaves; leaf++ {
		x := leafX(leaf)
		fmt.Fprintf(&b, `<g class="leaf" id="leaf-%d"><rect x="%d" y="%d" width="%d" height="%d"/>`+
			`<text x="%d" y="%d">leaf %d</text></g>`, leaf, x, margin, leafWidth, m.Height-2*margin,
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
		label := fmt.Sprintf("%d %s/%d", e.Port, e.Node, e.NUMA)
		if occupant != nil {
			title += fmt.Sprintf("; %s rank %d (%s) %s", occupant.Run, occupant.Rank, occupant.Role, occupant.State)
			label += fmt.Sprintf(" r%d", occupant.Rank)
		}
		if isDown {
			title += "; unschedulable: " + down
		}
		fmt.Fprintf(&b, `<g class="endpoint %s" id="endpoint-%s" data-leaf="%d" data-port="%d"><title>%s</title>`+
			`<rect x="%d" y="%d" width="%d" height="%d"/><text x="%d" y="%d">%s</text></g>`,
			class(occupant, isDown), html.EscapeString(e.Name), e.Leaf, e.Port, html.EscapeString(title),
			p.X, p.Y, leafWidth-8, slotHeight-4, p.X+4, p.Y+13, html.EscapeString(label))
	}
	b.WriteString(`</svg>`)
	return b.String()
}
