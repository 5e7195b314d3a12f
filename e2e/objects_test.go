package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// ensureNamespace creates the namespace unless a reused cluster has it.
// The builder pods' run label (operator/internal/builderpod).
const labelRun = "eventbuilder.daq.io/run"

func ensureNamespace(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8sClient.Create(ctx, namespace); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// deleteRun deletes the run, if there is one, and waits until it and its
// pods are gone.
func deleteRun(ctx context.Context, t *testing.T, key client.ObjectKey) {
	t.Helper()
	run := &ebv1alpha1.EventBuilderRun{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	if err := k8sClient.Delete(ctx, run); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete run %s: %v", key, err)
	}
	waitFor(ctx, t, "the run "+key.String()+" and its pods to be gone", 3*time.Minute, func() (bool, string) {
		err := k8sClient.Get(ctx, key, &ebv1alpha1.EventBuilderRun{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err.Error()
		}
		var pods corev1.PodList
		if err := k8sClient.List(ctx, &pods, client.InNamespace(key.Namespace),
			client.MatchingLabels{labelRun: key.Name}); err != nil {
			return false, err.Error()
		}
		names := make([]string, 0, len(pods.Items))
		for _, pod := range pods.Items {
			names = append(names, pod.Name)
		}
		return apierrors.IsNotFound(err) && len(pods.Items) == 0, fmt.Sprintf("run exists: %t, pods left: %v", err == nil, names)
	})
}

// removeAfter removes the run and its Fabric when the test ends, passed or
// not: a failed test's pods would hold the nodes' devices from the next.
func removeAfter(t *testing.T, key client.ObjectKey, fabric string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		removeRunAndFabric(ctx, t, key, fabric)
	})
}

// removeRunAndFabric deletes the run (see deleteRun), then the Fabric.
func removeRunAndFabric(ctx context.Context, t *testing.T, key client.ObjectKey, fabric string) {
	t.Helper()
	deleteRun(ctx, t, key)
	if err := k8sClient.Delete(ctx, &ebv1alpha1.Fabric{ObjectMeta: metav1.ObjectMeta{Name: fabric}}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete fabric %s: %v", fabric, err)
	}
}
