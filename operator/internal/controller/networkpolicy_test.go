package controller

import (
	"context"
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"daq.io/eventbuilder/operator/internal/builderpod"
)

// testControlClients are the suite's operator pods and monitoring namespaces.
var testControlClients = builderpod.ControlClients{
	OperatorNamespace: "eventbuilder-system",
	OperatorPodLabels: map[string]string{"app.kubernetes.io/name": "eventbuilder-operator"},
	Monitoring:        &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
}

// Every run gets its NetworkPolicy, owned by it; an edit to it is undone.
func TestRunGetsItsNetworkPolicyBack(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	key, _ := createRun(t, "guarded", 2)
	run := getRun(t, key)
	want := builderpod.NetworkPolicy(run, testControlClients)

	policy := &networkingv1.NetworkPolicy{}
	policyKey := client.ObjectKey{Namespace: key.Namespace, Name: builderpod.NetworkPolicyName(key.Name)}
	eventually(t, "NetworkPolicy "+policyKey.String(), func() error { return k8s.Get(ctx, policyKey, policy) })
	if !metav1.IsControlledBy(policy, run) {
		t.Errorf("owner references %v, want the run as controller", policy.OwnerReferences)
	}
	if !equality.Semantic.DeepEqual(policy.Spec, want.Spec) {
		t.Errorf("spec %+v, want %+v", policy.Spec, want.Spec)
	}

	// Opened to every pod of every namespace by hand: closed again.
	policy.Spec.Ingress = append(policy.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	if err := k8s.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the NetworkPolicy's rules restored", func() error {
		if err := k8s.Get(ctx, policyKey, policy); err != nil {
			return err
		}
		if len(policy.Spec.Ingress) != len(want.Spec.Ingress) {
			return fmt.Errorf("%d ingress rules, want %d", len(policy.Spec.Ingress), len(want.Spec.Ingress))
		}
		return nil
	})
}
