package controller

import (
	corev1 "k8s.io/api/core/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/planner"
)

// podUIDs are the UIDs of the ranks' pods, by rank.
func podUIDs(pods map[int32]*corev1.Pod) map[int32]string {
	uids := make(map[int32]string, len(pods))
	for rank, pod := range pods {
		if pod != nil {
			uids[rank] = string(pod.UID)
		}
	}
	return uids
}

// dataIPs are the data addresses of the table's live and spare ranks whose
// pod runs, by rank: the pod IP, or with spec.resources.network the pod's
// address on that network (builderpod.DataAddress: the control API stays
// on the pod IP). A running pod without one is left out, and why goes in
// unattached (when not nil).
func dataIPs(run *ebv1.EventBuilderRun, table planner.RankTable, pods map[int32]*corev1.Pod, unattached map[int32]error) map[int32]string {
	ips := map[int32]string{}
	for _, rk := range table.Ranks {
		rank, pod := int32(rk.Rank), pods[int32(rk.Rank)]
		if rk.Role == planner.Dummy || pod == nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		if run.Spec.Resources.Network == "" {
			ips[rank] = pod.Status.PodIP
			continue
		}
		ip, err := builderpod.DataAddress(pod)
		if err != nil {
			if unattached != nil {
				unattached[rank] = err
			}
			continue
		}
		ips[rank] = ip
	}
	return ips
}
