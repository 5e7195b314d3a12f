package main

import (
	"errors"
	"fmt"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/ranktable"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// Plan is the table the operator publishes for run on fabric (every node
// Ready), then, for each node of failed in turn, the table it publishes
// once that node is lost: each live unit there moved to a spare by the
// operator's failover choice, or dropped when no spare is left.
func Plan(fabric *ebv1.Fabric, run *ebv1.EventBuilderRun, failed []string) (*Output, error) {
	if run.Spec.FabricRef == nil || run.Spec.FabricRef.Name != fabric.Name {
		return nil, fmt.Errorf("run %s: spec.fabricRef must name Fabric %q", run.Name, fabric.Name)
	}
	nodes := runplan.Nodes{}
	known := map[string]bool{}
	for _, ep := range fabric.Spec.Endpoints {
		nodes[ep.Node], known[ep.Node] = true, true
	}
	for _, n := range failed {
		if !known[n] {
			return nil, fmt.Errorf("-fail-nodes: %q is no endpoint's node in Fabric %s", n, fabric.Name)
		}
	}
	f := runplan.Fabric(&fabric.Spec, nodes)
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("Fabric %s: %w", fabric.Name, err)
	}
	planned, err := runplan.Plan(&run.Spec, &f, 0)
	if err != nil {
		return nil, fmt.Errorf("run %s on Fabric %s: %w", run.Name, fabric.Name, err)
	}
	t := planned
	out := &Output{Fabric: FabricShape{Name: fabric.Name, Leaves: fabric.Spec.Leaves, Spines: fabric.Spec.Spines,
		PortsPerLeaf: fabric.Spec.PortsPerLeaf, LinksPerPair: fabric.Spec.LinksPerPair, Routing: string(f.Routing)}}
	if out.Fabric.Routing == "" {
		out.Fabric.Routing = string(planner.RoutingPortModSpines)
	}
	for _, node := range failed {
		nodes[node] = false
		f = runplan.Fabric(&fabric.Spec, nodes)
		for rank, r := range t.Ranks {
			ep, ok := runplan.Endpoints(f)[r.Endpoint]
			if r.Role != planner.Live || !ok || ep.Node != node {
				continue
			}
			next, res, err := planner.Failover(f, t, rank)
			move := Move{FailedEndpoint: r.Endpoint, SpareEndpoint: res.SpareEndpoint, Reason: "node " + node + " lost"}
			if errors.Is(err, planner.ErrNoSpare) || errors.Is(err, planner.ErrSpareWouldConflict) {
				move.SpareEndpoint, move.Dropped, move.Reason = "", true, move.Reason+", dropped: "+err.Error()
				next, err = planner.DropUnit(f, t, rank)
			}
			if err != nil {
				return nil, fmt.Errorf("failing over rank %d (%s): %w", rank, r.Endpoint, err)
			}
			t = next
			out.Moves = append(out.Moves, move)
		}
	}
	out.Table = ranktable.New(run.Name, fabric.Name, t, builderpod.Peers(run.Name, int32(t.N())), runplan.Endpoints(f))
	out.Table.UnreadStreams = runplan.LostStreams(&f, t, &planned, nil) // judged against the plan: what its units read at home
	return out, nil
}
