package builderpod

import (
	"encoding/json"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// NetworkStatusAnnotation is where Multus (any implementation of the
// Network Plumbing Working Group's interface) says what it attached to a
// pod: each network's name, interface and addresses.
const NetworkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status"

// networkStatus is one entry of that annotation.
type networkStatus struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface"`
	IPs       []string `json:"ips"`
}

// DataAddress is the pod's IPv4 address on the run's data network: that of
// interface eb0 (NetworkInterface) in its network-status annotation. The
// error says why there is none (no annotation yet, eb0 not attached, no
// IPv4 address).
func DataAddress(pod *corev1.Pod) (string, error) {
	raw, ok := pod.Annotations[NetworkStatusAnnotation]
	if !ok {
		return "", fmt.Errorf("no %s annotation: the data network is not attached (is Multus running on node %s?)",
			NetworkStatusAnnotation, pod.Spec.NodeName)
	}
	var statuses []networkStatus
	if err := json.Unmarshal([]byte(raw), &statuses); err != nil {
		return "", fmt.Errorf("annotation %s does not parse: %v", NetworkStatusAnnotation, err)
	}
	for _, s := range statuses {
		if s.Interface != NetworkInterface {
			continue
		}
		for _, ip := range s.IPs {
			if a, err := netip.ParseAddr(ip); err == nil && a.Is4() {
				return a.String(), nil
			}
		}
		return "", fmt.Errorf("interface %s (network %s) has no IPv4 address (ips %v): the data plane dials IPv4", NetworkInterface, s.Name, s.IPs)
	}
	return "", fmt.Errorf("annotation %s lists no interface %s: the data network is not attached", NetworkStatusAnnotation, NetworkInterface)
}
