// Package sysfstest builds fixture sysfs trees laid out as the kernel's,
// for tests of what reads one (dradevices, dradriver).
package sysfstest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Tree is a fixture sysfs laid out as the kernel's: PCI devices under
// devices/<root complex>/<bridge>/<bus id> with their numa_node, linked from
// bus/pci/devices; RDMA devices under their PCI device's infiniband/,
// linked from class/infiniband, each with a device link back.
type Tree struct {
	t testing.TB
	// Root is the tree's root, where a node has /sys.
	Root string
}

// New makes an empty tree in a directory of t's.
func New(t testing.TB) *Tree {
	s := &Tree{t: t, Root: t.TempDir()}
	s.mkdir("devices")
	s.mkdir("bus/pci/devices")
	return s
}

func (s *Tree) mkdir(rel string) string {
	dir := filepath.Join(s.Root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	return dir
}

// Write writes a file of the tree, its directories made.
func (s *Tree) Write(rel, content string) {
	s.mkdir(filepath.Dir(rel))
	if err := os.WriteFile(filepath.Join(s.Root, rel), []byte(content+"\n"), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func (s *Tree) link(rel, target string) {
	s.mkdir(filepath.Dir(rel))
	if err := os.Symlink(target, filepath.Join(s.Root, rel)); err != nil {
		s.t.Fatal(err)
	}
}

// PCI adds a PCI device under root complex root (pci<domain>:<bus>) and
// returns its path relative to the tree.
func (s *Tree) PCI(root, busID string, numa int) string {
	rel := filepath.Join("devices", root, root[3:]+":00.0", busID)
	s.Write(filepath.Join(rel, "numa_node"), strconv.Itoa(numa))
	s.link(filepath.Join("bus/pci/devices", busID), filepath.Join("../../..", rel))
	return rel
}

// NIC adds RDMA device name on the PCI device at pciRel, port 1, with
// gids (index -> "type gid netdev"; type "IB" on InfiniBand).
func (s *Tree) NIC(pciRel, name, linkLayer, state string, gids map[int]string) {
	rel := filepath.Join(pciRel, "infiniband", name)
	port := filepath.Join(rel, "ports", "1")
	s.Write(filepath.Join(port, "link_layer"), linkLayer)
	s.Write(filepath.Join(port, "state"), state)
	for index, spec := range gids {
		parts := strings.Fields(spec)
		s.Write(filepath.Join(port, "gids", strconv.Itoa(index)), parts[1])
		if parts[0] != "IB" {
			s.Write(filepath.Join(port, "gid_attrs", "types", strconv.Itoa(index)), strings.ReplaceAll(parts[0], "_", " "))
		}
		if len(parts) > 2 {
			s.Write(filepath.Join(port, "gid_attrs", "ndevs", strconv.Itoa(index)), parts[2])
		}
	}
	s.link(filepath.Join(rel, "device"), "../..")
	s.link(filepath.Join("class/infiniband", name), filepath.Join("../..", rel))
}
