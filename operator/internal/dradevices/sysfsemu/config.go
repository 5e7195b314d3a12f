package sysfsemu

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"daq.io/eventbuilder/operator/internal/readoutcards"
)

// Config is the emulated servers of a test cluster, by node name (the
// chart's draDriver.emulatedSysfs): the PCI devices each has, some of them
// RDMA NICs; readout cards name theirs by pciAddress in the readout
// configuration.
type Config struct {
	Nodes map[string]Server `json:"nodes"`
}

// Server is one emulated server.
type Server struct {
	PCIDevices []PCIDevice `json:"pciDevices"`
}

// PCIDevice is a PCI device of an emulated server.
type PCIDevice struct {
	// Address is its PCI address, e.g. 0000:3b:00.0.
	Address string `json:"address"`
	// Root is the PCIe root complex it hangs off, e.g. pci0000:3a.
	Root string `json:"root"`
	NUMA int    `json:"numa"`
	// RDMADevice, if set, makes it an RDMA NIC of that name (RoCE, port 1
	// active, no verbs device node: nothing can open it).
	RDMADevice string `json:"rdmaDevice,omitempty"`
}

var (
	rootPattern = regexp.MustCompile(`^pci[0-9a-f]{4}:[0-9a-f]{2}$`)
	namePattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)
)

// ParseConfig reads and checks a configuration; an error names the field
// and the fix.
func ParseConfig(raw []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("not an emulated sysfs configuration ({\"nodes\": {<node>: {\"pciDevices\": [...]}}}): %v", err)
	}
	for node, srv := range c.Nodes {
		seen := map[string]bool{}
		for i, d := range srv.PCIDevices {
			at := fmt.Sprintf("nodes[%s].pciDevices[%d]", node, i)
			switch {
			case !readoutcards.PCIAddressPattern.MatchString(d.Address):
				return c, fmt.Errorf("%s.address %q: expected a PCI address as lspci -D prints it, e.g. 0000:3b:00.0", at, d.Address)
			case seen[d.Address]:
				return c, fmt.Errorf("%s.address %s is listed twice on node %s", at, d.Address, node)
			case !rootPattern.MatchString(d.Root):
				return c, fmt.Errorf("%s.root %q: expected a PCIe root complex, pci<domain>:<bus>, e.g. pci0000:3a", at, d.Root)
			case d.NUMA < 0:
				return c, fmt.Errorf("%s.numa %d: expected the NUMA node, 0 or more", at, d.NUMA)
			case d.RDMADevice != "" && !namePattern.MatchString(d.RDMADevice):
				return c, fmt.Errorf("%s.rdmaDevice %q: expected an RDMA device name such as mlx5_0", at, d.RDMADevice)
			}
			seen[d.Address] = true
		}
	}
	return c, nil
}

// Emulate writes the server's tree at root, marked as emulated.
func (srv Server) Emulate(root string) error {
	s, err := New(root)
	if err != nil {
		return err
	}
	for _, d := range srv.PCIDevices {
		rel, err := s.PCI(d.Root, d.Address, d.NUMA)
		if err != nil {
			return err
		}
		if d.RDMADevice != "" {
			if err := s.NIC(rel, d.RDMADevice, "Ethernet", "4: ACTIVE", nil); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(filepath.Join(root, Marker), []byte("this tree emulates a server's sysfs (eventbuilder-dra --emulated-sysfs)\n"), 0o644)
}
