// Package sysfsemu writes sysfs trees laid out as the kernel's, for what
// reads one (dradevices): fixture servers in tests (sysfstest), and on a
// cluster without the hardware (kind), an emulated server's tree that the
// DRA driver reads in place of /sys (eventbuilder-dra --emulated-sysfs).
// An emulated tree says so (its Marker file), and every device found in it
// is published as emulated.
package sysfsemu

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Marker is the file at the root of an emulated tree.
const Marker = "eventbuilder-emulated"

// Tree is a sysfs laid out as the kernel's: PCI devices under
// devices/<root complex>/<bridge>/<bus id> with their numa_node, linked from
// bus/pci/devices; RDMA devices under their PCI device's infiniband/,
// linked from class/infiniband, each with a device link back.
type Tree struct {
	// Root is the tree's root, where a node has /sys.
	Root string
}

// New makes an empty tree at root.
func New(root string) (*Tree, error) {
	s := &Tree{Root: root}
	for _, dir := range []string{"devices", "bus/pci/devices"} {
		if err := s.mkdir(dir); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Tree) mkdir(rel string) error {
	return os.MkdirAll(filepath.Join(s.Root, rel), 0o755)
}

// Write writes a file of the tree, its directories made.
func (s *Tree) Write(rel, content string) error {
	if err := s.mkdir(filepath.Dir(rel)); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Root, rel), []byte(content+"\n"), 0o644)
}

func (s *Tree) link(rel, target string) error {
	if err := s.mkdir(filepath.Dir(rel)); err != nil {
		return err
	}
	return os.Symlink(target, filepath.Join(s.Root, rel))
}

// PCI adds a PCI device under root complex root (pci<domain>:<bus>) and
// returns its path relative to the tree.
func (s *Tree) PCI(root, busID string, numa int) (string, error) {
	rel := filepath.Join("devices", root, root[3:]+":00.0", busID)
	if err := s.Write(filepath.Join(rel, "numa_node"), strconv.Itoa(numa)); err != nil {
		return "", err
	}
	return rel, s.link(filepath.Join("bus/pci/devices", busID), filepath.Join("../../..", rel))
}

// NIC adds RDMA device name on the PCI device at pciRel, port 1, with
// gids (index -> "type gid netdev"; type "IB" on InfiniBand).
func (s *Tree) NIC(pciRel, name, linkLayer, state string, gids map[int]string) error {
	rel := filepath.Join(pciRel, "infiniband", name)
	port := filepath.Join(rel, "ports", "1")
	files := map[string]string{filepath.Join(port, "link_layer"): linkLayer, filepath.Join(port, "state"): state}
	for index, spec := range gids {
		parts := strings.Fields(spec)
		files[filepath.Join(port, "gids", strconv.Itoa(index))] = parts[1]
		if parts[0] != "IB" {
			files[filepath.Join(port, "gid_attrs", "types", strconv.Itoa(index))] = strings.ReplaceAll(parts[0], "_", " ")
		}
		if len(parts) > 2 {
			files[filepath.Join(port, "gid_attrs", "ndevs", strconv.Itoa(index))] = parts[2]
		}
	}
	for path, content := range files {
		if err := s.Write(path, content); err != nil {
			return err
		}
	}
	if err := s.link(filepath.Join(rel, "device"), "../.."); err != nil {
		return err
	}
	return s.link(filepath.Join("class/infiniband", name), filepath.Join("../..", rel))
}
