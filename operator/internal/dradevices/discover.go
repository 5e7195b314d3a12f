// Package dradevices finds the devices the event builder's DRA driver
// publishes for a node (resource.k8s.io/v1 ResourceSlices): every RDMA NIC
// under class/infiniband, and one device per stream of the node's readout
// cards (the readout configuration names them and their PCI addresses;
// fibres are not in sysfs). Each carries the standard attributes a claim's
// matchAttribute constraint aligns on: resource.kubernetes.io/pcieRoot,
// pciBusID and numaNode. It reads a sysfs root that tests point at fixture
// trees, and a kind node at its emulated tree (sysfsemu); it is pure
// otherwise.
//
// The three standard attributes are read here, not through
// k8s.io/dynamic-resource-allocation/deviceattribute, whose readers take
// the machine's own /sys: discovery must run on fixture trees.
package dradevices

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"daq.io/eventbuilder/operator/internal/dradevices/sysfsemu"
	"daq.io/eventbuilder/operator/internal/readoutcards"
)

// The standard attributes (kubernetes.io/docs/reference/node/dra-standard-device-attributes).
const (
	AttrPCIBusID resourceapi.QualifiedName = "resource.kubernetes.io/pciBusID"
	AttrPCIeRoot resourceapi.QualifiedName = "resource.kubernetes.io/pcieRoot"
	AttrNUMANode resourceapi.QualifiedName = "resource.kubernetes.io/numaNode"
)

// The driver's own attributes (in its domain, so unqualified).
const (
	AttrKind       resourceapi.QualifiedName = "kind"       // KindRDMA or KindReadout
	AttrRDMADevice resourceapi.QualifiedName = "rdmaDevice" // e.g. mlx5_0: EB_RDMA_DEVICE
	AttrPort       resourceapi.QualifiedName = "port"
	AttrLinkLayer  resourceapi.QualifiedName = "linkLayer" // InfiniBand or Ethernet
	AttrPortState  resourceapi.QualifiedName = "portState" // ACTIVE, DOWN, ...
	AttrNetdev     resourceapi.QualifiedName = "netdev"
	AttrGID        resourceapi.QualifiedName = "gid"
	AttrGIDIndex   resourceapi.QualifiedName = "gidIndex"
	AttrCard       resourceapi.QualifiedName = "card"
	AttrStream     resourceapi.QualifiedName = "stream"
	AttrDevicePath resourceapi.QualifiedName = "devicePath"
	AttrEmulated   resourceapi.QualifiedName = "emulated"
)

// Kinds of device.
const (
	KindRDMA    = "rdma"
	KindReadout = "readout"
)

// Discover returns the node's devices under the sysfs root sys (/sys on a
// node): its RDMA NICs by device name, then its readout streams in card and
// stream order. An error names what does not check out and the fix.
// In a tree that sysfsemu emulated, every NIC is published as emulated.
func Discover(sys string, cards readoutcards.NodeConfig) ([]resourceapi.Device, error) {
	nics, err := rdmaDevices(sys)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(sys, sysfsemu.Marker)); err == nil {
		for _, nic := range nics {
			nic.Attributes[AttrEmulated] = boolean(true)
		}
	}
	streams, err := readoutDevices(sys, cards)
	if err != nil {
		return nil, err
	}
	devices := append(nics, streams...)
	seen := map[string]bool{}
	for _, d := range devices {
		if seen[d.Name] {
			return nil, fmt.Errorf("two devices are named %s once made DNS labels: rename a card or a stream", d.Name)
		}
		seen[d.Name] = true
	}
	return devices, nil
}

// rdmaDevices are the NICs under class/infiniband, each at its first port.
func rdmaDevices(sys string) ([]resourceapi.Device, error) {
	class := filepath.Join(sys, "class", "infiniband")
	entries, err := os.ReadDir(class)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // no RDMA subsystem: no NICs
	}
	if err != nil {
		return nil, err
	}
	var out []resourceapi.Device
	for _, entry := range entries {
		name := entry.Name()
		dir := filepath.Join(class, name)
		port, err := firstPort(dir)
		if err != nil {
			return nil, err
		}
		attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrKind:       str(KindRDMA),
			AttrRDMADevice: str(name),
			AttrPort:       integer(int64(port)),
		}
		portDir := filepath.Join(dir, "ports", strconv.Itoa(port))
		linkLayer := readTrimmed(filepath.Join(portDir, "link_layer"))
		attrs[AttrLinkLayer] = str(linkLayer)
		if state := readTrimmed(filepath.Join(portDir, "state")); state != "" {
			// "4: ACTIVE"
			attrs[AttrPortState] = str(strings.TrimSpace(state[strings.Index(state, ":")+1:]))
		}
		if index, gid, ok := pickGID(portDir, linkLayer); ok {
			attrs[AttrGIDIndex] = integer(int64(index))
			attrs[AttrGID] = str(gid)
			if netdev := readTrimmed(filepath.Join(portDir, "gid_attrs", "ndevs", strconv.Itoa(index))); netdev != "" {
				attrs[AttrNetdev] = str(netdev)
			}
		}
		pci, err := filepath.EvalSymlinks(filepath.Join(dir, "device"))
		if err != nil {
			return nil, fmt.Errorf("RDMA device %s: its PCI device (%s): %v", name, filepath.Join(dir, "device"), err)
		}
		if err := addPCI(attrs, sys, pci, -1); err != nil {
			return nil, fmt.Errorf("RDMA device %s: %v", name, err)
		}
		out = append(out, resourceapi.Device{Name: "nic-" + label(name), Attributes: attrs})
	}
	return out, nil
}

// readoutDevices are the streams of cards, one device each.
func readoutDevices(sys string, cards readoutcards.NodeConfig) ([]resourceapi.Device, error) {
	var out []resourceapi.Device
	for _, c := range cards.Cards {
		common := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrKind: str(KindReadout),
			AttrCard: str(c.Name),
		}
		if c.Device != "" {
			common[AttrDevicePath] = str(c.Device)
		}
		if cards.Emulated {
			common[AttrEmulated] = boolean(true)
		}
		if c.PCIAddress == "" {
			// Aligned by NUMA node alone (a claim falls back to numaNode).
			common[AttrNUMANode] = integer(int64(c.NUMA))
		} else {
			pci, err := filepath.EvalSymlinks(filepath.Join(sys, "bus", "pci", "devices", c.PCIAddress))
			if err != nil {
				return nil, fmt.Errorf("readout card %s: no PCI device %s under %s (%v): correct its pciAddress (lspci -D lists the card)",
					c.Name, c.PCIAddress, filepath.Join(sys, "bus", "pci", "devices"), err)
			}
			if err := addPCI(common, sys, pci, c.NUMA); err != nil {
				return nil, fmt.Errorf("readout card %s: %v", c.Name, err)
			}
		}
		for _, s := range c.Streams {
			attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{AttrStream: str(s)}
			for k, v := range common {
				attrs[k] = v
			}
			out = append(out, resourceapi.Device{Name: "stream-" + label(c.Name) + "-" + label(s), Attributes: attrs})
		}
	}
	for _, d := range out {
		if len(d.Name) > 63 {
			return nil, fmt.Errorf("device name %s is over 63 characters: shorten its card or stream name", d.Name)
		}
	}
	return out, nil
}

// addPCI sets the PCI attributes of the device whose directory is pci (a
// resolved path under sys/devices): its bus ID, its root complex (the
// pci<domain>:<bus> directory it hangs off) and its NUMA node, unless the
// kernel says it has none (-1). configured >= 0 is the NUMA node a
// configuration gives it, which must agree.
func addPCI(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, sys, pci string, configured int) error {
	devices, err := filepath.EvalSymlinks(filepath.Join(sys, "devices"))
	if err != nil {
		return fmt.Errorf("no %s: %v", filepath.Join(sys, "devices"), err)
	}
	rel, err := filepath.Rel(devices, pci)
	root, _, _ := strings.Cut(rel, string(filepath.Separator))
	if err != nil || !pcieRootPattern.MatchString(root) {
		return fmt.Errorf("%s is not under a PCIe root complex (%s/pci<domain>:<bus>/...)", pci, devices)
	}
	busID := filepath.Base(pci)
	if !readoutcards.PCIAddressPattern.MatchString(busID) {
		return fmt.Errorf("%s does not end in a PCI address", pci)
	}
	attrs[AttrPCIBusID] = str(busID)
	attrs[AttrPCIeRoot] = str(root)
	numa, err := strconv.Atoi(readTrimmed(filepath.Join(pci, "numa_node")))
	if err != nil {
		numa = -1
	}
	if configured >= 0 && numa >= 0 && numa != configured {
		return fmt.Errorf("configured on NUMA node %d, but the kernel puts %s on node %d: correct its numa", configured, busID, numa)
	}
	if numa < 0 {
		numa = configured
	}
	if numa >= 0 {
		attrs[AttrNUMANode] = integer(int64(numa))
	}
	return nil
}

var pcieRootPattern = regexp.MustCompile(`^pci[0-9a-f]{4}:[0-9a-f]{2}$`)

// firstPort is the lowest-numbered port of an RDMA device.
func firstPort(dir string) (int, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "ports"))
	if err != nil {
		return 0, fmt.Errorf("RDMA device %s has no ports: %v", filepath.Base(dir), err)
	}
	var ports []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			ports = append(ports, n)
		}
	}
	if len(ports) == 0 {
		return 0, fmt.Errorf("RDMA device %s has no ports", filepath.Base(dir))
	}
	return slices.Min(ports), nil
}

// pickGID is the GID a builder addresses its peers with (the builder's
// pick_gid_index): on RoCE a RoCE v2 entry holding an IPv4-mapped address
// first, then any RoCE v2 entry that is set and not link-local; on
// InfiniBand entry 0.
func pickGID(portDir, linkLayer string) (int, string, bool) {
	entries, _ := os.ReadDir(filepath.Join(portDir, "gids"))
	type candidate struct {
		index int
		gid   string
		rank  int
	}
	var best *candidate
	for _, e := range entries {
		index, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		gid := readTrimmed(filepath.Join(portDir, "gids", e.Name()))
		if gid == "" || gid == "0000:0000:0000:0000:0000:0000:0000:0000" {
			continue
		}
		rank := 0
		if linkLayer == "Ethernet" {
			if readTrimmed(filepath.Join(portDir, "gid_attrs", "types", e.Name())) != "RoCE v2" || strings.HasPrefix(gid, "fe80:") {
				continue
			}
			if !strings.HasPrefix(gid, "0000:0000:0000:0000:0000:ffff:") {
				rank = 1
			}
		} else if index != 0 {
			continue
		}
		if best == nil || rank < best.rank || (rank == best.rank && index < best.index) {
			best = &candidate{index, gid, rank}
		}
	}
	if best == nil {
		return 0, "", false
	}
	return best.index, best.gid, true
}

// label makes a name a DNS label's part: lower case, '-' for anything else.
func label(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
func integer(i int64) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{IntValue: &i}
}
func boolean(b bool) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{BoolValue: &b} }
