package dradevices

import (
	"reflect"
	"strings"
	"testing"

	"daq.io/eventbuilder/operator/internal/dradevices/sysfsemu"
	"daq.io/eventbuilder/operator/internal/readoutcards"
)

// A kind worker emulating a dual-socket server (the e2e's
// draDriver.emulatedSysfs): its NICs are found as on a real one, with their
// PCIe roots and NUMA nodes, the cards' streams on the roots of their PCI
// addresses, and every NIC published as emulated; a claim of one gives the
// container its name and no device node.
func TestAnEmulatedServerIsDiscoveredAsEmulated(t *testing.T) {
	config, err := sysfsemu.ParseConfig([]byte(`{"nodes": {"w1": {"pciDevices": [
		{"address": "0000:3b:00.0", "root": "pci0000:3a", "numa": 0, "rdmaDevice": "mlx5_0"},
		{"address": "0000:3c:00.0", "root": "pci0000:3a", "numa": 0},
		{"address": "0000:af:00.0", "root": "pci0000:ae", "numa": 1, "rdmaDevice": "mlx5_1"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := config.Nodes["w1"].Emulate(root); err != nil {
		t.Fatal(err)
	}
	devices, err := Discover(root, readoutcards.NodeConfig{Emulated: true, Cards: []readoutcards.Card{
		{Name: "emulated-w1-0", NUMA: 0, PCIAddress: "0000:3c:00.0", Streams: []string{"w1-velo0"}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range devices {
		got[d.Name] = strings.Join([]string{value(d.Attributes, AttrPCIeRoot), value(d.Attributes, AttrPCIBusID),
			value(d.Attributes, AttrLinkLayer)}, " ")
		if !emulatedDevice(d.Attributes) {
			t.Errorf("device %s of an emulated tree not published as emulated: %v", d.Name, d.Attributes)
		}
	}
	want := map[string]string{
		"nic-mlx5-0":                    "pci0000:3a 0000:3b:00.0 Ethernet",
		"nic-mlx5-1":                    "pci0000:ae 0000:af:00.0 Ethernet",
		"stream-emulated-w1-0-w1-velo0": "pci0000:3a 0000:3c:00.0 ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("devices %v, want %v", got, want)
	}
	spec, err := ClaimSpec("c", []string{"nic-mlx5-0", "stream-emulated-w1-0-w1-velo0"}, devices, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if edits := spec.Devices[0].ContainerEdits; len(edits.DeviceNodes) != 0 || !reflect.DeepEqual(edits.Env, []string{"EB_RDMA_DEVICE=mlx5_0",
		"EB_READOUT_STREAMS=w1-velo0", "EB_READOUT_CARDS=emulated-w1-0", "EB_READOUT_DEVICES=", "EB_READOUT_EMULATED=true"}) {
		t.Errorf("an emulated claim's edits %+v", edits)
	}
}

func TestBadEmulatedSysfsConfigsNameTheField(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`{"nodes": [1]}`, "not an emulated sysfs configuration"},
		{`{"nodes": {"w": {"pciDevices": [{"address": "3b:00.0", "root": "pci0000:3a"}]}}}`, "nodes[w].pciDevices[0].address \"3b:00.0\""},
		{`{"nodes": {"w": {"pciDevices": [{"address": "0000:3b:00.0", "root": "pci0000:3a"}, {"address": "0000:3b:00.0", "root": "pci0000:3a"}]}}}`,
			"nodes[w].pciDevices[1].address 0000:3b:00.0 is listed twice"},
		{`{"nodes": {"w": {"pciDevices": [{"address": "0000:3b:00.0", "root": "3a"}]}}}`, "nodes[w].pciDevices[0].root \"3a\""},
		{`{"nodes": {"w": {"pciDevices": [{"address": "0000:3b:00.0", "root": "pci0000:3a", "numa": -1}]}}}`, "nodes[w].pciDevices[0].numa -1"},
		{`{"nodes": {"w": {"pciDevices": [{"address": "0000:3b:00.0", "root": "pci0000:3a", "rdmaDevice": "../x"}]}}}`,
			"nodes[w].pciDevices[0].rdmaDevice \"../x\""},
	} {
		if _, err := sysfsemu.ParseConfig([]byte(tc.config)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.config, err, tc.want)
		}
	}
}
