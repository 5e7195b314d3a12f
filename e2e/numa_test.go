package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/cpuset"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// The kind kubelets run the static CPU manager and the Topology Manager
// (single-numa-node; e2e/cluster/up.sh). A run whose units ask for whole
// CPUs and memory gets Guaranteed builder pods with exclusive CPUs, each
// builder pins itself to its endpoint's NUMA node, and the run says they
// are aligned (NUMAAligned). Each worker is a one-NUMA-node server here
// (the host has one node): an endpoint per worker, on NUMA node 0. Both
// workers share the host's CPUs, so "exclusive" holds within a node only.
func TestNUMAAlignedUnitsGetExclusiveCPUs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const namespaceName, fabricName, runName = "e2e-numa", "e2e-numa", "numa"
	workers := workerNodes(ctx, t)
	if len(workers) < 2 {
		t.Fatalf("need 2 worker nodes, found %v", workers)
	}
	ensureNamespace(ctx, t, namespaceName)
	key := client.ObjectKey{Namespace: namespaceName, Name: runName}
	removeRunAndFabric(ctx, t, key, fabricName)

	fabric := &ebv1alpha1.Fabric{
		ObjectMeta: metav1.ObjectMeta{Name: fabricName},
		Spec:       ebv1alpha1.FabricSpec{Leaves: 1, Spines: 1, PortsPerLeaf: 2},
	}
	for i, node := range workers[:2] {
		fabric.Spec.Endpoints = append(fabric.Spec.Endpoints, ebv1alpha1.FabricEndpoint{
			Name: node + "-numa0", Node: node, NUMA: 0, Leaf: 0, Port: int32(i)})
	}
	if err := k8sClient.Create(ctx, fabric); err != nil {
		t.Fatalf("create fabric: %v", err)
	}
	memory := resource.MustParse("512Mi")
	run := &ebv1alpha1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: runName, Namespace: namespaceName},
		Spec: ebv1alpha1.EventBuilderRunSpec{
			FabricRef: &ebv1alpha1.FabricReference{Name: fabricName},
			Units:     2,
			Builder:   ebv1alpha1.BuilderSpec{Image: env.builderImage, ImagePullPolicy: corev1.PullIfNotPresent},
			Resources: ebv1alpha1.UnitResources{CPUs: 1, Memory: &memory},
		},
	}
	if err := k8sClient.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	waitFor(ctx, t, "phase Running with events built, NUMAAligned True", 5*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(run.Status.Conditions, ebv1alpha1.ConditionNUMAAligned)
		return run.Status.Phase == ebv1alpha1.PhaseRunning && run.Status.EventsBuilt > 0 && c != nil && c.Status == metav1.ConditionTrue,
			fmt.Sprintf("%s NUMAAligned %+v", describe(run), c)
	})
	t.Logf("NUMAAligned: %s", meta.FindStatusCondition(run.Status.Conditions, ebv1alpha1.ConditionNUMAAligned).Message)

	for _, rk := range run.Status.Ranks {
		if rk.Role != ebv1alpha1.RoleLive {
			continue
		}
		if n := rk.NUMA; n == nil || !n.Aligned || n.Node == nil || *n.Node != 0 || n.Misplaced != "" {
			t.Errorf("rank %d: numa %+v, want aligned on node 0", rk.Rank, n)
		}
		pod := builderPod(ctx, t, namespaceName, rk.Pod)
		if pod.Status.QOSClass != corev1.PodQOSGuaranteed {
			t.Errorf("pod %s: QoS %s, want Guaranteed (whole CPUs, requests = limits)", pod.Name, pod.Status.QOSClass)
		}
		mine, shared := exclusiveCPUs(t, pod)
		if mine.Size() != 1 || mine.Intersection(shared).Size() != 0 {
			t.Errorf("pod %s on %s: CPUs %s, shared pool %s; want one CPU of its own", pod.Name, pod.Spec.NodeName, mine, shared)
		}
		t.Logf("rank %d: pod %s on %s has CPU %s to itself (the node's shared pool: %s), numa %+v", rk.Rank, pod.Name,
			pod.Spec.NodeName, mine, shared, *rk.NUMA)
	}
	removeRunAndFabric(ctx, t, key, fabricName)
}

// exclusiveCPUs reads the pod's builder container's CPUs and the shared
// pool from the CPU manager's checkpoint on its node.
func exclusiveCPUs(t *testing.T, pod *corev1.Pod) (mine, shared cpuset.CPUSet) {
	t.Helper()
	out, err := exec.Command("docker", "exec", pod.Spec.NodeName, "cat", "/var/lib/kubelet/cpu_manager_state").CombinedOutput()
	if err != nil {
		t.Fatalf("read the CPU manager's state on %s: %v: %s", pod.Spec.NodeName, err, out)
	}
	var state struct {
		PolicyName    string                       `json:"policyName"`
		DefaultCPUSet string                       `json:"defaultCpuSet"`
		Entries       map[string]map[string]string `json:"entries"`
	}
	if err := json.Unmarshal(out, &state); err != nil {
		t.Fatalf("the CPU manager's state on %s: %v: %s", pod.Spec.NodeName, err, out)
	}
	if state.PolicyName != "static" {
		t.Fatalf("CPU manager policy %q on %s, want static (e2e/cluster/up.sh)", state.PolicyName, pod.Spec.NodeName)
	}
	containers := state.Entries[string(pod.UID)]
	if shared, err = cpuset.Parse(state.DefaultCPUSet); err != nil {
		t.Fatalf("defaultCpuSet %q: %v", state.DefaultCPUSet, err)
	}
	if mine, err = cpuset.Parse(containers["builder"]); err != nil || containers["builder"] == "" {
		t.Fatalf("pod %s has no exclusive CPUs in the CPU manager's state (%s): %v", pod.Name,
			strings.Join(sets.List(sets.KeySet(containers)), ","), err)
	}
	return mine, shared
}
