package main

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// table is the nftables table the enforcer owns on its node.
const table = "eventbuilder-netpol"

// Cluster is what the ruleset is computed from.
type Cluster struct {
	Pods       []corev1.Pod
	Namespaces []corev1.Namespace
	Policies   []networkingv1.NetworkPolicy
}

// Ruleset renders, as an nft script that replaces the table atomically,
// the ingress isolation of the pods of node: a pod that some policy with
// policy type Ingress selects accepts new connections only from the peers
// and on the ports one of those policies' rules allow, and drops the rest.
// Replies to connections it opened (and to allowed ones) pass. Traffic the
// node itself sends its pods (the kubelet's probes) does not cross the
// forward hook and passes, as with most implementations. Egress rules are
// not enforced (this cluster's tests need none); Ruleset says so in the
// script's comments when a policy has some.
func Ruleset(node string, c Cluster) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s\ndelete table inet %s\ntable inet %s {\n", table, table, table)
	b.WriteString("\tchain forward {\n\t\ttype filter hook forward priority filter; policy accept;\n")
	b.WriteString("\t\tct state established,related accept\n")
	var chains strings.Builder
	for i, pod := range isolated(node, c) {
		chain := fmt.Sprintf("pod%d", i)
		fmt.Fprintf(&b, "\t\tip daddr %s jump %s comment %q\n", pod.pod.Status.PodIP, chain, pod.pod.Namespace+"/"+pod.pod.Name)
		fmt.Fprintf(&chains, "\tchain %s {\n", chain)
		for _, rule := range pod.rules {
			for _, line := range accepts(pod.pod, rule, c) {
				fmt.Fprintf(&chains, "\t\t%s\n", strings.TrimSpace(line+" accept"))
			}
		}
		chains.WriteString("\t\tdrop\n\t}\n")
	}
	b.WriteString("\t}\n")
	b.WriteString(chains.String())
	for _, p := range c.Policies {
		if slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			fmt.Fprintf(&b, "\t# NetworkPolicy %s/%s: egress not enforced\n", p.Namespace, p.Name)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

type isolatedPod struct {
	pod   corev1.Pod
	rules []networkingv1.NetworkPolicyIngressRule
}

// isolated lists the running pods of node that an ingress policy selects,
// with the rules of every such policy, in a stable order.
func isolated(node string, c Cluster) []isolatedPod {
	var out []isolatedPod
	for _, pod := range c.Pods {
		if pod.Spec.NodeName != node || pod.Spec.HostNetwork || pod.Status.PodIP == "" {
			continue
		}
		selected := false
		var rules []networkingv1.NetworkPolicyIngressRule
		for _, p := range c.Policies {
			if p.Namespace != pod.Namespace || !ingress(p) || !matches(&p.Spec.PodSelector, pod.Labels) {
				continue
			}
			selected = true
			rules = append(rules, p.Spec.Ingress...)
		}
		if selected {
			out = append(out, isolatedPod{pod: pod, rules: rules})
		}
	}
	slices.SortFunc(out, func(a, b isolatedPod) int {
		return strings.Compare(a.pod.Namespace+"/"+a.pod.Name, b.pod.Namespace+"/"+b.pod.Name)
	})
	return out
}

// ingress says whether p isolates the pods it selects for ingress (a
// policy without policyTypes always does).
func ingress(p networkingv1.NetworkPolicy) bool {
	return len(p.Spec.PolicyTypes) == 0 || slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
}

// accepts renders the matches one ingress rule allows into pod: sources
// (all when the rule names no peer) by ports (all when it names none).
func accepts(pod corev1.Pod, rule networkingv1.NetworkPolicyIngressRule, c Cluster) []string {
	var sources []string // "" for any source
	if len(rule.From) == 0 {
		sources = []string{""}
	}
	for _, peer := range rule.From {
		if peer.IPBlock != nil {
			src := "ip saddr " + peer.IPBlock.CIDR
			if len(peer.IPBlock.Except) > 0 {
				src += " ip saddr != { " + strings.Join(peer.IPBlock.Except, ", ") + " }"
			}
			sources = append(sources, src)
			continue
		}
		if ips := peerIPs(pod.Namespace, peer, c); len(ips) > 0 {
			sources = append(sources, "ip saddr { "+strings.Join(ips, ", ")+" }")
		}
	}
	ports := []string{""} // any port
	if len(rule.Ports) > 0 {
		ports = nil
	}
	for _, p := range rule.Ports {
		if m := portMatch(pod, p); m != "" {
			ports = append(ports, m)
		}
	}
	var out []string
	for _, src := range sources {
		for _, port := range ports {
			out = append(out, strings.TrimSpace(src+" "+port)) // "": anything
		}
	}
	return out
}

// peerIPs are the addresses of the pods a peer selects, sorted.
func peerIPs(policyNamespace string, peer networkingv1.NetworkPolicyPeer, c Cluster) []string {
	namespaces := map[string]bool{}
	for _, ns := range c.Namespaces {
		switch {
		case peer.NamespaceSelector == nil:
			namespaces[ns.Name] = ns.Name == policyNamespace
		default:
			namespaces[ns.Name] = matches(peer.NamespaceSelector, ns.Labels)
		}
	}
	var ips []string
	for _, pod := range c.Pods {
		if pod.Status.PodIP == "" || pod.Spec.HostNetwork || !namespaces[pod.Namespace] {
			continue
		}
		if peer.PodSelector != nil && !matches(peer.PodSelector, pod.Labels) {
			continue
		}
		ips = append(ips, pod.Status.PodIP)
	}
	slices.Sort(ips)
	return slices.Compact(ips)
}

// portMatch renders one port of a rule ("" when a named port is not one of
// the pod's: the rule allows nothing there).
func portMatch(pod corev1.Pod, p networkingv1.NetworkPolicyPort) string {
	protocol := corev1.ProtocolTCP
	if p.Protocol != nil {
		protocol = *p.Protocol
	}
	l4 := "meta l4proto " + strings.ToLower(string(protocol))
	if p.Port == nil {
		return l4
	}
	number := p.Port.IntValue()
	if p.Port.StrVal != "" {
		number = 0
		for _, container := range pod.Spec.Containers {
			for _, cp := range container.Ports {
				if cp.Name == p.Port.StrVal && cp.Protocol == protocol {
					number = int(cp.ContainerPort)
				}
			}
		}
		if number == 0 {
			return ""
		}
	}
	if p.EndPort != nil {
		return fmt.Sprintf("%s th dport %d-%d", l4, number, *p.EndPort)
	}
	return fmt.Sprintf("%s th dport %d", l4, number)
}

func matches(s *metav1.LabelSelector, l map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(labels.Set(l))
}
