package main

import (
	"bufio"
	"errors"
	"flag"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// managerRole names the operator's ClusterRole and Roles in a release "eb".
const managerRole = "eb-eventbuilder-operator-manager"

// rendered are the chart's manifests, split by kind.
type rendered struct {
	clusterRoles map[string]rbacv1.ClusterRole
	roles        []rbacv1.Role
	roleBindings []rbacv1.RoleBinding
	deployment   appsv1.Deployment
}

func parseManifests(t *testing.T, manifests string) rendered {
	t.Helper()
	out := rendered{clusterRoles: map[string]rbacv1.ClusterRole{}}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifests)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var head struct{ Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		into := map[string]any{"ClusterRole": &rbacv1.ClusterRole{}, "Role": &rbacv1.Role{},
			"RoleBinding": &rbacv1.RoleBinding{}, "Deployment": &appsv1.Deployment{}}[head.Kind]
		if into == nil {
			continue
		}
		if err := yaml.Unmarshal(doc, into); err != nil {
			t.Fatalf("%s: %v", head.Kind, err)
		}
		switch o := into.(type) {
		case *rbacv1.ClusterRole:
			out.clusterRoles[o.Name] = *o
		case *rbacv1.Role:
			if o.Name == managerRole { // not the leader election's
				out.roles = append(out.roles, *o)
			}
		case *rbacv1.RoleBinding:
			if o.RoleRef.Name != managerRole {
				continue
			}
			out.roleBindings = append(out.roleBindings, *o)
		case *appsv1.Deployment:
			out.deployment = *o
		}
	}
}

// grants lists the resources rules give verb on.
func grants(rules []rbacv1.PolicyRule, verb string) []string {
	var out []string
	for _, r := range rules {
		if slices.Contains(r.Verbs, verb) {
			out = append(out, r.Resources...)
		}
	}
	return out
}

// With watchNamespaces, the operator's namespaced rights live in Roles of
// those namespaces only; the ClusterRole keeps the cluster-scoped objects.
func TestChartWatchNamespacesGivesRolesOnly(t *testing.T) {
	all := parseManifests(t, helmTemplate(t))
	if got := grants(all.clusterRoles[managerRole].Rules, "get"); !slices.Contains(got, "secrets") {
		t.Errorf("by default the ClusterRole gets %v, want secrets among them (every namespace watched)", got)
	}
	if len(all.roles) != 0 {
		t.Errorf("by default %d manager Roles, want none", len(all.roles))
	}

	some := parseManifests(t, helmTemplate(t, "watchNamespaces={daq-a,daq-b}"))
	cluster := some.clusterRoles[managerRole].Rules
	for _, verb := range []string{"get", "list", "update", "create", "delete"} {
		for _, res := range grants(cluster, verb) {
			if !slices.Contains([]string{"nodes", "fabrics", "fabrics/status", "events", "deviceclasses"}, res) {
				t.Errorf("the ClusterRole may %s %s cluster-wide; only cluster-scoped objects (and events) belong there", verb, res)
			}
		}
	}
	if len(grants(cluster, "list")) == 0 {
		t.Error("the ClusterRole lost the cluster-scoped objects (nodes, fabrics)")
	}
	var namespaces []string
	for _, role := range some.roles {
		namespaces = append(namespaces, role.Namespace)
		if got := grants(role.Rules, "get"); !slices.Contains(got, "secrets") || slices.Contains(got, "nodes") {
			t.Errorf("Role in %s gets %v, want secrets and no cluster-scoped object", role.Namespace, got)
		}
		if got := grants(role.Rules, "update"); !slices.Contains(got, "configmaps") {
			t.Errorf("Role in %s updates %v, want configmaps", role.Namespace, got)
		}
	}
	if !slices.Equal(namespaces, []string{"daq-a", "daq-b"}) {
		t.Errorf("Roles in %v, want daq-a and daq-b", namespaces)
	}
	for _, b := range some.roleBindings {
		if b.RoleRef.Kind != "Role" || len(b.Subjects) != 1 || b.Subjects[0].Name != "eb-eventbuilder-operator" {
			t.Errorf("RoleBinding in %s: %+v to %+v, want the Role bound to the operator's service account", b.Namespace, b.RoleRef, b.Subjects)
		}
	}
	if got := renderedFlag(t, helmTemplate(t, "watchNamespaces={daq-a,daq-b}"), "watch-namespaces"); got != "daq-a,daq-b" {
		t.Errorf("--watch-namespaces=%s, want daq-a,daq-b", got)
	}
}

// The builders' NetworkPolicy lets in the pods the chart's Deployment
// makes, and the manager accepts the flags the chart renders for it.
func TestChartNetworkPolicyNamesTheOperatorsPods(t *testing.T) {
	manifests := helmTemplate(t, "networkPolicy.metricsNamespaceLabels.team=monitoring")
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o := bindFlags(fs)
	args := regexp.MustCompile(`(?m)^\s*- (--(?:builder-network-policy|operator-namespace|operator-pod-labels|metrics-namespace-selector)\S*)$`).
		FindAllStringSubmatch(manifests, -1)
	for _, a := range args {
		if err := fs.Parse([]string{a[1]}); err != nil {
			t.Fatal(err)
		}
	}
	clients, err := o.controlClients()
	if err != nil || clients == nil {
		t.Fatalf("the manager refuses the chart's flags %v: %v", args, err)
	}
	pod := parseManifests(t, manifests).deployment.Spec.Template
	if !labels.SelectorFromSet(clients.OperatorPodLabels).Matches(labels.Set(pod.Labels)) || clients.OperatorNamespace != "default" {
		t.Errorf("the policy lets in pods %v of namespace %s; the operator's pods are labelled %v in default",
			clients.OperatorPodLabels, clients.OperatorNamespace, pod.Labels)
	}
	if clients.Monitoring == nil || clients.Monitoring.MatchLabels["team"] != "monitoring" {
		t.Errorf("monitoring namespaces %v, want team=monitoring", clients.Monitoring)
	}
	if off := helmTemplate(t, "networkPolicy.enabled=false"); strings.Contains(off, "--builder-network-policy") {
		t.Error("networkPolicy.enabled=false still renders --builder-network-policy")
	}
}

func TestControlClientsFlagsAreChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the error; "" for none
	}{
		{[]string{}, ""},
		{[]string{"--builder-network-policy", "--operator-namespace=eb", "--operator-pod-labels=app=op"}, ""},
		{[]string{"--builder-network-policy", "--operator-namespace=eb"}, "--operator-pod-labels"},
		{[]string{"--builder-network-policy", "--operator-namespace=", "--operator-pod-labels=app=op"}, "--operator-namespace"},
		{[]string{"--builder-network-policy", "--operator-namespace=eb", "--operator-pod-labels=app"}, "--operator-pod-labels"},
		{[]string{"--builder-network-policy", "--operator-namespace=eb", "--operator-pod-labels=app=op",
			"--metrics-namespace-selector=a in (b"}, "--metrics-namespace-selector"},
	} {
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		o := bindFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		_, err := o.controlClients()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: error %v, want one naming %q", c.args, err, c.want)
		}
	}
}
