package controller

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/testenv"
)

// A run in claims mode (spec.resources.claims) on a cluster without the
// DRA driver makes no pod and says how to install it; once the driver's
// DeviceClasses exist, every pod claims its endpoint's devices from a
// template of its own (NIC and streams on one PCIe root where the
// endpoint reads streams, the NIC alone where not), and a pod the
// scheduler cannot place is named with the scheduler's reason.
func TestClaimsModeWaitsForTheDriverAndNamesUnplacedPods(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "dra", 0, 1)
	run := fabricRun(ns, "dra", "dra", 5, 2)
	run.Spec.Resources = ebv1.UnitResources{Claims: &ebv1.DeviceClaims{}}
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	waitCondition(t, key, ebv1.ConditionDevicesAllocated, metav1.ConditionFalse, ebv1.ReasonDRADriverMissing,
		"no DeviceClass eventbuilder-rdma, eventbuilder-readout")
	expectEvent(t, ns, "dra", ebv1.ReasonDRADriverMissing)
	if pods, err := runPods(ctx, ns, "dra"); err != nil || len(pods) != 0 {
		t.Fatalf("%d pods (%v) made before the driver is there, want none", len(pods), err)
	}

	for _, name := range []string{builderpod.RDMADeviceClass, builderpod.ReadoutDeviceClass} {
		class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := k8s.Create(ctx, class); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), class) })
	}
	pods := waitPods(t, ns, "dra", "dra-eb-0", "dra-eb-1", "dra-eb-2", "dra-eb-3", "dra-eb-4", "dra-eb-6", "dra-eb-7")
	for _, pod := range pods {
		endpoint := pod.Labels[builderpod.LabelEndpoint]
		if len(pod.Spec.ResourceClaims) != 1 || pod.Spec.ResourceClaims[0].ResourceClaimTemplateName == nil {
			t.Errorf("pod %s claims %+v, want its endpoint's template", pod.Name, pod.Spec.ResourceClaims)
			continue
		}
		template := &resourceapi.ResourceClaimTemplate{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: *pod.Spec.ResourceClaims[0].ResourceClaimTemplateName}, template); err != nil {
			t.Errorf("pod %s: %v", pod.Name, err)
			continue
		}
		devices := template.Spec.Spec.Devices
		var asked []string
		for _, r := range devices.Requests {
			asked = append(asked, fmt.Sprintf("%s %d %s", r.Name, r.Exactly.Count, r.Exactly.Selectors[0].CEL.Expression))
		}
		nic := fmt.Sprintf(`nic 1 device.attributes["eventbuilder.daq.io"].rdmaDevice == "mlx5_%c"`, endpoint[len(endpoint)-1])
		want := []string{nic}
		reads := strings.HasPrefix(endpoint, "dra-srv0-") || strings.HasPrefix(endpoint, "dra-srv1-")
		if reads {
			want = append(want, fmt.Sprintf(`readout 1 device.attributes["eventbuilder.daq.io"].stream in ["%s-mfp0"]`, endpoint))
		}
		if strings.Join(asked, "; ") != strings.Join(want, "; ") {
			t.Errorf("pod %s on %s asks for %q, want %q", pod.Name, endpoint, asked, want)
		}
		if aligned := len(devices.Constraints) == 1 && *devices.Constraints[0].MatchAttribute == builderpod.AlignPCIeRoot; aligned != reads {
			t.Errorf("pod %s on %s: constraints %+v, want the PCIe root shared: %v", pod.Name, endpoint, devices.Constraints, reads)
		}
		for _, c := range pod.Spec.Containers {
			if c.Name == builderpod.ContainerName && (len(c.Resources.Claims) != 1 || len(c.Resources.Limits) != 0) {
				t.Errorf("builder of pod %s: claims %+v, limits %v; want the claim alone", pod.Name, c.Resources.Claims, c.Resources.Limits)
			}
		}
	}

	// The scheduler finds no node with rank 1's NIC and stream on one root.
	const why = "0/4 nodes are available: 1 cannot allocate all claims, 3 node(s) didn't match Pod's node affinity/selector."
	unplaced := pods["dra-eb-1"]
	unplaced.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: why, LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(ctx, &unplaced); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, key, ebv1.ConditionDevicesAllocated, metav1.ConditionFalse, ebv1.ReasonNoAlignedDevices,
		"the scheduler cannot place 1 of 7 builder pods with their devices: pod dra-eb-1: "+why)
	expectEvent(t, ns, "dra", ebv1.ReasonNoAlignedDevices)

	// Scheduled, every pod has its devices.
	for _, pod := range pods {
		bind(t, &pod)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(&unplaced), &unplaced); err != nil {
		t.Fatal(err)
	}
	unplaced.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(ctx, &unplaced); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, key, ebv1.ConditionDevicesAllocated, metav1.ConditionTrue, ebv1.ReasonDevicesAllocated,
		"7 of 7 builder pods are scheduled")
}

// On an API server that serves no resource.k8s.io (DRA off, or a cluster
// before 1.34), the operator's read of the driver's DeviceClasses finds no
// such API, which DevicesAllocated reports as DRAUnavailable; on this
// suite's, which serves it, the classes are only missing.
func TestAClusterWithoutDRAIsToldApartFromAMissingDriver(t *testing.T) {
	requireEnvtest(t)
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = testenv.MadeAssets(repoRoot)
	}
	without, err := testenv.StartWithAPIServerArgs(assets, map[string]string{"runtime-config": "resource.k8s.io/v1=false"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = without.Stop() })
	reader, err := client.New(without.Config, client.Options{Scheme: without.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	state, err := (&EventBuilderRunReconciler{APIReader: reader}).draState(context.Background())
	if err != nil || !state.NoAPI || state.Ready() {
		t.Errorf("without resource.k8s.io/v1: %+v, %v; want NoAPI", state, err)
	}
	state, err = (&EventBuilderRunReconciler{APIReader: k8s}).draState(context.Background())
	if err != nil || state.NoAPI || len(state.MissingClasses) != 2 {
		t.Errorf("with resource.k8s.io/v1 and no driver: %+v, %v; want both classes missing", state, err)
	}
}
