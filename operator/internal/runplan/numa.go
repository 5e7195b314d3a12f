package runplan

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/planner"
)

// numaFix is what makes a unit NUMA-aligned on Kubernetes.
const numaFix = "give the builder pods whole CPUs and memory (spec.resources.cpus and memory: Guaranteed QoS, exclusive CPUs) " +
	"on kubelets with the static CPU manager and the Topology Manager policy single-numa-node, and the endpoint's RDMA resource"

// maxNamed bounds the ranks a condition names (a farm's run has hundreds).
const maxNamed = 8

// NUMAAlignment is the NUMAAligned condition of a run whose rank status is
// ranks: True when every live rank whose builder reported its NUMA
// placement is aligned, False naming the others. ok is false when no live
// rank reported one (no Fabric, or no answer yet): the run has no such
// condition then.
func NUMAAlignment(ranks []ebv1.RankStatus, generation int64) (c metav1.Condition, ok bool) {
	var reported int
	var off []string
	for _, rk := range ranks {
		if rk.Role != ebv1.RoleLive || rk.NUMA == nil {
			continue
		}
		reported++
		if !rk.NUMA.Aligned {
			node := "its NUMA node"
			if rk.NUMA.Node != nil {
				node = fmt.Sprintf("NUMA node %d", *rk.NUMA.Node)
			}
			off = append(off, fmt.Sprintf("rank %d (pod %s, node %s): not on %s: %s", rk.Rank, rk.Pod, rk.Node, node, rk.NUMA.Misplaced))
		}
	}
	if reported == 0 {
		return metav1.Condition{}, false
	}
	c = metav1.Condition{Type: ebv1.ConditionNUMAAligned, ObservedGeneration: generation}
	if len(off) == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, ebv1.ReasonNUMAAligned
		c.Message = fmt.Sprintf("the builders of %d live units run on their endpoints' NUMA nodes, with their CPUs, memory and RDMA devices there", reported)
		return c, true
	}
	c.Status, c.Reason = metav1.ConditionFalse, ebv1.ReasonNUMAMisaligned
	named := off[:min(len(off), maxNamed)]
	more := ""
	if len(off) > len(named) {
		more = fmt.Sprintf("; and %d more (status.ranks[].numa)", len(off)-len(named))
	}
	c.Message = fmt.Sprintf("%d of %d live units run off their endpoint's NUMA node: %s%s; %s",
		len(off), reported, strings.Join(named, "; "), more, numaFix)
	return c, true
}

// Misaligned finds the live ranks of t whose builder reports that it does
// not run on its endpoint's NUMA node, except those in failed: planned
// moves (spec.numaPolicy FailOver), in rank order, as Draining's: never
// every unit that still builds at once.
func Misaligned(t planner.RankTable, reports map[int32]builderapi.Report, failed []Failure) []Failure {
	return plannedMoves(t, failed, ebv1.ReasonNUMAMisaligned, func(r planner.Rank) bool {
		rep, ok := reports[int32(r.Rank)]
		return r.Endpoint != "" && ok && rep.NUMA.Asked() && !rep.NUMA.Aligned()
	})
}
