package builderpod

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// The DRA driver's DeviceClasses (the chart's draDriver) and the names of a
// builder claim's requests.
const (
	RDMADeviceClass    = "eventbuilder-rdma"
	ReadoutDeviceClass = "eventbuilder-readout"
	RequestNIC         = "nic"
	RequestReadout     = "readout"
)

// The standard attributes a claim's devices are aligned on.
const (
	AlignPCIeRoot resourceapi.FullyQualifiedName = "resource.kubernetes.io/pcieRoot"
	AlignNUMANode resourceapi.FullyQualifiedName = "resource.kubernetes.io/numaNode"
)

// ClaimName is the name, in the pod and its containers, of a unit's claim.
const ClaimName = "devices"

// claimTemplateName names the ResourceClaimTemplate of the pods on an
// endpoint (the pod of a rank that moves to a spare claims the spare's own
// devices) by what it asks for: a template is immutable, so one asking
// otherwise (alignOn, the Fabric's NIC or streams edited) is another
// template, and its new name in the pod's spec replaces the pods made
// from the old one.
func claimTemplateName(run, endpoint string, spec resourceapi.ResourceClaimSpec) string {
	b, _ := json.Marshal(spec) // plain API types: cannot fail
	sum := sha256.Sum256(b)
	return run + "-" + endpoint + "-" + hex.EncodeToString(sum[:4])
}

// alignment is the attribute spec.resources.claims.alignOn names.
func alignment(c *ebv1.DeviceClaims) resourceapi.FullyQualifiedName {
	if c.AlignOn == ebv1.AlignNUMANode {
		return AlignNUMANode
	}
	return AlignPCIeRoot
}

// ClaimTemplate is the ResourceClaimTemplate of a unit's pod at place in
// the run's claims mode (spec.resources.claims), or nil when it has nothing
// to claim: the endpoint's NIC (its rdmaDevice) and, when the unit reads
// streams, exactly the endpoint's streams, all sharing the attribute
// alignOn names (the PCIe root, or where cards and NICs are not on one root
// by design, the NUMA node), so that the scheduler places the pod only
// where such a set exists and says why it does not. Without a NIC or
// without streams there is nothing to align: the one request stands alone.
func ClaimTemplate(run *ebv1.EventBuilderRun, place *Placement) *resourceapi.ResourceClaimTemplate {
	claims := run.Spec.Resources.Claims
	if claims == nil || place == nil {
		return nil
	}
	var requests []resourceapi.DeviceRequest
	if place.RDMADevice != "" {
		requests = append(requests, resourceapi.DeviceRequest{Name: RequestNIC, Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: RDMADeviceClass,
			Selectors:       []resourceapi.DeviceSelector{celSelector(`device.attributes["eventbuilder.daq.io"].rdmaDevice == ` + strconv.Quote(place.RDMADevice))},
			// Explicit, as the API server would default them: what is
			// rendered is what is stored.
			AllocationMode: resourceapi.DeviceAllocationModeExactCount,
			Count:          1,
		}})
	}
	if len(place.Streams) > 0 && readsStreams(run, place) {
		quoted := make([]string, len(place.Streams))
		for i, s := range place.Streams {
			quoted[i] = strconv.Quote(s)
		}
		requests = append(requests, resourceapi.DeviceRequest{Name: RequestReadout, Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: ReadoutDeviceClass,
			Selectors:       []resourceapi.DeviceSelector{celSelector(fmt.Sprintf(`device.attributes["eventbuilder.daq.io"].stream in [%s]`, strings.Join(quoted, ", ")))},
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           int64(len(place.Streams)),
		}})
	}
	if len(requests) == 0 {
		return nil
	}
	var constraints []resourceapi.DeviceConstraint
	if len(requests) == 2 {
		align := alignment(claims)
		constraints = []resourceapi.DeviceConstraint{{Requests: []string{RequestNIC, RequestReadout}, MatchAttribute: &align}}
	}
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests, Constraints: constraints}}
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: ownedBy(run, claimTemplateName(run.Name, place.Endpoint, spec)),
		Spec: resourceapi.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelEndpoint: place.Endpoint}},
			Spec:       spec,
		},
	}
}

// claimDevices gives the pod the claim of its template (nil: none), and
// the builder and readout driver its devices: the DRA driver's CDI spec
// puts the NIC's device nodes and the streams' environment in each.
func claimDevices(pod *corev1.Pod, template *resourceapi.ResourceClaimTemplate) {
	if template == nil {
		return
	}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: ClaimName, ResourceClaimTemplateName: &template.Name}}
	for _, containers := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range containers {
			if c := &containers[i]; c.Name == ContainerName || c.Name == DriverContainerName {
				c.Resources.Claims = append(c.Resources.Claims, corev1.ResourceClaim{Name: ClaimName})
			}
		}
	}
}

func celSelector(expression string) resourceapi.DeviceSelector {
	return resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expression}}
}
