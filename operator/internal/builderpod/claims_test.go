package builderpod

import (
	"context"
	"fmt"
	"slices"
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
	run := &ebv1.EventBuilderRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "daq", UID: "uid"}}
	endpoint := ebv1.FabricEndpoint{Name: "eb0-numa0", Node: "eb0", RDMADevice: "mlx5_0", Streams: []string{"velo0", "velo1"}}
	for _, tc := range []struct {
		name      string
		cardRoot0 string
		align     resourceapi.FullyQualifiedName
		want      []string // allocated, sorted; nil: none
	}{
		{"aligned, on the PCIe root", "pci0000:00", AlignPCIeRoot, []string{"nic-mlx5-0", "stream-tell40-0-velo0", "stream-tell40-0-velo1"}},
		{"cross-wired, on the PCIe root", "pci0000:40", AlignPCIeRoot, nil},
		{"cross-wired, on the NUMA node", "pci0000:40", AlignNUMANode, []string{"nic-mlx5-0", "stream-tell40-0-velo0", "stream-tell40-0-velo1"}},
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

			template := ClaimTemplate(run, 0, endpoint, tc.align)
			if template.Name != "r-eb-0-devices" || template.Namespace != "daq" || len(template.OwnerReferences) != 1 {
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

	// An endpoint without streams asks for its NIC alone, unconstrained.
	nicOnly := ClaimTemplate(run, 3, ebv1.FabricEndpoint{Name: "eb1-numa1", RDMADevice: "mlx5_1"}, AlignPCIeRoot)
	if r := nicOnly.Spec.Spec.Devices; len(r.Requests) != 1 || r.Requests[0].Name != RequestNIC || len(r.Constraints) != 0 {
		t.Errorf("NIC-only claim %+v", r)
	}
}
