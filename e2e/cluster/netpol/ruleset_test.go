package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func pod(ns, name, node, ip string, labels map[string]string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{PodIP: ip},
	}
}

func namespace(name string) corev1.Namespace {
	return corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}}
}

func TestRuleset(t *testing.T) {
	tcp := corev1.ProtocolTCP
	data, http := intstr.FromInt32(7000), intstr.FromString("http")
	builders := map[string]string{"run": "r"}
	policy := networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "daq", Name: "r"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: builders},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &data}},
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: builders}}}},
				{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &http}},
					From: []networkingv1.NetworkPolicyPeer{{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "ops"}},
						PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "operator"}}}}},
			},
		},
	}
	cluster := Cluster{
		Pods: []corev1.Pod{
			pod("daq", "r-0", "n1", "10.0.1.2", builders),
			pod("daq", "r-1", "n2", "10.0.2.2", builders),
			pod("daq", "other", "n1", "10.0.1.3", map[string]string{"run": "other"}),
			pod("elsewhere", "r-0", "n2", "10.0.2.3", builders),
			pod("ops", "operator", "n2", "10.0.2.4", map[string]string{"app": "operator"}),
			pod("ops", "tool", "n2", "10.0.2.5", map[string]string{"app": "tool"}),
			pod("daq", "pending", "n1", "", builders),
		},
		Namespaces: []corev1.Namespace{namespace("daq"), namespace("elsewhere"), namespace("ops")},
		Policies:   []networkingv1.NetworkPolicy{policy},
	}
	got := Ruleset("n1", cluster)
	for _, want := range []string{
		"delete table inet " + table,                                            // replaced whole, atomically
		"ct state established,related accept",                                   // replies pass
		`ip daddr 10.0.1.2 jump pod0 comment "daq/r-0"`,                         // the selected pod of this node
		"ip saddr { 10.0.1.2, 10.0.2.2 } meta l4proto tcp th dport 7000 accept", // its run's pods only, not elsewhere/r-0
		"ip saddr { 10.0.2.4 } meta l4proto tcp th dport 8080 accept",           // named port; the operator, not ops/tool
		"\t\tdrop\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"10.0.1.3 jump", "10.0.2.2 jump", "jump pod1"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("ruleset has %q (a pod of another node, unselected or without an address):\n%s", unwanted, got)
		}
	}

	// No policy: nothing isolated. A rule without peers or ports: anything.
	if open := Ruleset("n1", Cluster{Pods: cluster.Pods, Namespaces: cluster.Namespaces}); strings.Contains(open, "jump") {
		t.Errorf("without policies pods are isolated:\n%s", open)
	}
	policy.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
	cluster.Policies = []networkingv1.NetworkPolicy{policy}
	if all := Ruleset("n1", cluster); !strings.Contains(all, "\t\taccept\n\t\tdrop\n") {
		t.Errorf("an empty rule does not allow everything:\n%s", all)
	}
	// A policy selecting no ports of a peer-less rule on a missing named port allows nothing.
	missing := intstr.FromString("metrics")
	policy.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &missing}}}}
	cluster.Policies = []networkingv1.NetworkPolicy{policy}
	if none := Ruleset("n1", cluster); !strings.Contains(none, "chain pod0 {\n\t\tdrop\n") {
		t.Errorf("a named port the pod lacks allows something:\n%s", none)
	}
}

// nft itself accepts the scripts (check mode: nothing is loaded), where it
// can run.
func TestNftAcceptsTheRuleset(t *testing.T) {
	nft, err := exec.LookPath("nft")
	if err != nil || os.Geteuid() != 0 {
		// make test sets EB_REQUIRE_ALL_TESTS (operator/internal/testenv): there it must run.
		if os.Getenv("EB_REQUIRE_ALL_TESTS") != "" {
			t.Fatal("needs nft and root (CAP_NET_ADMIN) for nft -c; EB_REQUIRE_ALL_TESTS is set (make test): every test must run")
		}
		t.Skip("needs nft and root (CAP_NET_ADMIN) for nft -c")
	}
	tcp := corev1.ProtocolTCP
	port, end := intstr.FromInt32(7000), int32(7010)
	policy := networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "daq", Name: "p"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port, EndPort: &end}},
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "10.1.0.0/16", Except: []string{"10.1.2.0/24"}}}}},
			{},
		}},
	}
	cluster := Cluster{
		Pods:       []corev1.Pod{pod("daq", "a", "n1", "10.0.1.2", nil), pod("daq", "b", "n1", "10.0.1.3", nil)},
		Namespaces: []corev1.Namespace{namespace("daq")},
		Policies:   []networkingv1.NetworkPolicy{policy},
	}
	for _, c := range []Cluster{cluster, {}} {
		cmd := exec.Command(nft, "-c", "-f", "-")
		cmd.Stdin = strings.NewReader(Ruleset("n1", c))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("nft -c refuses the ruleset: %v: %s\n%s", err, out, Ruleset("n1", c))
		}
	}
}
