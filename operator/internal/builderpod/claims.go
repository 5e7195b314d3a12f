package builderpod

import (
	"fmt"
	"strconv"
	"strings"

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

// ClaimTemplateName names the ResourceClaimTemplate of a rank's pod.
func ClaimTemplateName(run string, rank int32) string { return PodName(run, rank) + "-devices" }

// ClaimTemplate is the ResourceClaimTemplate of the pod of rank on endpoint
// ep in the run's claims mode: the endpoint's NIC (its rdmaDevice) and,
// when it reads streams, exactly those streams, all sharing the attribute
// align (the PCIe root, or where cards and NICs are not on one root by
// design, the NUMA node), so that the scheduler places the pod only where
// such a set exists and says why it does not. Without a NIC or without
// streams there is nothing to align: the one request stands alone.
func ClaimTemplate(run *ebv1.EventBuilderRun, rank int32, ep ebv1.FabricEndpoint, align resourceapi.FullyQualifiedName) *resourceapi.ResourceClaimTemplate {
	var requests []resourceapi.DeviceRequest
	if ep.RDMADevice != "" {
		requests = append(requests, resourceapi.DeviceRequest{Name: RequestNIC, Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: RDMADeviceClass,
			Selectors:       []resourceapi.DeviceSelector{celSelector(`device.attributes["eventbuilder.daq.io"].rdmaDevice == ` + strconv.Quote(ep.RDMADevice))},
			// Explicit, as the API server would default them: what is
			// rendered is what is stored.
			AllocationMode: resourceapi.DeviceAllocationModeExactCount,
			Count:          1,
		}})
	}
	if len(ep.Streams) > 0 {
		quoted := make([]string, len(ep.Streams))
		for i, s := range ep.Streams {
			quoted[i] = strconv.Quote(s)
		}
		requests = append(requests, resourceapi.DeviceRequest{Name: RequestReadout, Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: ReadoutDeviceClass,
			Selectors:       []resourceapi.DeviceSelector{celSelector(fmt.Sprintf(`device.attributes["eventbuilder.daq.io"].stream in [%s]`, strings.Join(quoted, ", ")))},
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           int64(len(ep.Streams)),
		}})
	}
	var constraints []resourceapi.DeviceConstraint
	if len(requests) == 2 {
		constraints = []resourceapi.DeviceConstraint{{Requests: []string{RequestNIC, RequestReadout}, MatchAttribute: &align}}
	}
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: ownedBy(run, ClaimTemplateName(run.Name, rank)),
		Spec: resourceapi.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelEndpoint: ep.Name}},
			Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests, Constraints: constraints}},
		},
	}
}

func celSelector(expression string) resourceapi.DeviceSelector {
	return resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expression}}
}
