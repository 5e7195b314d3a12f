package readoutcards

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// What a container allocated readout streams is told: which streams, on
// which cards, through which device nodes (each mounted in the container).
const (
	EnvStreams  = "EB_READOUT_STREAMS"
	EnvCards    = "EB_READOUT_CARDS"
	EnvDevices  = "EB_READOUT_DEVICES"
	EnvEmulated = "EB_READOUT_EMULATED"
)

// Allocation is what a container allocated the devices `ids` of `r` gets:
// the device nodes of their cards, and the streams, cards and device nodes
// in its environment (comma-separated, in the resource's order; emulated
// cards are said to be so).
func Allocation(r Resource, ids []string, emulated bool) (*pluginapi.ContainerAllocateResponse, error) {
	var streams, cards, paths []string
	for _, d := range r.Devices {
		if !slices.Contains(ids, d.ID) {
			continue
		}
		streams = append(streams, d.Stream)
		if !slices.Contains(cards, d.Card) {
			cards = append(cards, d.Card)
		}
		if d.Path != "" && !slices.Contains(paths, d.Path) {
			paths = append(paths, d.Path)
		}
	}
	if len(streams) != len(ids) {
		return nil, fmt.Errorf("%s has no devices %v of those asked for, %v", r.Name, missing(r, ids), ids)
	}
	resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{
		EnvStreams: strings.Join(streams, ","), EnvCards: strings.Join(cards, ","), EnvDevices: strings.Join(paths, ","),
	}}
	if emulated {
		resp.Envs[EnvEmulated] = "true"
	}
	for _, p := range paths {
		resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{ContainerPath: p, HostPath: p, Permissions: "rw"})
	}
	return resp, nil
}

func missing(r Resource, ids []string) []string {
	var out []string
	for _, id := range ids {
		if !slices.ContainsFunc(r.Devices, func(d Device) bool { return d.ID == id }) {
			out = append(out, id)
		}
	}
	return out
}

// Preferred picks `size` of the available devices, those that must be
// included first, then the rest in the resource's order (cards in
// configuration order, each card's streams together). A run's driver asks
// for every stream of its endpoint, which is all of its NUMA node's: one
// Fabric endpoint per NUMA node.
func Preferred(r Resource, available, mustInclude []string, size int) []string {
	out := slices.Clone(mustInclude)
	for _, d := range r.Devices {
		if len(out) >= size {
			break
		}
		if slices.Contains(available, d.ID) && !slices.Contains(out, d.ID) {
			out = append(out, d.ID)
		}
	}
	return out
}

// Health is a device's health for the kubelet: a real card's stream is
// healthy while its device node exists; an emulated one always is.
func Health(d Device, exists func(path string) bool) string {
	if d.Path == "" || exists(d.Path) {
		return pluginapi.Healthy
	}
	return pluginapi.Unhealthy
}

// List is the resource's devices as ListAndWatch sends them, each on its
// NUMA node (so the Topology Manager can align it with the pod's CPUs),
// unless the machine lacks that node (Resource.Unaligned).
func List(r Resource, exists func(path string) bool) []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(r.Devices))
	for _, d := range r.Devices {
		dev := &pluginapi.Device{ID: d.ID, Health: Health(d, exists)}
		if !r.Unaligned {
			dev.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(r.NUMA)}}}
		}
		out = append(out, dev)
	}
	return out
}

// MarkUnaligned marks the resources on NUMA nodes the machine lacks
// (machine: its nodes; nil when unknown, which marks none) and returns
// them, for a warning.
func MarkUnaligned(resources []Resource, machine []int) []Resource {
	var marked []Resource
	for i := range resources {
		if machine != nil && !slices.Contains(machine, resources[i].NUMA) {
			resources[i].Unaligned = true
			marked = append(marked, resources[i])
		}
	}
	return marked
}

// MachineNUMANodes are the NUMA nodes under sysRoot's
// devices/system/node, ascending; nil when that cannot be read.
func MachineNUMANodes(sysRoot string) []int {
	entries, err := os.ReadDir(filepath.Join(sysRoot, "devices", "system", "node"))
	if err != nil {
		return nil
	}
	var nodes []int
	for _, e := range entries {
		if id, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node")); err == nil && strings.HasPrefix(e.Name(), "node") {
			nodes = append(nodes, id)
		}
	}
	slices.Sort(nodes)
	return nodes
}
