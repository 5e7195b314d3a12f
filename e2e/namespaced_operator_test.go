package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// The chart's namespaced mode: an operator with Roles in one namespace only
// runs the runs there, ignores a run elsewhere, and may read no Secret and
// update no ConfigMap outside its namespaces. The suite's cluster-wide
// operator is scaled to 0 meanwhile, so that the runs are this one's.
func TestNamespacedOperatorActsInItsNamespacesOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const release, releaseNS, watched, unwatched = "eb-namespaced", "e2e-namespaced-operator", "e2e-watched", "e2e-unwatched"
	for _, ns := range []string{releaseNS, watched, unwatched} {
		ensureNamespace(ctx, t, ns)
	}
	var operator appsv1.Deployment
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorRelease}, &operator); err != nil || operator.Spec.Replicas == nil {
		t.Fatalf("the operator's Deployment: %v", err)
	}
	scaleOperator(t, 0)
	defer scaleOperator(t, int(*operator.Spec.Replicas))
	repository, tag := splitImage(env.operatorImage)
	if out, err := exec.Command(env.helm, "upgrade", "--install", release, "../charts/eventbuilder-operator", "--kubeconfig", env.kubeconfig,
		"--namespace", releaseNS, "--skip-crds", "--set", "image.repository="+repository, "--set", "image.tag="+tag,
		"--set", "watchNamespaces={"+watched+"}", "--set", "metrics.enabled=false", "--wait", "--timeout", "3m").CombinedOutput(); err != nil {
		t.Fatalf("helm install of the namespaced operator: %v\n%s", err, out)
	}
	defer func() {
		if out, err := exec.Command(env.helm, "uninstall", release, "--kubeconfig", env.kubeconfig, "--namespace", releaseNS,
			"--wait", "--timeout", "2m").CombinedOutput(); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
	}()

	ignored := client.ObjectKey{Namespace: unwatched, Name: "ignored"}
	deleteRun(ctx, t, ignored)
	if err := k8sClient.Create(ctx, &ebv1alpha1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: ignored.Name, Namespace: ignored.Namespace},
		Spec: ebv1alpha1.EventBuilderRunSpec{Units: 2,
			Builder: ebv1alpha1.BuilderSpec{Image: env.builderImage, ImagePullPolicy: corev1.PullIfNotPresent}},
	}); err != nil {
		t.Fatalf("create run %s: %v", ignored, err)
	}
	key := client.ObjectKey{Namespace: watched, Name: "watched"}
	run := runningRun(ctx, t, key, 2)
	t.Logf("the namespaced operator runs %s: %s", key, describe(run))

	// Created before the watched run came up: an operator seeing it would
	// have given it a status, pods and a control Secret by now.
	var other ebv1alpha1.EventBuilderRun
	if err := k8sClient.Get(ctx, ignored, &other); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := k8sClient.List(ctx, &pods, client.InNamespace(unwatched)); err != nil {
		t.Fatal(err)
	}
	if other.Status.Phase != "" || len(pods.Items) != 0 {
		t.Errorf("run %s in an unwatched namespace: phase %q, %d pods; want it left alone", ignored, other.Status.Phase, len(pods.Items))
	}

	account := "system:serviceaccount:" + releaseNS + ":" + release + "-eventbuilder-operator"
	for _, c := range []struct {
		verb, resource, namespace string
		want                      bool
	}{
		{"get", "secrets", watched, true},
		{"update", "configmaps", watched, true},
		{"get", "secrets", unwatched, false},
		{"update", "configmaps", unwatched, false},
		{"list", "secrets", "", false}, // cluster-wide
		{"list", "nodes", "", true},
	} {
		args := []string{"--kubeconfig", env.kubeconfig, "auth", "can-i", c.verb, c.resource, "--as", account}
		if c.namespace != "" {
			args = append(args, "-n", c.namespace)
		} else {
			args = append(args, "--all-namespaces")
		}
		out, _ := exec.Command(env.kubectl, args...).Output() // exits 1 for "no"
		if got := strings.TrimSpace(string(out)) == "yes"; got != c.want {
			t.Errorf("the namespaced operator may %s %s in %q: %t, want %t", c.verb, c.resource, c.namespace, got, c.want)
		}
	}
	deleteRun(ctx, t, key)
	deleteRun(ctx, t, ignored)
}

// scaleOperator sets the replicas of the suite's cluster-wide operator and
// waits for the rollout.
func scaleOperator(t *testing.T, replicas int) {
	t.Helper()
	deployment := "deployment/" + operatorRelease
	for _, args := range [][]string{
		{"scale", deployment, fmt.Sprintf("--replicas=%d", replicas)},
		{"rollout", "status", deployment, "--timeout=3m"},
	} {
		args = append([]string{"--kubeconfig", env.kubeconfig, "-n", operatorNamespace}, args...)
		if out, err := exec.Command(env.kubectl, args...).CombinedOutput(); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if replicas == 0 { // rollout status does not wait for pods to go
		waitFor(context.Background(), t, "the operator's pods to be gone", 2*time.Minute, func() (bool, string) {
			var pods corev1.PodList
			if err := k8sClient.List(context.Background(), &pods, client.InNamespace(operatorNamespace),
				client.MatchingLabels{"app.kubernetes.io/name": "eventbuilder-operator"}); err != nil {
				return false, err.Error()
			}
			return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
		})
	}
}
