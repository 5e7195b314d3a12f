package dradevices

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"daq.io/eventbuilder/operator/internal/dradevices/sysfstest"
	"daq.io/eventbuilder/operator/internal/readoutcards"
)

// text renders a device's attributes as name=value, sorted.
func text(d resourceapi.Device) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(d.Attributes)) {
		v := d.Attributes[name]
		switch {
		case v.StringValue != nil:
			parts = append(parts, fmt.Sprintf("%s=%s", name, *v.StringValue))
		case v.IntValue != nil:
			parts = append(parts, fmt.Sprintf("%s=%d", name, *v.IntValue))
		case v.BoolValue != nil:
			parts = append(parts, fmt.Sprintf("%s=%t", name, *v.BoolValue))
		}
	}
	return strings.Join(parts, " ")
}

func texts(devices []resourceapi.Device) map[string]string {
	out := map[string]string{}
	for _, d := range devices {
		out[d.Name] = text(d)
	}
	return out
}

const (
	roceIPv4 = "0000:0000:0000:0000:0000:ffff:0a00:0001"
	linkLoc  = "fe80:0000:0000:0000:0202:c9ff:fe00:0001"
	ibGID    = "fe80:0000:0000:0000:0002:c903:0000:0002"
)

// A dual-socket farm server: a root complex per socket, a NIC and a readout
// card on each; and the same server cross-wired, its first card in a slot
// of a second root complex of socket 0, so it shares a NUMA node with
// mlx5_0 but no PCIe root.
func TestDiscoverAServerWithACardAndANICOnEachRoot(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cardRoot0 string
		want      map[string]string
	}{
		{name: "aligned", cardRoot0: "pci0000:00", want: map[string]string{
			"nic-mlx5-0": "gid=" + roceIPv4 + " gidIndex=3 kind=rdma linkLayer=Ethernet netdev=ens1f0 port=1 portState=ACTIVE rdmaDevice=mlx5_0 " +
				"resource.kubernetes.io/numaNode=0 resource.kubernetes.io/pciBusID=0000:3b:00.0 resource.kubernetes.io/pcieRoot=pci0000:00",
			"nic-mlx5-1": "gid=" + ibGID + " gidIndex=0 kind=rdma linkLayer=InfiniBand port=1 portState=ACTIVE rdmaDevice=mlx5_1 " +
				"resource.kubernetes.io/numaNode=1 resource.kubernetes.io/pciBusID=0000:af:00.0 resource.kubernetes.io/pcieRoot=pci0000:80",
			"stream-tell40-0-velo0": "card=tell40-0 devicePath=/dev/pcie40_0 kind=readout resource.kubernetes.io/numaNode=0 " +
				"resource.kubernetes.io/pciBusID=0000:3c:00.0 resource.kubernetes.io/pcieRoot=pci0000:00 stream=velo0",
			"stream-tell40-0-velo1": "card=tell40-0 devicePath=/dev/pcie40_0 kind=readout resource.kubernetes.io/numaNode=0 " +
				"resource.kubernetes.io/pciBusID=0000:3c:00.0 resource.kubernetes.io/pcieRoot=pci0000:00 stream=velo1",
			"stream-tell40-1-ut-2": "card=tell40-1 devicePath=/dev/pcie40_1 kind=readout resource.kubernetes.io/numaNode=1 " +
				"resource.kubernetes.io/pciBusID=0000:b0:00.0 resource.kubernetes.io/pcieRoot=pci0000:80 stream=ut_2",
		}},
		{name: "cross-wired", cardRoot0: "pci0000:40", want: map[string]string{
			"stream-tell40-0-velo0": "card=tell40-0 devicePath=/dev/pcie40_0 kind=readout resource.kubernetes.io/numaNode=0 " +
				"resource.kubernetes.io/pciBusID=0000:3c:00.0 resource.kubernetes.io/pcieRoot=pci0000:40 stream=velo0",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sysfstest.New(t)
			s.NIC(s.PCI("pci0000:00", "0000:3b:00.0", 0), "mlx5_0", "Ethernet", "4: ACTIVE", map[int]string{
				0: "RoCE_v1 " + linkLoc + " ens1f0", 1: "RoCE_v2 " + linkLoc + " ens1f0", 3: "RoCE_v2 " + roceIPv4 + " ens1f0"})
			s.NIC(s.PCI("pci0000:80", "0000:af:00.0", 1), "mlx5_1", "InfiniBand", "4: ACTIVE", map[int]string{0: "IB " + ibGID})
			s.PCI(tc.cardRoot0, "0000:3c:00.0", 0)
			s.PCI("pci0000:80", "0000:b0:00.0", 1)
			devices, err := Discover(s.Root, readoutcards.NodeConfig{Cards: []readoutcards.Card{
				{Name: "tell40-0", NUMA: 0, Device: "/dev/pcie40_0", PCIAddress: "0000:3c:00.0", Streams: []string{"velo0", "velo1"}},
				{Name: "tell40-1", NUMA: 1, Device: "/dev/pcie40_1", PCIAddress: "0000:b0:00.0", Streams: []string{"ut_2"}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, d := range devices {
				names = append(names, d.Name)
			}
			if want := []string{"nic-mlx5-0", "nic-mlx5-1", "stream-tell40-0-velo0", "stream-tell40-0-velo1", "stream-tell40-1-ut-2"}; !reflect.DeepEqual(names, want) {
				t.Errorf("devices %v, want %v", names, want)
			}
			got := texts(devices)
			for name, want := range tc.want {
				if got[name] != want {
					t.Errorf("%s:\n got %s\nwant %s", name, got[name], want)
				}
			}
			root := func(name string) string {
				return *devices[slices.IndexFunc(devices, func(d resourceapi.Device) bool { return d.Name == name })].Attributes[AttrPCIeRoot].StringValue
			}
			if aligned := root("nic-mlx5-0") == root("stream-tell40-0-velo0"); aligned != (tc.name == "aligned") {
				t.Errorf("mlx5_0 and tell40-0 on one PCIe root: %v", aligned)
			}
		})
	}
}

func TestDiscoverNamesWhatDoesNotCheckOut(t *testing.T) {
	s := sysfstest.New(t)
	s.NIC(s.PCI("pci0000:00", "0000:3b:00.0", -1), "rxe_0", "Ethernet", "1: DOWN", nil)
	s.PCI("pci0000:80", "0000:af:00.0", 1)

	// A NIC the kernel gives no NUMA node, no GID and a port DOWN: published
	// as it is, with no numaNode.
	devices, err := Discover(s.Root, readoutcards.NodeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := texts(devices)["nic-rxe-0"], "kind=rdma linkLayer=Ethernet port=1 portState=DOWN rdmaDevice=rxe_0 "+
		"resource.kubernetes.io/pciBusID=0000:3b:00.0 resource.kubernetes.io/pcieRoot=pci0000:00"; got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}

	// An emulated card without a PCI address: aligned by its NUMA node alone.
	devices, err = Discover(s.Root, readoutcards.NodeConfig{Emulated: true, Cards: []readoutcards.Card{
		{Name: "emulated-0", NUMA: 1, Streams: []string{"s0"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := texts(devices)["stream-emulated-0-s0"], "card=emulated-0 emulated=true kind=readout resource.kubernetes.io/numaNode=1 stream=s0"; got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}

	for _, tc := range []struct {
		name string
		card readoutcards.Card
		want string
	}{
		{"no such PCI device", readoutcards.Card{Name: "tell40-9", PCIAddress: "0000:5e:00.0", Streams: []string{"s"}},
			"readout card tell40-9: no PCI device 0000:5e:00.0 under"},
		{"another NUMA node than the kernel's", readoutcards.Card{Name: "tell40-1", NUMA: 0, PCIAddress: "0000:af:00.0", Streams: []string{"s"}},
			"readout card tell40-1: configured on NUMA node 0, but the kernel puts 0000:af:00.0 on node 1: correct its numa"},
		{"a name too long", readoutcards.Card{Name: strings.Repeat("c", 40), NUMA: 1, Streams: []string{strings.Repeat("s", 20)}},
			"is over 63 characters"},
	} {
		_, err := Discover(s.Root, readoutcards.NodeConfig{Cards: []readoutcards.Card{tc.card}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	_, err = Discover(s.Root, readoutcards.NodeConfig{Cards: []readoutcards.Card{
		{Name: "a.b", NUMA: 1, Streams: []string{"s"}}, {Name: "a-b", NUMA: 1, Streams: []string{"s"}}}})
	if err == nil || !strings.Contains(err.Error(), "two devices are named stream-a-b-s") {
		t.Errorf("names alike once DNS labels: error %v", err)
	}

	// A node without the RDMA subsystem has no NICs, and that is no error.
	if devices, err := Discover(t.TempDir(), readoutcards.NodeConfig{}); err != nil || len(devices) != 0 {
		t.Errorf("empty sysfs: %v, %v", devices, err)
	}
}
