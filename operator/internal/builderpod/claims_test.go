package builderpod

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/dradevices"
	"daq.io/eventbuilder/operator/internal/dradevices/sysfstest"
	"daq.io/eventbuilder/operator/internal/readoutcards"
)

// classes lists the chart's DeviceClasses (its template is checked against
// these in dradriver's tests).
type classes []*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) { return c, nil }
func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, class := range c {
		if class.Name == name {
			return class, nil
		}
	}
	return nil, fmt.Errorf("no DeviceClass %s", name)
}

func deviceClass(name, kind string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{celSelector(`device.driver == "eventbuilder.daq.io" && device.attributes["eventbuilder.daq.io"].kind == "` + kind + `"`)}}}
}

// A unit's claim, as its template asks, put to the scheduler's own
// allocator (k8s.io/dynamic-resource-allocation/structured) on the
// dual-socket server as dradevices publishes it: aligned, the endpoint's
// NIC and streams are allocated on one PCIe root; cross-wired (socket 0's
// card in a slot of another root complex of the same socket) no set exists
// on one root, and aligning on the NUMA node finds one again.
func TestAClaimTemplateGetsTheEndpointsNICAndStreamsOnOneRootOrNone(t *testing.T) {
	endpoint := &Placement{Endpoint: "eb0-numa0", Node: "eb0", RDMADevice: "mlx5_0", Streams: []string{"velo0", "velo1"}}
	for _, tc := range []struct {
		name      string
		cardRoot0 string
		align     ebv1.DeviceAlignment
		want      []string // allocated, sorted; nil: none
	}{
		{"aligned, on the PCIe root", "pci0000:00", ebv1.AlignPCIeRoot, []string{"nic-mlx5-0", "stream-tell40-0-velo0", "stream-tell40-0-velo1"}},
		{"cross-wired, on the PCIe root", "pci0000:40", ebv1.AlignPCIeRoot, nil},
		{"cross-wired, on the NUMA node", "pci0000:40", ebv1.AlignNUMANode, []string{"nic-mlx5-0", "stream-tell40-0-velo0", "stream-tell40-0-velo1"}},
		{"aligned, alignOn defaulted", "pci0000:00", "", []string{"nic-mlx5-0", "stream-tell40-0-velo0", "stream-tell40-0-velo1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := sysfstest.New(t)
			sys.NIC(sys.PCI("pci0000:00", "0000:3b:00.0", 0), "mlx5_0", "InfiniBand", "4: ACTIVE", nil)
			sys.NIC(sys.PCI("pci0000:80", "0000:af:00.0", 1), "mlx5_1", "InfiniBand", "4: ACTIVE", nil)
			sys.PCI(tc.cardRoot0, "0000:3c:00.0", 0)
			sys.PCI("pci0000:80", "0000:b0:00.0", 1)
			devices, err := dradevices.Discover(sys.Root, readoutcards.NodeConfig{Cards: []readoutcards.Card{
				{Name: "tell40-0", NUMA: 0, Device: "/dev/pcie40_0", PCIAddress: "0000:3c:00.0", Streams: []string{"velo0", "velo1", "velo2"}},
				{Name: "tell40-1", NUMA: 1, Device: "/dev/pcie40_1", PCIAddress: "0000:b0:00.0", Streams: []string{"ut0"}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			node := "eb0"
			slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "eb0-slice"}, Spec: resourceapi.ResourceSliceSpec{
				Driver: "eventbuilder.daq.io", Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}, NodeName: &node, Devices: devices}}

			run := claimsRun(tc.align)
			template := ClaimTemplate(run, endpoint)
			if !strings.HasPrefix(template.Name, "r-eb0-numa0-") || template.Namespace != "daq" || len(template.OwnerReferences) != 1 {
				t.Errorf("template %s/%s owned by %v", template.Namespace, template.Name, template.OwnerReferences)
			}
			claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "daq", UID: "c"}, Spec: template.Spec.Spec}
			allocator, err := structured.NewAllocator(context.Background(), structured.Features{},
				structured.AllocatedState{}, classes{deviceClass(RDMADeviceClass, "rdma"), deviceClass(ReadoutDeviceClass, "readout")},
				[]*resourceapi.ResourceSlice{slice}, cel.NewCache(10, cel.Features{}))
			if err != nil {
				t.Fatal(err)
			}
			results, err := allocator.Allocate(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, []*resourceapi.ResourceClaim{claim})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, result := range results {
				for _, d := range result.Devices.Results {
					got = append(got, d.Device)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("allocated %v, want %v", got, tc.want)
			}
		})
	}

	// An endpoint without streams asks for its NIC alone, unconstrained;
	// a folded unit on a server without fibres asks for no stream; an
	// endpoint with neither claims nothing, and a run without claims mode
	// renders no template.
	run := claimsRun(ebv1.AlignPCIeRoot)
	nicOnly := ClaimTemplate(run, &Placement{Endpoint: "eb1-numa1", RDMADevice: "mlx5_1"})
	if r := nicOnly.Spec.Spec.Devices; len(r.Requests) != 1 || r.Requests[0].Name != RequestNIC || len(r.Constraints) != 0 {
		t.Errorf("NIC-only claim %+v", r)
	}
	if template := ClaimTemplate(run, &Placement{Endpoint: "sp0-numa0", WithoutFibres: true}); template != nil {
		t.Errorf("an endpoint with neither NIC nor fibres claims %+v", template.Spec.Spec.Devices)
	}
	run.Spec.Resources.Claims = nil
	if template := ClaimTemplate(run, endpoint); template != nil {
		t.Errorf("a run of the device plugins renders a claim template %s", template.Name)
	}
}

func claimsRun(align ebv1.DeviceAlignment) *ebv1.EventBuilderRun {
	run := &ebv1.EventBuilderRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "daq", UID: "uid"}}
	run.Spec.Resources.Claims = &ebv1.DeviceClaims{AlignOn: align}
	return run
}

// In claims mode a unit's pod claims its endpoint's devices from its own
// template, and the builder and the readout driver (which reads the
// streams) get them; neither asks for a device plugin's resource.
func TestAClaimsPodGetsItsEndpointsClaim(t *testing.T) {
	run := productionRun()
	run.Spec.Resources = ebv1.UnitResources{Claims: &ebv1.DeviceClaims{}}
	place := &Placement{Endpoint: "eb0-numa1", Node: "eb0", NUMA: 1, RDMADevice: "mlx5_1", Streams: []string{"velo0"}}
	pod := Pod(run, 2, place, "uid")
	template := ClaimTemplate(run, place)
	if got := pod.Spec.ResourceClaims; len(got) != 1 || got[0].Name != ClaimName || *got[0].ResourceClaimTemplateName != template.Name {
		t.Fatalf("pod claims %+v, want its template %s", got, template.Name)
	}
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		want := 0
		if c.Name == ContainerName || c.Name == DriverContainerName {
			want = 1
		}
		if len(c.Resources.Claims) != want || (want == 1 && c.Resources.Claims[0].Name != ClaimName) {
			t.Errorf("container %s claims %+v", c.Name, c.Resources.Claims)
		}
		for name := range c.Resources.Limits {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				t.Errorf("container %s asks for %s beside its claim", c.Name, name)
			}
		}
	}
	// The claim is part of what the pod runs: a pod made without it, or
	// from a template asking otherwise (immutable, so named anew), is
	// replaced.
	without := pod.DeepCopy()
	without.Spec.ResourceClaims = nil
	if SpecHash(without) == SpecHash(pod) {
		t.Error("the spec hash ignores the pod's claims")
	}
	run.Spec.Resources.Claims.AlignOn = ebv1.AlignNUMANode
	if numa := Pod(run, 2, place, "uid"); numa.Annotations[SpecHashAnnotation] == pod.Annotations[SpecHashAnnotation] {
		t.Errorf("aligned on the NUMA node, the pod claims from the same template %s", *numa.Spec.ResourceClaims[0].ResourceClaimTemplateName)
	}
}
