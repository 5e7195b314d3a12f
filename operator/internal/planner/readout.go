package planner

import (
	"fmt"
	"slices"
)

// Unread is an endpoint whose readout streams no live rank reads: fibres
// into its cards whose data nobody takes.
type Unread struct {
	Endpoint string
	Node     string
	Streams  []string
	// Why says what the endpoint does instead.
	Why string
	// Lost is true when the streams went unread by a failure (the node,
	// or the unit's failover), not by the plan.
	Lost bool
}

// UnreadStreams lists, in the fabric's endpoint order, the endpoints with
// readout streams that run no RU in t. Readout is physical: a stream is
// read only where it is cabled, so a failover leaves the failed endpoint's
// streams unread until the Fabric shows them cabled to an endpoint that
// runs an RU.
func UnreadStreams(fabric Fabric, t RankTable) []Unread {
	byEndpoint := map[string]Rank{}
	for _, r := range t.Ranks {
		if r.Endpoint != "" {
			byEndpoint[r.Endpoint] = r
		}
	}
	var unread []Unread
	for _, ep := range fabric.Endpoints {
		if len(ep.Streams) == 0 {
			continue
		}
		r, ranked := byEndpoint[ep.Name]
		why, lost := "", false
		switch {
		case ranked && r.Role == Live && r.Function != BU:
			continue
		case ranked && r.Role == Live:
			why = fmt.Sprintf("runs a BU only (rank %d), which reads no streams", r.Rank)
		case ranked && r.Role == Spare:
			why = fmt.Sprintf("held as a warm spare (rank %d)", r.Rank)
		// Idle and unspanned endpoints are unread by the plan whatever
		// their node does since: the run never read them.
		case slices.Contains(t.Idle, ep.Name):
			why = "idle: the run has no unit for it"
		case !slices.Contains(t.LeavesInUse, ep.Leaf):
			why = fmt.Sprintf("on leaf %d, which the schedule does not span: the run has no unit for it", ep.Leaf)
		case !ep.Schedulable:
			why, lost = "its node is not schedulable (unknown or not Ready)", true
		default:
			// The table keeps no history of where a unit went, so both
			// outcomes are named; the run's failover record says which.
			why, lost = "no rank runs it: its unit moved to a spare or, with none left, was dropped (a failure or a drain)", true
		}
		unread = append(unread, Unread{Endpoint: ep.Name, Node: ep.Node, Streams: slices.Clone(ep.Streams), Why: why, Lost: lost})
	}
	return unread
}
