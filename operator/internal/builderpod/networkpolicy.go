package builderpod

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// ControlClients are the pods that may reach a builder's HTTP port (the
// control API, /status and /metrics): the operator's own pods and,
// optionally, the namespaces that scrape /metrics.
type ControlClients struct {
	// OperatorNamespace and OperatorPodLabels select the operator's pods.
	OperatorNamespace string
	OperatorPodLabels map[string]string
	// Monitoring selects the namespaces whose pods may scrape /metrics
	// (which is served on the control port); nil: none.
	Monitoring *metav1.LabelSelector
}

// NetworkPolicyName is the NetworkPolicy of a run's builder pods.
func NetworkPolicyName(run string) string { return ServiceName(run) }

// NetworkPolicy renders the ingress policy of a run's builder pods: the
// data port only from the run's own pods, the HTTP port only from the
// operator (and monitoring). Everything else is refused where the pod
// network enforces NetworkPolicy. It guards TCP on the pod network only:
// RDMA traffic (RoCE, InfiniBand) and a secondary data network bypass it.
func NetworkPolicy(run *ebv1.EventBuilderRun, clients ControlClients) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port := func(p int) []networkingv1.NetworkPolicyPort {
		n := intstr.FromInt32(int32(p))
		return []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &n}}
	}
	control := []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: clients.OperatorNamespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: clients.OperatorPodLabels},
	}}
	if clients.Monitoring != nil {
		control = append(control, networkingv1.NetworkPolicyPeer{NamespaceSelector: clients.Monitoring})
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: ownedBy(run, NetworkPolicyName(run.Name)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: Selector(run.Name)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{Ports: port(DataPort), From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: Selector(run.Name)}}}},
				{Ports: port(HTTPPort), From: control},
			},
		},
	}
}
