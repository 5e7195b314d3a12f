package planner

// Fabric is the event-building network as cabled: a two-level fat tree of
// leaf and spine switches, and the server NUMA domains (endpoints) plugged
// into the leaves' server-facing ports.
type Fabric struct {
	// Leaves is the number of leaf switches, numbered 0..Leaves-1.
	Leaves int
	// Spines is the number of spine switches, numbered 0..Spines-1.
	Spines int
	// PortsPerLeaf is the number of server-facing ports on every leaf,
	// numbered 0..PortsPerLeaf-1.
	PortsPerLeaf int
	// LinksPerPair is the number of parallel links between each leaf and
	// each spine: the capacity, in concurrent flows, of one uplink or
	// downlink.
	LinksPerPair int
	// Routing is how the switches pick the spine towards a destination;
	// empty means RoutingPortModSpines.
	Routing Routing
	// Endpoints are the server NUMA domains, in any order.
	Endpoints []Endpoint
}

// Endpoint is one server NUMA domain with its own network card: the place
// one event-builder unit runs.
type Endpoint struct {
	// Name identifies the endpoint in the rank table; unique in the fabric.
	Name string
	// Node is the Kubernetes node (the server). Endpoints sharing a node
	// are the NUMA halves of one server.
	Node string
	// NUMA is the NUMA node id on the server.
	NUMA int
	// RDMADevice and Netdev name the network card of this NUMA domain.
	RDMADevice string
	Netdev     string
	// Leaf and Port say where the card is cabled.
	Leaf int
	Port int
	// Streams are the readout streams (detector sources) this domain reads.
	Streams []string
	// Schedulable is false when the node is unknown to the cluster or not
	// Ready; such endpoints get no unit and are listed in the plan.
	Schedulable bool
}

// Routing names a routing rule: which spine carries traffic towards a
// destination port.
type Routing string

const (
	// RoutingPortModSpines is the paper's S(p) = p mod Spines, with p the
	// destination's global port number Leaf*PortsPerLeaf + Port.
	RoutingPortModSpines Routing = "PortModSpines"
	// RoutingLeafPortModSpines picks the spine by the destination's port
	// on its own leaf: Port mod Spines. It equals RoutingPortModSpines when
	// PortsPerLeaf is a multiple of Spines, and keeps the schedule
	// conflict-free when it is not.
	RoutingLeafPortModSpines Routing = "LeafPortModSpines"
)

// spine is the spine switch that carries traffic to the port (leaf, port).
// ByName indexes the fabric's endpoints by name.
func (f Fabric) ByName() map[string]Endpoint {
	m := make(map[string]Endpoint, len(f.Endpoints))
	for _, ep := range f.Endpoints {
		m[ep.Name] = ep
	}
	return m
}

func (f Fabric) spine(leaf, port int) int {
	if f.Routing == RoutingLeafPortModSpines {
		return port % f.Spines
	}
	return (leaf*f.PortsPerLeaf + port) % f.Spines
}
