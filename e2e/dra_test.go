package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// draDriver is the event builder's DRA driver, which the chart deploys on
// every worker (readout/dra-values.yaml: emulated dual-socket servers, each
// NUMA node's NIC and readout card on one PCIe root).
const draDriver = "eventbuilder.daq.io"

// The production run in claims mode (spec.resources.claims): every pod,
// live or spare, claims its endpoint's NIC and readout streams through
// DRA, the scheduler allocates them on one PCIe root (read back from the
// ResourceClaim's allocation and the ResourceSlice's attributes), and the
// container runtime hands them over by CDI: the readout driver reads its
// endpoint's streams from the environment the driver's CDI spec gives it
// (no device plugin resource is asked for), and the run builds, its
// consumers checking every event. A lost unit moves to a spare, which
// holds its own pair. Then a Fabric that cables an endpoint's
// NIC with streams on the other NUMA node's card (another root) asks for a
// pair no node has: its pod stays Pending, and the run says why in
// DevicesAllocated, quoting the scheduler.
func TestClaimsModeGivesEachUnitItsNICAndStreamsOnOneRoot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	const (
		namespaceName = "e2e-dra"
		fabricName    = "e2e-dra"
		runName       = "dra"
	)
	workers := workerNodes(ctx, t)
	if len(workers) < 2 {
		t.Fatalf("need 2 worker nodes, found %v", workers)
	}
	ensureNamespace(ctx, t, namespaceName)
	key := client.ObjectKey{Namespace: namespaceName, Name: runName}
	removeRunAndFabric(ctx, t, key, fabricName)
	published := waitForSlices(ctx, t, workers[:2])

	fabric := readoutFabric(fabricName, workers[:2], 0, 1)
	for i := range fabric.Spec.Endpoints {
		fabric.Spec.Endpoints[i].RDMADevice = fmt.Sprintf("mlx5_%d", fabric.Spec.Endpoints[i].NUMA)
	}
	if err := k8sClient.Create(ctx, fabric); err != nil {
		t.Fatalf("create fabric: %v", err)
	}
	run := productionRun(namespaceName, runName, fabricName)
	run.Spec.Resources = ebv1alpha1.UnitResources{Claims: &ebv1alpha1.DeviceClaims{}}
	if err := k8sClient.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	removeAfter(t, key, fabricName)
	waitForProductionRunning(ctx, t, run)
	if c := meta.FindStatusCondition(run.Status.Conditions, ebv1alpha1.ConditionDevicesAllocated); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("DevicesAllocated %+v, want True", c)
	}

	for _, rk := range run.Status.Ranks {
		if rk.Pod == "" {
			continue
		}
		pod := builderPod(ctx, t, namespaceName, rk.Pod)
		ep := fabric.Spec.Endpoints[slices.IndexFunc(fabric.Spec.Endpoints, func(ep ebv1alpha1.FabricEndpoint) bool { return ep.Name == rk.Endpoint })]
		got := allocatedDevices(ctx, t, pod, published)
		roots := map[string]bool{}
		var nics, streams []string
		for _, d := range got {
			roots[d.root] = true
			switch d.kind {
			case "rdma":
				nics = append(nics, d.rdmaDevice)
			case "readout":
				streams = append(streams, d.stream)
			}
		}
		slices.Sort(streams)
		wantStreams := slices.Sorted(slices.Values(ep.Streams))
		if len(roots) != 1 || strings.Join(nics, ",") != ep.RDMADevice || strings.Join(streams, ",") != strings.Join(wantStreams, ",") {
			t.Errorf("rank %d (pod %s) on %s was allocated NICs %v and streams %v on roots %v; want %s and %v on one root",
				rk.Rank, pod.Name, ep.Name, nics, streams, slices.Sorted(maps.Keys(roots)), ep.RDMADevice, wantStreams)
		}
		t.Logf("rank %d on %s: NIC %v and streams %v, all on %v (node %s)", rk.Rank, ep.Name, nics, streams, slices.Sorted(maps.Keys(roots)), pod.Spec.NodeName)
		// Only the driver's CDI spec can have given the containers these:
		// no container asks a device plugin for anything.
		for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			for name := range c.Resources.Limits {
				if strings.HasPrefix(string(name), "daq.io/") || strings.HasPrefix(string(name), "rdma/") {
					t.Errorf("pod %s container %s asks the device plugin for %s", pod.Name, c.Name, name)
				}
			}
		}
		if env := podExec(ctx, t, namespaceName, rk.Pod, "readout-driver", "printenv", "EB_READOUT_STREAMS"); env != strings.Join(ep.Streams, ",") {
			t.Errorf("rank %d: the readout driver's EB_READOUT_STREAMS %q, want its endpoint's %q (from the claim's CDI spec)", rk.Rank, env, strings.Join(ep.Streams, ","))
		}
		if env := podExec(ctx, t, namespaceName, rk.Pod, "readout-driver", "printenv", "EB_RDMA_DEVICE"); env != ep.RDMADevice {
			t.Errorf("rank %d: the readout driver's EB_RDMA_DEVICE %q, want %s (from the claim's CDI spec)", rk.Rank, env, ep.RDMADevice)
		}
	}
	// A lost unit moves to a spare, whose pod holds its own pair already:
	// the run builds on (Degraded: the victim's streams are fibres into
	// its server's card, unread from then on).
	before := run.DeepCopy()
	victim := before.Status.Ranks[slices.IndexFunc(before.Status.Ranks, func(rk ebv1alpha1.RankStatus) bool { return rk.Role == ebv1alpha1.RoleLive })]
	t.Logf("failing rank %d: deleting pod %s", victim.Rank, victim.Pod)
	deleteBuilderPod(ctx, t, builderPod(ctx, t, namespaceName, victim.Pod))
	var seen incompleteSeen
	waitForNewEpoch(ctx, t, run, before, 2, ebv1alpha1.PhaseDegraded, "a failover to a spare holding its own devices", &seen)
	spare := run.Status.Ranks[*run.Status.LastFailover.Moves[0].SpareRank]
	t.Logf("unit of rank %d moved to spare rank %d on %s (pod %s)", victim.Rank, spare.Rank, spare.Endpoint, spare.Pod)
	removeRunAndFabric(ctx, t, key, fabricName)

	// An endpoint cabled to the other socket's card: NIC mlx5_0 on NUMA
	// node 0's root, streams on NUMA node 1's.
	const miscabled = "e2e-dra-miscabled"
	missKey := client.ObjectKey{Namespace: namespaceName, Name: miscabled}
	removeRunAndFabric(ctx, t, missKey, miscabled)
	wrong := workerFabric(miscabled, workers[:1])
	wrong.Spec.Endpoints = wrong.Spec.Endpoints[:1]
	wrong.Spec.Endpoints[0].RDMADevice = "mlx5_0"
	wrong.Spec.Endpoints[0].Streams = []string{"w1-ut0", "w1-ut1"}
	if err := k8sClient.Create(ctx, wrong); err != nil {
		t.Fatalf("create fabric: %v", err)
	}
	pending := productionRun(namespaceName, miscabled, miscabled)
	pending.Spec.Units, pending.Spec.Spares = 1, 0
	pending.Spec.Resources = ebv1alpha1.UnitResources{Claims: &ebv1alpha1.DeviceClaims{}}
	if err := k8sClient.Create(ctx, pending); err != nil {
		t.Fatalf("create run: %v", err)
	}
	removeAfter(t, missKey, miscabled)
	waitFor(ctx, t, "the miscabled run to say why its pod cannot be placed", 3*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, missKey, pending); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(pending.Status.Conditions, ebv1alpha1.ConditionDevicesAllocated)
		if c == nil {
			return false, describe(pending)
		}
		return c.Status == metav1.ConditionFalse && c.Reason == ebv1alpha1.ReasonNoAlignedDevices &&
			strings.Contains(c.Message, "cannot allocate all claims"), fmt.Sprintf("%s: %s %s: %s", describe(pending), c.Status, c.Reason, c.Message)
	})
	c := meta.FindStatusCondition(pending.Status.Conditions, ebv1alpha1.ConditionDevicesAllocated)
	t.Logf("miscabled: %s: %s", c.Reason, c.Message)
	if pending.Status.Phase != ebv1alpha1.PhasePending {
		t.Errorf("the miscabled run is %s, want Pending", pending.Status.Phase)
	}
}

// publishedSlices are the driver's ResourceSlices, by pool (node).
type publishedSlices map[string]resourceapi.ResourceSlice

// waitForSlices waits until the DRA driver publishes, on each worker, its
// two emulated NICs and four streams, and returns the slices.
func waitForSlices(ctx context.Context, t *testing.T, workers []string) publishedSlices {
	t.Helper()
	out := publishedSlices{}
	waitFor(ctx, t, "the DRA driver to publish 2 NICs and 4 streams on each worker", 2*time.Minute, func() (bool, string) {
		var list resourceapi.ResourceSliceList
		if err := k8sClient.List(ctx, &list); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, s := range list.Items {
			if s.Spec.Driver == draDriver {
				out[s.Spec.Pool.Name] = s
				seen = append(seen, fmt.Sprintf("%s: %d devices", s.Spec.Pool.Name, len(s.Spec.Devices)))
			}
		}
		for _, w := range workers {
			if len(out[w].Spec.Devices) != 6 {
				return false, strings.Join(seen, "; ")
			}
		}
		return true, strings.Join(seen, "; ")
	})
	return out
}

// allocatedDevice is a device a pod's claim was allocated, with the
// attributes its ResourceSlice publishes.
type allocatedDevice struct {
	kind, rdmaDevice, stream, root string
}

// allocatedDevices reads the pod's claim (its status names it) and the
// devices allocated to it.
func allocatedDevices(ctx context.Context, t *testing.T, pod *corev1.Pod, published publishedSlices) []allocatedDevice {
	t.Helper()
	if len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod %s claim statuses %+v, want its one claim", pod.Name, pod.Status.ResourceClaimStatuses)
	}
	claim := &resourceapi.ResourceClaim{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: *pod.Status.ResourceClaimStatuses[0].ResourceClaimName}, claim); err != nil {
		t.Fatalf("claim of pod %s: %v", pod.Name, err)
	}
	if claim.Status.Allocation == nil {
		t.Fatalf("claim %s of running pod %s is not allocated", claim.Name, pod.Name)
	}
	var out []allocatedDevice
	for _, r := range claim.Status.Allocation.Devices.Results {
		slice := published[r.Pool]
		i := slices.IndexFunc(slice.Spec.Devices, func(d resourceapi.Device) bool { return d.Name == r.Device })
		if r.Driver != draDriver || i < 0 {
			t.Fatalf("claim %s was allocated %s/%s/%s, which the driver does not publish", claim.Name, r.Driver, r.Pool, r.Device)
		}
		attr := func(name resourceapi.QualifiedName) string {
			if v, ok := slice.Spec.Devices[i].Attributes[name]; ok && v.StringValue != nil {
				return *v.StringValue
			}
			return ""
		}
		out = append(out, allocatedDevice{kind: attr("kind"), rdmaDevice: attr("rdmaDevice"), stream: attr("stream"),
			root: attr("resource.kubernetes.io/pcieRoot")})
	}
	return out
}
