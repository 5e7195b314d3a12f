package runplan

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// DRAState is what the cluster offers a run in claims mode
// (spec.resources.claims): whether it serves resource.k8s.io/v1, and which
// of the DRA driver's DeviceClasses do not exist.
type DRAState struct {
	NoAPI          bool
	MissingClasses []string
}

// Ready says whether pods that claim devices can be made: without the API
// their templates cannot be, and without the classes no claim could ever
// be allocated.
func (s DRAState) Ready() bool { return !s.NoAPI && len(s.MissingClasses) == 0 }

// draFix is how the DRA driver is installed.
const draFix = "install the chart with draDriver.enabled=true (its DaemonSet publishes every node's NICs and readout streams, " +
	"and it creates the DeviceClasses), or use the device plugins' spec.resources.rdma and spec.resources.readout"

// DevicesAllocated is the DevicesAllocated condition of a run in claims
// mode whose builder pods (those of live and spare ranks that claim
// devices) are pods: False when the cluster cannot allocate claims (no API,
// no driver) or the scheduler cannot place a pod (no node of its endpoint
// has the NIC and streams aligned as asked: its reason quoted), else True.
func DevicesAllocated(s DRAState, align ebv1.DeviceAlignment, pods []*corev1.Pod, generation int64) metav1.Condition {
	c := metav1.Condition{Type: ebv1.ConditionDevicesAllocated, Status: metav1.ConditionFalse, ObservedGeneration: generation}
	var unplaced []string
	scheduled := 0
	for _, pod := range pods {
		if why, ok := unschedulable(pod); ok {
			unplaced = append(unplaced, fmt.Sprintf("pod %s: %s", pod.Name, why))
		} else if pod.Spec.NodeName != "" {
			scheduled++
		}
	}
	switch {
	case s.NoAPI:
		c.Reason = ebv1.ReasonDRAUnavailable
		c.Message = "the cluster serves no resource.k8s.io/v1 (Dynamic Resource Allocation, Kubernetes 1.34 or later), " +
			"which spec.resources.claims needs: no builder pod is made; upgrade the cluster, or use the device plugins' " +
			"spec.resources.rdma and spec.resources.readout"
	case len(s.MissingClasses) > 0:
		c.Reason = ebv1.ReasonDRADriverMissing
		c.Message = "no DeviceClass " + strings.Join(s.MissingClasses, ", ") + ": the DRA driver eventbuilder.daq.io is not installed, " +
			"so no claim could be allocated and no builder pod is made; " + draFix
	case len(unplaced) > 0:
		c.Reason = ebv1.ReasonNoAlignedDevices
		c.Message = fmt.Sprintf("the scheduler cannot place %d of %d builder pods with their devices: %s; "+
			"each endpoint's node must publish (the DRA driver's ResourceSlice) the NIC and streams the Fabric gives it "+
			"(rdmaDevice, streams) on one %s (spec.resources.claims.alignOn %s): correct the Fabric or the cabling, or align on the NUMA node",
			len(unplaced), len(pods), shortlist.Join(unplaced, "; ", func(s string) string { return s }), alignedOn(align), align)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ebv1.ReasonDevicesAllocated
		c.Message = fmt.Sprintf("%d of %d builder pods are scheduled with their NIC and readout streams allocated", scheduled, len(pods))
	}
	return c
}

// unschedulable is why the scheduler found no node for pod, if it did not
// (PodScheduled False, reason Unschedulable).
func unschedulable(pod *corev1.Pod) (string, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message, c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return "", false
}

func isUnschedulable(pod *corev1.Pod) bool {
	_, ok := unschedulable(pod)
	return ok
}

// alignedOn names what alignOn makes a unit's devices share.
func alignedOn(align ebv1.DeviceAlignment) string {
	if align == ebv1.AlignNUMANode {
		return "NUMA node"
	}
	return "PCIe root"
}
