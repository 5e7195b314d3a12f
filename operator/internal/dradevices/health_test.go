package dradevices

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

func TestHealthyNICsAreActiveAndStreamsHaveTheirCard(t *testing.T) {
	device := func(attrs map[resourceapi.QualifiedName]string) resourceapi.Device {
		d := resourceapi.Device{Name: "d", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
		for k, v := range attrs {
			d.Attributes[k] = str(v)
		}
		return d
	}
	exists := func(path string) bool { return path == "/dev/pcie40_0" }
	for _, tc := range []struct {
		name  string
		attrs map[resourceapi.QualifiedName]string
		want  bool
	}{
		{"active NIC", map[resourceapi.QualifiedName]string{AttrKind: KindRDMA, AttrPortState: "ACTIVE"}, true},
		{"NIC port down", map[resourceapi.QualifiedName]string{AttrKind: KindRDMA, AttrPortState: "DOWN"}, false},
		{"NIC without a port state", map[resourceapi.QualifiedName]string{AttrKind: KindRDMA}, false},
		{"stream of a present card", map[resourceapi.QualifiedName]string{AttrKind: KindReadout, AttrDevicePath: "/dev/pcie40_0"}, true},
		{"stream of a card gone", map[resourceapi.QualifiedName]string{AttrKind: KindReadout, AttrDevicePath: "/dev/pcie40_1"}, false},
		{"stream of an emulated card", map[resourceapi.QualifiedName]string{AttrKind: KindReadout}, true},
		{"unknown kind", map[resourceapi.QualifiedName]string{AttrKind: "gpu"}, false},
	} {
		if got := Healthy(device(tc.attrs), exists); got != tc.want {
			t.Errorf("%s: healthy %v, want %v", tc.name, got, tc.want)
		}
	}
}
