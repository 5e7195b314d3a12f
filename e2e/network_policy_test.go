package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// Builder ports (operator/internal/builderpod).
const (
	dataPort = 7000
	httpPort = 8080
)

// A run's NetworkPolicy, enforced by the cluster's pod network
// (kube-network-policies): a pod of another namespace reaches neither the
// builders' data port nor their HTTP port, though it reaches a pod no
// policy selects; the monitoring namespace reaches the HTTP port (for
// /metrics) and not the data port; the run builds meanwhile, its units
// reaching each other and the operator reaching them.
func TestNetworkPolicyKeepsOtherNamespacesOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	key := client.ObjectKey{Namespace: "e2e-network-policy", Name: "guarded"}
	run := runningRun(ctx, t, key, 2)
	builder := builderPod(ctx, t, key.Namespace, run.Status.Units[0].Pod)
	// A pod no NetworkPolicy selects: the stranger's probes can reach the
	// pod network at all (CoreDNS listens on TCP 53).
	dns, err := clientset.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil || len(dns.Items) == 0 || dns.Items[0].Status.PodIP == "" {
		t.Fatalf("CoreDNS pod: %v (%d found)", err, len(dns.Items))
	}
	open := func(ip string, port int) string { return fmt.Sprintf("%s:%d", ip, port) }
	ip := builder.Status.PodIP

	ensureNamespace(ctx, t, "e2e-stranger")
	stranger := probe(ctx, t, "e2e-stranger", open(ip, dataPort), open(ip, httpPort), open(dns.Items[0].Status.PodIP, 53))
	want := map[string]bool{open(ip, dataPort): false, open(ip, httpPort): false, open(dns.Items[0].Status.PodIP, 53): true}
	for target, reached := range stranger {
		if reached != want[target] {
			t.Errorf("from namespace e2e-stranger: %s reached %t, want %t", target, reached, want[target])
		}
	}
	monitoring := probe(ctx, t, "monitoring", open(ip, dataPort), open(ip, httpPort))
	want = map[string]bool{open(ip, dataPort): false, open(ip, httpPort): true}
	for target, reached := range monitoring {
		if reached != want[target] {
			t.Errorf("from namespace monitoring: %s reached %t, want %t", target, reached, want[target])
		}
	}
	t.Logf("builder %s (%s): from e2e-stranger %v; from monitoring %v", builder.Name, ip, stranger, monitoring)

	// The units and the operator got through all along.
	before := run.Status.EventsBuilt
	waitFor(ctx, t, "the run to build on", time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		return run.Status.Phase == ebv1alpha1.PhaseRunning && run.Status.EventsBuilt > before, describe(run)
	})
	deleteRun(ctx, t, key)
}

// probe runs a pod in namespace ns that tries a TCP connection to each
// target (ip:port, 3 s each) and returns which it reached.
func probe(ctx context.Context, t *testing.T, ns string, targets ...string) map[string]bool {
	t.Helper()
	name := "probe-" + strings.ReplaceAll(fmt.Sprint(time.Now().UnixNano()), "-", "")
	var script strings.Builder
	for _, target := range targets {
		host, port, _ := strings.Cut(target, ":")
		fmt.Fprintf(&script, "if timeout 3 bash -c '</dev/tcp/%s/%s' 2>/dev/null; then echo '%s open'; else echo '%s closed'; fi\n",
			host, port, target, target)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "probe", Image: env.builderImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"bash", "-c", script.String()}}},
		},
	}
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatalf("create probe pod: %v", err)
	}
	defer func() {
		if err := k8sClient.Delete(context.Background(), pod); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete probe pod %s/%s: %v", ns, name, err)
		}
	}()
	waitFor(ctx, t, "probe pod "+ns+"/"+name+" to finish", 2*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, string(pod.Status.Phase)
	})
	logs, err := clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("probe pod logs: %v", err)
	}
	reached := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(logs)), "\n") {
		target, verdict, _ := strings.Cut(line, " ")
		reached[target] = verdict == "open"
	}
	if len(reached) != len(targets) {
		t.Fatalf("probe pod printed %q for %d targets", logs, len(targets))
	}
	return reached
}
