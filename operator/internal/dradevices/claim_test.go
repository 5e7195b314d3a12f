package dradevices

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"daq.io/eventbuilder/operator/internal/dradevices/sysfstest"
	"daq.io/eventbuilder/operator/internal/readoutcards"
)

// A pod's claim on the dual-socket server: the NIC and the card of socket
// 0, as a matchAttribute on pcieRoot allocates them.
func TestClaimSpecGivesTheContainerItsNICAndStreamsTogether(t *testing.T) {
	s := sysfstest.New(t)
	s.NIC(s.PCI("pci0000:00", "0000:3b:00.0", 0), "mlx5_0", "InfiniBand", "4: ACTIVE", map[int]string{0: "IB " + ibGID})
	s.NIC(s.PCI("pci0000:80", "0000:af:00.0", 1), "mlx5_1", "InfiniBand", "4: ACTIVE", map[int]string{0: "IB " + ibGID})
	s.Write("class/infiniband_verbs/uverbs0/ibdev", "mlx5_0")
	s.Write("class/infiniband_verbs/uverbs1/ibdev", "mlx5_1")
	s.PCI("pci0000:00", "0000:3c:00.0", 0)
	devices, err := Discover(s.Root, readoutcards.NodeConfig{Cards: []readoutcards.Card{
		{Name: "tell40-0", NUMA: 0, Device: "/dev/pcie40_0", PCIAddress: "0000:3c:00.0", Streams: []string{"velo0", "velo1"}},
		{Name: "emu", NUMA: 1, Streams: []string{"e0"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	devices[len(devices)-1].Attributes[AttrEmulated] = boolean(true)
	verbs, err := VerbsNodes(s.Root)
	if err != nil || !reflect.DeepEqual(verbs, map[string]string{"mlx5_0": "/dev/infiniband/uverbs0", "mlx5_1": "/dev/infiniband/uverbs1"}) {
		t.Fatalf("verbs nodes %v, %v", verbs, err)
	}

	spec, err := ClaimSpec("c1a1m", []string{"nic-mlx5-0", "stream-tell40-0-velo0", "stream-tell40-0-velo1"}, devices, verbs)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(spec)
	want := `{"cdiVersion":"` + spec.Version + `","kind":"eventbuilder.daq.io/claim","devices":[{"name":"c1a1m","containerEdits":{` +
		`"env":["EB_RDMA_DEVICE=mlx5_0","EB_READOUT_STREAMS=velo0,velo1","EB_READOUT_CARDS=tell40-0","EB_READOUT_DEVICES=/dev/pcie40_0"],` +
		`"deviceNodes":[{"path":"/dev/infiniband/uverbs0"},{"path":"/dev/pcie40_0"}]}}],"containerEdits":{}}`
	if string(body) != want || spec.Version == "" {
		t.Errorf("spec\n%s\nwant\n%s", body, want)
	}
	if id := CDIDeviceID("c1a1m"); id != "eventbuilder.daq.io/claim=c1a1m" {
		t.Errorf("CDI device id %s", id)
	}

	emulated, err := ClaimSpec("e", []string{"stream-emu-e0"}, devices, verbs)
	if err != nil {
		t.Fatal(err)
	}
	if env := emulated.Devices[0].ContainerEdits.Env; !reflect.DeepEqual(env, []string{
		"EB_READOUT_STREAMS=e0", "EB_READOUT_CARDS=emu", "EB_READOUT_DEVICES=", "EB_READOUT_EMULATED=true"}) ||
		len(emulated.Devices[0].ContainerEdits.DeviceNodes) != 0 {
		t.Errorf("emulated card's edits %+v", emulated.Devices[0].ContainerEdits)
	}

	for _, tc := range []struct {
		name      string
		allocated []string
		verbs     map[string]string
		want      string
	}{
		{"two NICs", []string{"nic-mlx5-0", "nic-mlx5-1"}, verbs, "claim x was allocated two RDMA NICs, mlx5_0 and mlx5_1"},
		{"a device gone", []string{"nic-mlx5-7"}, verbs, "claim x was allocated device nic-mlx5-7, which this node does not publish"},
		{"no verbs node", []string{"nic-mlx5-0"}, map[string]string{}, "RDMA device mlx5_0 has no verbs device node"},
	} {
		if _, err := ClaimSpec("x", tc.allocated, devices, tc.verbs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
