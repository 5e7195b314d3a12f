package main

import (
	"encoding/json"
	"fmt"
	"strings"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// The Network Plumbing Working Group's pod annotations (its "de-facto
// standard" v1.2, the interface Multus implements).
const (
	networksAnnotation      = "k8s.v1.cni.cncf.io/networks"
	networkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status"
)

// selection is one network a pod asks for: the standard's
// NetworkSelectionElement, the fields this emulation honours.
type selection struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Interface string `json:"interface,omitempty"`
}

// parseSelections reads a pod's networks annotation, in either of the
// standard's forms: a JSON list of selection elements, or a comma-separated
// list of [namespace/]name[@interface]. A selection without a namespace is
// in the pod's, and one without an interface gets net1, net2, ... by its
// place, as Multus names them.
func parseSelections(annotation, podNamespace string) ([]selection, error) {
	text := strings.TrimSpace(annotation)
	var selections []selection
	if strings.HasPrefix(text, "[") {
		decoder := json.NewDecoder(strings.NewReader(text))
		decoder.DisallowUnknownFields()
		if err := decoder.Decode(&selections); err != nil {
			return nil, fmt.Errorf("annotation %s: %v (this emulation honours name, namespace and interface)", networksAnnotation, err)
		}
	} else {
		for _, item := range strings.Split(text, ",") {
			item = strings.TrimSpace(item)
			var s selection
			if rest, iface, ok := strings.Cut(item, "@"); ok {
				item, s.Interface = rest, iface
			}
			if ns, name, ok := strings.Cut(item, "/"); ok {
				s.Namespace, s.Name = ns, name
			} else {
				s.Name = item
			}
			selections = append(selections, s)
		}
	}
	seen := map[string]bool{}
	for i := range selections {
		s := &selections[i]
		if s.Name == "" {
			return nil, fmt.Errorf("annotation %s: element %d names no network", networksAnnotation, i+1)
		}
		if s.Namespace == "" {
			s.Namespace = podNamespace
		}
		if s.Interface == "" {
			s.Interface = fmt.Sprintf("net%d", i+1)
		}
		if s.Interface == "eth0" || seen[s.Interface] {
			return nil, fmt.Errorf("annotation %s: interface %q of network %s/%s is taken (eth0 is the pod network's; each network needs its own)",
				networksAnnotation, s.Interface, s.Namespace, s.Name)
		}
		seen[s.Interface] = true
	}
	return selections, nil
}

// delegateConfig is the CNI configuration in a NetworkAttachmentDefinition's
// spec.config, ready to hand to its plugin: one plugin (a conflist is
// refused: this emulation delegates to one), named after the definition
// where the config names nothing.
func delegateConfig(config string, s selection) (pluginType string, conf []byte, err error) {
	var fields map[string]any
	if err := json.Unmarshal([]byte(config), &fields); err != nil {
		return "", nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: spec.config is not JSON: %v", s.Namespace, s.Name, err)
	}
	if _, ok := fields["plugins"]; ok {
		return "", nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: spec.config is a plugin list; this emulation delegates to one plugin (give its config)", s.Namespace, s.Name)
	}
	pluginType, _ = fields["type"].(string)
	if pluginType == "" {
		return "", nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: spec.config names no plugin (\"type\")", s.Namespace, s.Name)
	}
	if name, _ := fields["name"].(string); name == "" {
		fields["name"] = s.Name
	}
	conf, err = json.Marshal(fields)
	return pluginType, conf, err
}

// networkStatus is one element of the network-status annotation.
type networkStatus struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface"`
	IPs       []string `json:"ips,omitempty"`
	Mac       string   `json:"mac,omitempty"`
	Default   bool     `json:"default,omitempty"`
}

// statusOf says what a CNI result attached as interface iface: its
// addresses (those the result gives that interface, or give no interface)
// and its MAC.
func statusOf(name, iface string, result cnitypes.Result, isDefault bool) (networkStatus, error) {
	status := networkStatus{Name: name, Interface: iface, Default: isDefault}
	r, err := current.NewResultFromResult(result)
	if err != nil {
		return status, fmt.Errorf("network %s: the plugin's result does not convert: %v", name, err)
	}
	index := -1
	for i, in := range r.Interfaces {
		if in.Name == iface && in.Sandbox != "" {
			index, status.Mac = i, in.Mac
		}
	}
	for _, ip := range r.IPs {
		if ip.Interface == nil || *ip.Interface == index {
			status.IPs = append(status.IPs, ip.Address.IP.String())
		}
	}
	return status, nil
}
