// Package sysfstest builds fixture sysfs trees laid out as the kernel's
// (sysfsemu's, without its emulation marker: they stand for real servers),
// for tests of what reads one (dradevices, dradriver).
package sysfstest

import (
	"testing"

	"daq.io/eventbuilder/operator/internal/dradevices/sysfsemu"
)

// Tree is a fixture sysfs in a directory of a test's.
type Tree struct {
	t    testing.TB
	tree *sysfsemu.Tree
	// Root is the tree's root, where a node has /sys.
	Root string
}

// New makes an empty tree in a directory of t's.
func New(t testing.TB) *Tree {
	tree, err := sysfsemu.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &Tree{t: t, tree: tree, Root: tree.Root}
}

// Write writes a file of the tree, its directories made.
func (s *Tree) Write(rel, content string) {
	if err := s.tree.Write(rel, content); err != nil {
		s.t.Fatal(err)
	}
}

// PCI adds a PCI device under root complex root (pci<domain>:<bus>) and
// returns its path relative to the tree.
func (s *Tree) PCI(root, busID string, numa int) string {
	rel, err := s.tree.PCI(root, busID, numa)
	if err != nil {
		s.t.Fatal(err)
	}
	return rel
}

// NIC adds RDMA device name on the PCI device at pciRel, port 1, with
// gids (index -> "type gid netdev"; type "IB" on InfiniBand).
func (s *Tree) NIC(pciRel, name, linkLayer, state string, gids map[int]string) {
	if err := s.tree.NIC(pciRel, name, linkLayer, state, gids); err != nil {
		s.t.Fatal(err)
	}
}
