package builderpod

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// allowed says whether a peer in namespace ns with pod labels podLabels
// (namespace labels nsLabels) may reach port under policy p, as an
// enforcing pod network evaluates it.
func allowed(p *networkingv1.NetworkPolicy, policyNS, ns string, nsLabels, podLabels map[string]string, port int) bool {
	matches := func(s *metav1.LabelSelector, l map[string]string) bool {
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			panic(err)
		}
		return sel.Matches(labels.Set(l))
	}
	for _, rule := range p.Spec.Ingress {
		portOK := false
		for _, pp := range rule.Ports {
			portOK = portOK || (pp.Port.IntValue() == port && *pp.Protocol == corev1.ProtocolTCP)
		}
		if !portOK {
			continue
		}
		for _, from := range rule.From {
			nsOK := ns == policyNS
			if from.NamespaceSelector != nil {
				nsOK = matches(from.NamespaceSelector, nsLabels)
			}
			podOK := from.PodSelector == nil || matches(from.PodSelector, podLabels)
			if nsOK && podOK {
				return true
			}
		}
	}
	return false
}

func TestNetworkPolicyLetsInOnlyTheRunAndTheOperator(t *testing.T) {
	run := &ebv1.EventBuilderRun{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "daq"}}
	operator := map[string]string{"app.kubernetes.io/name": "eventbuilder-operator", "app.kubernetes.io/instance": "eb"}
	nsLabels := func(name string) map[string]string { return map[string]string{corev1.LabelMetadataName: name} }
	withMonitoring := ControlClients{OperatorNamespace: "eventbuilder-system", OperatorPodLabels: operator,
		Monitoring: &metav1.LabelSelector{MatchLabels: nsLabels("monitoring")}}
	withoutMonitoring := withMonitoring
	withoutMonitoring.Monitoring = nil
	otherRun := map[string]string{LabelName: AppName, LabelRun: "other"}
	cases := []struct {
		name      string
		clients   ControlClients
		ns        string
		podLabels map[string]string
		port      int
		want      bool
	}{
		{"a unit of the run, data", withMonitoring, "daq", Selector("r"), DataPort, true},
		{"a unit of the run, control", withMonitoring, "daq", Selector("r"), HTTPPort, false},
		{"a unit of another run, data", withMonitoring, "daq", otherRun, DataPort, false},
		{"a unit of the same name elsewhere, data", withMonitoring, "elsewhere", Selector("r"), DataPort, false},
		{"the operator, control", withMonitoring, "eventbuilder-system", operator, HTTPPort, true},
		{"the operator, data", withMonitoring, "eventbuilder-system", operator, DataPort, false},
		{"another pod of the operator's namespace, control", withMonitoring, "eventbuilder-system", map[string]string{"app": "x"}, HTTPPort, false},
		{"the operator's labels in another namespace, control", withMonitoring, "daq", operator, HTTPPort, false},
		{"monitoring, metrics", withMonitoring, "monitoring", map[string]string{"app": "prometheus"}, HTTPPort, true},
		{"monitoring, data", withMonitoring, "monitoring", map[string]string{"app": "prometheus"}, DataPort, false},
		{"monitoring not let in, metrics", withoutMonitoring, "monitoring", map[string]string{"app": "prometheus"}, HTTPPort, false},
		{"a stranger, control", withMonitoring, "default", map[string]string{}, HTTPPort, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NetworkPolicy(run, c.clients)
			if got := allowed(p, run.Namespace, c.ns, nsLabels(c.ns), c.podLabels, c.port); got != c.want {
				t.Errorf("allowed = %t, want %t", got, c.want)
			}
			if len(p.Spec.PolicyTypes) != 1 || p.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
				t.Errorf("policy types %v, want Ingress only (egress left open)", p.Spec.PolicyTypes)
			}
		})
	}
}
