package runplan

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

func TestDevicesAllocatedSaysWhatStopsTheClaims(t *testing.T) {
	scheduled := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: "eb0"},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}}
	}
	waiting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "r-eb-2"}}
	unplaced := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "r-eb-1"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 1 cannot allocate all claims, 2 node(s) didn't match Pod's node affinity/selector.",
	}}}}
	for _, tc := range []struct {
		name   string
		state  DRAState
		align  ebv1.DeviceAlignment
		pods   []*corev1.Pod
		status metav1.ConditionStatus
		reason string
		says   []string
	}{
		{"all scheduled, one waiting", DRAState{}, ebv1.AlignPCIeRoot, []*corev1.Pod{scheduled("r-eb-0"), waiting}, metav1.ConditionTrue,
			ebv1.ReasonDevicesAllocated, []string{"1 of 2 builder pods are scheduled"}},
		{"no DRA API", DRAState{NoAPI: true}, ebv1.AlignPCIeRoot, nil, metav1.ConditionFalse,
			ebv1.ReasonDRAUnavailable, []string{"resource.k8s.io/v1", "spec.resources.rdma"}},
		{"no driver", DRAState{MissingClasses: []string{"eventbuilder-rdma", "eventbuilder-readout"}}, ebv1.AlignPCIeRoot, nil, metav1.ConditionFalse,
			ebv1.ReasonDRADriverMissing, []string{"no DeviceClass eventbuilder-rdma, eventbuilder-readout", "draDriver.enabled=true"}},
		{"no aligned pair on the root", DRAState{}, ebv1.AlignPCIeRoot, []*corev1.Pod{scheduled("r-eb-0"), unplaced}, metav1.ConditionFalse,
			ebv1.ReasonNoAlignedDevices, []string{"1 of 2 builder pods", "pod r-eb-1: 0/3 nodes are available: 1 cannot allocate all claims", "one PCIe root"}},
		{"no aligned pair on the NUMA node", DRAState{}, ebv1.AlignNUMANode, []*corev1.Pod{unplaced}, metav1.ConditionFalse,
			ebv1.ReasonNoAlignedDevices, []string{"one NUMA node (spec.resources.claims.alignOn NUMANode)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DevicesAllocated(tc.state, tc.align, tc.pods, 7)
			if c.Type != ebv1.ConditionDevicesAllocated || c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 7 {
				t.Errorf("got %s=%s reason %s (generation %d), want %s reason %s", c.Type, c.Status, c.Reason, c.ObservedGeneration, tc.status, tc.reason)
			}
			for _, s := range tc.says {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message does not say %q: %s", s, c.Message)
				}
			}
			if tc.state.Ready() == (tc.reason == ebv1.ReasonDRAUnavailable || tc.reason == ebv1.ReasonDRADriverMissing) {
				t.Errorf("Ready() = %v with reason %s", tc.state.Ready(), tc.reason)
			}
		})
	}
}
