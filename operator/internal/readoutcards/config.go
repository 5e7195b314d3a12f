// Package readoutcards is the readout-card device plugin's logic: which
// readout streams a node's cards offer, as one extended resource per NUMA
// node (a stream is a device, so a pod asks for the streams it reads), and
// what a container allocated some of them is given. It is pure: the kubelet
// gRPC plumbing is in server.go.
package readoutcards

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// FarmConfig is the plugin's configuration for every node: the chart
// renders it from values into a ConfigMap that each node's plugin reads,
// taking its own entry (by node name).
type FarmConfig struct {
	// ResourcePrefix names the resources: <prefix>-numa<N>, e.g.
	// daq.io/tell40-numa0 (spec.resources.readout.resource
	// daq.io/tell40-numa{numa} of a run).
	ResourcePrefix string `json:"resourcePrefix"`
	// Nodes maps a node name to its cards.
	Nodes map[string]NodeConfig `json:"nodes"`
}

// NodeConfig is one node's readout cards.
type NodeConfig struct {
	// Emulated cards exist only in this configuration (a test cluster
	// without cards): they have no device node and are always healthy.
	Emulated bool   `json:"emulated,omitempty"`
	Cards    []Card `json:"cards"`
}

// Card is one readout card: the device node its driver opens, the NUMA
// node its PCIe slot hangs off, the streams (fibres, detector sources) it
// reads, named as in the Fabric's endpoints; and its PCI address, from
// which the DRA driver reads its PCIe root (internal/dradevices).
type Card struct {
	Name       string   `json:"name"`
	NUMA       int      `json:"numa"`
	Device     string   `json:"device,omitempty"`
	PCIAddress string   `json:"pciAddress,omitempty"`
	Streams    []string `json:"streams"`
}

var (
	prefixPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[-A-Za-z0-9_.]+$`)
	namePattern   = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_.]*$`)
	// PCIAddressPattern is an extended BDF, domain:bus:device.function.
	PCIAddressPattern = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$`)
)

// ParseConfig reads a FarmConfig and checks it; errors name the field and
// the fix.
func ParseConfig(data []byte) (FarmConfig, error) {
	var cfg FarmConfig
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, fmt.Errorf("readout card configuration: %v (expected {\"resourcePrefix\": ..., \"nodes\": {node: {\"cards\": [...]}}})", err)
	}
	if !prefixPattern.MatchString(cfg.ResourcePrefix) {
		return cfg, fmt.Errorf("resourcePrefix %q: expected an extended resource name such as daq.io/tell40 (the plugin adds -numa<N>)", cfg.ResourcePrefix)
	}
	for node, nc := range cfg.Nodes {
		streams := map[string]string{}
		for i, c := range nc.Cards {
			at := fmt.Sprintf("nodes[%s].cards[%d]", node, i)
			switch {
			case !namePattern.MatchString(c.Name):
				return cfg, fmt.Errorf("%s.name %q: expected letters, digits, '-', '_' or '.'", at, c.Name)
			case c.NUMA < 0:
				return cfg, fmt.Errorf("%s.numa %d: expected the card's NUMA node, 0 or more", at, c.NUMA)
			case !nc.Emulated && !strings.HasPrefix(c.Device, "/dev/"):
				return cfg, fmt.Errorf("%s.device %q: expected the card's /dev node, which its driver opens (or set nodes[%s].emulated for cards that exist only here)", at, c.Device, node)
			case nc.Emulated && c.Device != "":
				return cfg, fmt.Errorf("%s.device %q: an emulated card has no device node; drop it, or unset nodes[%s].emulated", at, c.Device, node)
			case c.PCIAddress != "" && !PCIAddressPattern.MatchString(c.PCIAddress):
				return cfg, fmt.Errorf("%s.pciAddress %q: expected the card's PCI address as lspci -D shows it, e.g. 0000:3b:00.0", at, c.PCIAddress)
			case len(c.Streams) == 0:
				return cfg, fmt.Errorf("%s.streams: a card reads at least one stream; list them as the Fabric's endpoints name them", at)
			}
			for _, s := range c.Streams {
				if !namePattern.MatchString(s) {
					return cfg, fmt.Errorf("%s.streams: %q is not a stream name (letters, digits, '-', '_' or '.')", at, s)
				}
				if other, dup := streams[s]; dup {
					return cfg, fmt.Errorf("%s.streams: stream %q is also read by card %s; each fibre goes into one card", at, s, other)
				}
				streams[s] = c.Name
			}
		}
	}
	return cfg, nil
}

// Device is one readout stream offered as a device.
type Device struct {
	// ID is <card>.<stream>.
	ID     string
	Card   string
	Stream string
	// Path is the card's device node; empty for an emulated card.
	Path string
}

// Resource is the streams of one NUMA node's cards, offered under one name.
type Resource struct {
	Name    string
	NUMA    int
	Devices []Device
	// Unaligned: the machine has no such NUMA node (a test cluster's
	// emulated dual-socket server on a one-node host), so the devices go
	// to the kubelet without topology: a Topology Manager policy such as
	// single-numa-node would refuse every pod asking for them otherwise.
	Unaligned bool
}

// Resources are the node's resources, one per NUMA node with cards, in
// NUMA order, each with its streams in card and stream order.
func Resources(prefix string, nc NodeConfig) []Resource {
	byNUMA := map[int]*Resource{}
	for _, c := range nc.Cards {
		r := byNUMA[c.NUMA]
		if r == nil {
			r = &Resource{Name: fmt.Sprintf("%s-numa%d", prefix, c.NUMA), NUMA: c.NUMA}
			byNUMA[c.NUMA] = r
		}
		for _, s := range c.Streams {
			r.Devices = append(r.Devices, Device{ID: c.Name + "." + s, Card: c.Name, Stream: s, Path: c.Device})
		}
	}
	var out []Resource
	for _, r := range byNUMA {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Resource) int { return a.NUMA - b.NUMA })
	return out
}
