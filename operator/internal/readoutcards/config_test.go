package readoutcards

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func TestParseConfigNamesTheField(t *testing.T) {
	for _, tc := range []struct{ name, config, want string }{
		{"prefix", `{"resourcePrefix":"tell40","nodes":{}}`, "resourcePrefix"},
		{"unknown field", `{"resourcePrefix":"daq.io/tell40","nodes":{"n":{"cardz":[]}}}`, "unknown field"},
		{"device", `{"resourcePrefix":"daq.io/tell40","nodes":{"n":{"cards":[{"name":"c0","numa":0,"streams":["s0"]}]}}}`,
			"nodes[n].cards[0].device"},
		{"emulated with device", `{"resourcePrefix":"daq.io/tell40","nodes":{"n":{"emulated":true,"cards":[{"name":"c0","device":"/dev/x","streams":["s0"]}]}}}`,
			"an emulated card has no device node"},
		{"no streams", `{"resourcePrefix":"daq.io/tell40","nodes":{"n":{"emulated":true,"cards":[{"name":"c0"}]}}}`, "nodes[n].cards[0].streams"},
		{"stream twice", `{"resourcePrefix":"daq.io/tell40","nodes":{"n":{"emulated":true,"cards":[{"name":"c0","streams":["s0"]},{"name":"c1","numa":1,"streams":["s0"]}]}}}`,
			`stream "s0" is also read by card c0`},
		{"numa", `{"resourcePrefix":"daq.io/tell40","nodes":{"n":{"emulated":true,"cards":[{"name":"c0","numa":-1,"streams":["s0"]}]}}}`, "nodes[n].cards[0].numa"},
		{"pci address", `{"resourcePrefix":"daq.io/tell40","nodes":{"n":{"emulated":true,"cards":[{"name":"c0","pciAddress":"3b:00.0","streams":["s0"]}]}}}`,
			`nodes[n].cards[0].pciAddress "3b:00.0": expected the card's PCI address as lspci -D shows it`},
	} {
		_, err := ParseConfig([]byte(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

func farm(t *testing.T) FarmConfig {
	t.Helper()
	cfg, err := ParseConfig([]byte(`{"resourcePrefix":"daq.io/tell40","nodes":{
		"eb0":{"cards":[{"name":"tell40-1","numa":1,"device":"/dev/pcie40_1","streams":["ut2","ut3"]},
		                {"name":"tell40-0","numa":0,"device":"/dev/pcie40_0","streams":["velo0","velo1"]},
		                {"name":"tell40-2","numa":1,"device":"/dev/pcie40_2","streams":["ut4"]}]},
		"kind-worker":{"emulated":true,"cards":[{"name":"emulated-0","numa":0,"streams":["s0","s1"]}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A node's streams are grouped by NUMA node into one resource each.
func TestResourcesPerNUMANode(t *testing.T) {
	cfg := farm(t)
	got := Resources(cfg.ResourcePrefix, cfg.Nodes["eb0"])
	want := []Resource{
		{Name: "daq.io/tell40-numa0", NUMA: 0, Devices: []Device{
			{"tell40-0.velo0", "tell40-0", "velo0", "/dev/pcie40_0"}, {"tell40-0.velo1", "tell40-0", "velo1", "/dev/pcie40_0"}}},
		{Name: "daq.io/tell40-numa1", NUMA: 1, Devices: []Device{
			{"tell40-1.ut2", "tell40-1", "ut2", "/dev/pcie40_1"}, {"tell40-1.ut3", "tell40-1", "ut3", "/dev/pcie40_1"},
			{"tell40-2.ut4", "tell40-2", "ut4", "/dev/pcie40_2"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("resources\n%+v\nwant\n%+v", got, want)
	}
	list := List(got[1], func(p string) bool { return p != "/dev/pcie40_2" })
	if len(list) != 3 || list[0].Health != pluginapi.Healthy || list[2].Health != pluginapi.Unhealthy ||
		list[0].Topology.Nodes[0].ID != 1 {
		t.Errorf("list %v: want the card without a device node unhealthy, all on NUMA node 1", list)
	}

	// On a machine without NUMA node 1 (a test cluster's emulated server),
	// those go without topology; unknown machines mark nothing.
	if marked := MarkUnaligned(slices.Clone(got), nil); len(marked) != 0 {
		t.Errorf("unknown machine: marked %v", marked)
	}
	oneNode := slices.Clone(got)
	if marked := MarkUnaligned(oneNode, []int{0}); len(marked) != 1 || marked[0].NUMA != 1 || oneNode[0].Unaligned || !oneNode[1].Unaligned {
		t.Errorf("machine of node 0: marked %v (resources %+v), want numa1's alone", marked, oneNode)
	}
	for _, d := range List(oneNode[1], func(string) bool { return true }) {
		if d.Topology != nil {
			t.Errorf("device %s of a NUMA node the machine lacks has topology %v", d.ID, d.Topology)
		}
	}
}

// The machine's NUMA nodes are read from sysfs.
func TestMachineNUMANodes(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"node0", "node2", "possible", "power"} {
		if err := os.MkdirAll(filepath.Join(root, "devices", "system", "node", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := MachineNUMANodes(root); !slices.Equal(got, []int{0, 2}) {
		t.Errorf("nodes %v, want [0 2]", got)
	}
	if got := MachineNUMANodes(filepath.Join(root, "nowhere")); got != nil {
		t.Errorf("no sysfs: %v, want nil (unknown)", got)
	}
}

// A container gets its streams' cards mounted and named in its environment.
func TestAllocation(t *testing.T) {
	cfg := farm(t)
	numa1 := Resources(cfg.ResourcePrefix, cfg.Nodes["eb0"])[1]
	a, err := Allocation(numa1, []string{"tell40-2.ut4", "tell40-1.ut2"}, false)
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := map[string]string{EnvStreams: "ut2,ut4", EnvCards: "tell40-1,tell40-2", EnvDevices: "/dev/pcie40_1,/dev/pcie40_2"}
	if !reflect.DeepEqual(a.Envs, wantEnv) || len(a.Devices) != 2 || a.Devices[1].HostPath != "/dev/pcie40_2" ||
		a.Devices[1].ContainerPath != "/dev/pcie40_2" || a.Devices[1].Permissions != "rw" {
		t.Errorf("allocation %+v", a)
	}
	if _, err := Allocation(numa1, []string{"tell40-0.velo0"}, false); err == nil || !strings.Contains(err.Error(), "tell40-0.velo0") {
		t.Errorf("a device of another NUMA node: error %v", err)
	}
	emulated := Resources(cfg.ResourcePrefix, cfg.Nodes["kind-worker"])[0]
	e, err := Allocation(emulated, []string{"emulated-0.s0", "emulated-0.s1"}, true)
	if err != nil || len(e.Devices) != 0 || e.Envs[EnvEmulated] != "true" || e.Envs[EnvStreams] != "s0,s1" {
		t.Errorf("emulated allocation %+v, %v", e, err)
	}
	if got := Preferred(numa1, []string{"tell40-2.ut4", "tell40-1.ut3", "tell40-1.ut2"}, []string{"tell40-2.ut4"}, 2); !reflect.DeepEqual(got, []string{"tell40-2.ut4", "tell40-1.ut2"}) {
		t.Errorf("preferred %v", got)
	}
}
