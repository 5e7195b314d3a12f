package builderapi

import (
	"fmt"
	"strings"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// NUMA is a builder's locality report (builder/docs/control-api.md): the
// NUMA node it was asked to run on (--numa-node, its RDMA device's node, or
// EB_NUMA_NODE from the operator), whether it could pin its threads and
// memory there, and whether its CPUs, memory and RDMA device are on it.
type NUMA struct {
	// Requested is what it was asked for ("" when nothing was).
	Requested string `json:"requested"`
	Node      *int32 `json:"node"`
	Pinned    bool   `json:"pinned"`
	CPUsLocal bool   `json:"cpus_local"`
	// MemoryLocal: its memory is bound to the node.
	MemoryLocal bool `json:"memory_local"`
	// DeviceLocal is null without an RDMA device.
	DeviceLocal *bool  `json:"device_local"`
	Warning     string `json:"warning"`
}

// Asked says whether the builder was asked to run on a NUMA node.
func (n *NUMA) Asked() bool { return n != nil && n.Requested != "" }

// Aligned says whether a builder asked for a NUMA node runs on it: pinned,
// its CPUs and memory there, and its RDMA device if it has one.
func (n *NUMA) Aligned() bool {
	return n.Asked() && n.Node != nil && n.Pinned && n.CPUsLocal && n.MemoryLocal && (n.DeviceLocal == nil || *n.DeviceLocal)
}

// Misplaced names what is not on the node, e.g. "CPUs, memory".
func (n *NUMA) Misplaced() string {
	var out []string
	if n.Node == nil {
		return "no NUMA node resolved"
	}
	if !n.CPUsLocal {
		out = append(out, "CPUs")
	}
	if !n.MemoryLocal {
		out = append(out, "memory")
	}
	if n.DeviceLocal != nil && !*n.DeviceLocal {
		out = append(out, "RDMA device")
	}
	if !n.Pinned && len(out) == 0 {
		out = append(out, "threads not pinned")
	}
	return strings.Join(out, ", ")
}

// RankNUMA is what the run's rank status shows of a report's NUMA
// placement: nil for a builder asked for no NUMA node.
func (r Report) RankNUMA() *ebv1.RankNUMA {
	n := r.NUMA
	if !n.Asked() {
		return nil
	}
	out := &ebv1.RankNUMA{Node: n.Node, Aligned: n.Aligned()}
	if !out.Aligned {
		out.Misplaced = n.Misplaced()
		if n.Warning != "" {
			out.Misplaced = fmt.Sprintf("%s (%s)", out.Misplaced, n.Warning)
		}
	}
	return out
}
