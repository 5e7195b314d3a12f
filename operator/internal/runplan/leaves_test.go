package runplan

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/planner"
)

// twoLeafFabric: servers s0, s1 on leaf 0 and s2, s3 on leaf 1, two NUMA
// endpoints each, every node Ready.
func twoLeafFabric() (*ebv1.Fabric, Nodes) {
	f := &ebv1.Fabric{Spec: ebv1.FabricSpec{Leaves: 2, Spines: 2, PortsPerLeaf: 4, LinksPerPair: 2}}
	nodes := Nodes{}
	for i := range 8 {
		node := fmt.Sprintf("s%d", i/2)
		f.Spec.Endpoints = append(f.Spec.Endpoints, ebv1.FabricEndpoint{Name: fmt.Sprintf("%s-numa%d", node, i%2), Node: node,
			NUMA: int32(i % 2), Leaf: int32(i / 4), Port: int32(i % 4)})
		nodes[node] = true
	}
	return f, nodes
}

// A leaf lost while its servers' nodes stay Ready (issue 31, item 5): the
// table cannot tell it from its servers' failure, so the Fabric says so in
// spec.unavailableLeaves. From then on no unit lands there: a plan leaves
// it out, and a failover takes no spare on it, even once the other leaf's
// spares have run out (before, it did: the reproducer). Its endpoints show
// in the Fabric's status, reason LeafUnavailable.
func TestAnUnavailableLeafTakesNoUnit(t *testing.T) {
	f, nodes := twoLeafFabric()
	full := Fabric(&f.Spec, nodes)
	table, err := planner.Plan(full, planner.Request{Units: 4, Spares: 4})
	if err != nil {
		t.Fatal(err)
	}
	onLeaf1 := func(endpoint string) bool { return Endpoints(full)[endpoint].Leaf == 1 }
	sparesOn := func(leaf int) (n int) {
		for _, r := range table.Ranks {
			if r.Role == planner.Spare && Endpoints(full)[r.Endpoint].Leaf == leaf {
				n++
			}
		}
		return n
	}
	if sparesOn(0) == 0 || sparesOn(1) == 0 {
		t.Fatalf("want spares on both leaves to begin with: %+v", table.Ranks)
	}

	// Without the signal, failing the units on leaf 0 over and over (its
	// servers fail in turn) ends on leaf 1's spares: the reproducer.
	moved := func(fabric planner.Fabric) (endpoints []string, err error) {
		next := table
		for range 4 {
			i := slices.IndexFunc(next.Ranks, func(r planner.Rank) bool { return r.Role == planner.Live && !onLeaf1(r.Endpoint) })
			if i < 0 {
				return endpoints, nil
			}
			var res planner.FailoverResult
			if next, res, err = planner.Failover(fabric, next, i); err != nil {
				return endpoints, err
			}
			endpoints = append(endpoints, res.SpareEndpoint)
		}
		return endpoints, nil
	}
	spares, err := moved(full)
	if err != nil || !slices.ContainsFunc(spares, onLeaf1) {
		t.Fatalf("without unavailableLeaves: moves to %v (%v), want some onto leaf 1: the reproducer no longer reproduces", spares, err)
	}

	f.Spec.UnavailableLeaves = []int32{1}
	down := Fabric(&f.Spec, nodes)
	for _, ep := range down.Endpoints {
		if ep.Schedulable == (ep.Leaf == 1) {
			t.Errorf("endpoint %s on leaf %d: schedulable %v", ep.Name, ep.Leaf, ep.Schedulable)
		}
	}
	spares, err = moved(down)
	if slices.ContainsFunc(spares, onLeaf1) || !errors.Is(err, planner.ErrNoSpare) {
		t.Errorf("with leaf 1 unavailable: moves to %v, then %v; want none onto leaf 1, then ErrNoSpare", spares, err)
	}
	if plan, err := planner.Plan(down, planner.Request{Units: 2, Spares: 2}); err != nil {
		t.Error(err)
	} else {
		for _, r := range plan.Ranks {
			if r.Endpoint != "" && onLeaf1(r.Endpoint) {
				t.Errorf("a fresh plan puts rank %d (%s) on the unavailable leaf", r.Rank, r.Endpoint)
			}
		}
	}

	st := FabricStatus(f, nodes, nil)
	var unusable []string
	for _, u := range st.Unschedulable {
		if u.Reason == ebv1.EndpointLeafUnavailable {
			unusable = append(unusable, u.Name)
		}
	}
	ready := meta.FindStatusCondition(st.Conditions, ebv1.FabricNodesReady)
	if !slices.Equal(unusable, []string{"s2-numa0", "s2-numa1", "s3-numa0", "s3-numa1"}) || st.SchedulableEndpoints != 4 ||
		ready == nil || ready.Status != metav1.ConditionFalse {
		t.Errorf("status: unschedulable %+v, %d schedulable, %+v; want leaf 1's four endpoints LeafUnavailable", st.Unschedulable,
			st.SchedulableEndpoints, ready)
	}
}
