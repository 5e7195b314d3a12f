package dradevices

import (
	resourceapi "k8s.io/api/resource/v1"
)

// Healthy says whether a published device can serve a claim: a NIC while
// its port is ACTIVE; a readout stream while its card's device node exists
// (exists is asked of the path as the node has it), or always for a card
// without one (emulated), as the readout device plugin judges them.
func Healthy(d resourceapi.Device, exists func(path string) bool) bool {
	switch value(d.Attributes, AttrKind) {
	case KindRDMA:
		return value(d.Attributes, AttrPortState) == "ACTIVE"
	case KindReadout:
		path := value(d.Attributes, AttrDevicePath)
		return path == "" || exists(path)
	}
	return false
}
