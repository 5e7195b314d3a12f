package dradevices

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"daq.io/eventbuilder/operator/internal/readoutcards"
)

// CDIKind is the kind of the CDI devices the driver writes: one per
// prepared claim, named by the claim's UID (never reused, so a runtime's
// cached spec is never taken for another claim's).
const CDIKind = "eventbuilder.daq.io/claim"

// EnvRDMADevice names the RDMA device a builder opens (eb-builder reads it
// as --rdma-device), as the operator sets it from the Fabric in
// device-plugin mode.
const EnvRDMADevice = "EB_RDMA_DEVICE"

// CDIDeviceID is the fully qualified CDI name of a claim's device, which
// the kubelet hands the container runtime.
func CDIDeviceID(claimUID string) string { return CDIKind + "=" + claimUID }

// VerbsNodes maps each RDMA device under the sysfs root sys to the verbs
// device node a process opens it through (/dev/infiniband/uverbsN, from
// class/infiniband_verbs/uverbsN/ibdev).
func VerbsNodes(sys string) (map[string]string, error) {
	class := filepath.Join(sys, "class", "infiniband_verbs")
	entries, err := os.ReadDir(class)
	if os.IsNotExist(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	nodes := map[string]string{}
	for _, e := range entries {
		if ibdev := readTrimmed(filepath.Join(class, e.Name(), "ibdev")); ibdev != "" {
			nodes[ibdev] = "/dev/infiniband/" + e.Name()
		}
	}
	return nodes, nil
}

// ClaimSpec is the CDI spec of one prepared claim: a single device, named
// by the claim's UID, giving the container everything allocated to the
// claim together (one device per claim, so no two devices' environments
// override each other): the RDMA NIC as EB_RDMA_DEVICE with its verbs
// device node, and the readout streams, cards and card device nodes as
// the readout device plugin gives them (readoutcards.Allocation); an
// emulated NIC (sysfsemu) has no device node, only its name.
// allocated are the claim's device names in this driver's pool on the
// node; devices and verbs are what discovery found there.
func ClaimSpec(claimUID string, allocated []string, devices []resourceapi.Device, verbs map[string]string) (*cdi.Spec, error) {
	var edits cdi.ContainerEdits
	var nic string
	var streams, cards, paths []string
	emulated := false
	for _, name := range allocated {
		i := slices.IndexFunc(devices, func(d resourceapi.Device) bool { return d.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("claim %s was allocated device %s, which this node does not publish (any more): "+
				"delete the pod so that its claim is allocated again", claimUID, name)
		}
		attrs := devices[i].Attributes
		switch value(attrs, AttrKind) {
		case KindRDMA:
			if nic != "" {
				return nil, fmt.Errorf("claim %s was allocated two RDMA NICs, %s and %s: a builder opens one "+
					"(EB_RDMA_DEVICE); ask for count 1", claimUID, nic, value(attrs, AttrRDMADevice))
			}
			nic = value(attrs, AttrRDMADevice)
			edits.Env = append(edits.Env, EnvRDMADevice+"="+nic)
			if emulatedDevice(attrs) {
				break // nothing to open: no device node
			}
			node, ok := verbs[nic]
			if !ok {
				return nil, fmt.Errorf("RDMA device %s has no verbs device node (no class/infiniband_verbs entry names it): "+
					"load the ib_uverbs module on the node", nic)
			}
			edits.DeviceNodes = append(edits.DeviceNodes, &cdi.DeviceNode{Path: node})
		case KindReadout:
			streams = append(streams, value(attrs, AttrStream))
			if card := value(attrs, AttrCard); !slices.Contains(cards, card) {
				cards = append(cards, card)
			}
			if path := value(attrs, AttrDevicePath); path != "" && !slices.Contains(paths, path) {
				paths = append(paths, path)
				edits.DeviceNodes = append(edits.DeviceNodes, &cdi.DeviceNode{Path: path})
			}
			if emulatedDevice(attrs) {
				emulated = true
			}
		default:
			return nil, fmt.Errorf("device %s has no kind this driver knows", name)
		}
	}
	if len(streams) > 0 {
		edits.Env = append(edits.Env, readoutcards.EnvStreams+"="+strings.Join(streams, ","),
			readoutcards.EnvCards+"="+strings.Join(cards, ","), readoutcards.EnvDevices+"="+strings.Join(paths, ","))
		if emulated {
			edits.Env = append(edits.Env, readoutcards.EnvEmulated+"=true")
		}
	}
	spec := &cdi.Spec{Kind: CDIKind, Devices: []cdi.Device{{Name: claimUID, ContainerEdits: edits}}}
	version, err := cdi.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, err
	}
	spec.Version = version
	return spec, nil
}

func value(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, name resourceapi.QualifiedName) string {
	if v, ok := attrs[name]; ok && v.StringValue != nil {
		return *v.StringValue
	}
	return ""
}

func emulatedDevice(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) bool {
	v, ok := attrs[AttrEmulated]
	return ok && v.BoolValue != nil && *v.BoolValue
}
