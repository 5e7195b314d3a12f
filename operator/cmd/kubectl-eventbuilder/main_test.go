package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/testenv"
)

var repoRoot = filepath.Join("..", "..", "..")

// The plugin against a real API server: it finds the run in the
// namespace its flags or its kubeconfig context name, prints its status,
// its ranks with the leaf and port from its Fabric, its failover Events,
// why it is not building at full strength (an unscheduled pod) and its
// Fabric's map, and names what is missing when the run is not there.
func TestPluginReadsARunFromTheAPIServer(t *testing.T) {
	env := testenv.StartForTest(t, repoRoot)
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fabric := &ebv1.Fabric{ObjectMeta: metav1.ObjectMeta{Name: "farm"}, Spec: ebv1.FabricSpec{
		Leaves: 1, Spines: 1, PortsPerLeaf: 4, Endpoints: []ebv1.FabricEndpoint{
			{Name: "srv-a-0", Node: "srv-a", NUMA: 0, Leaf: 0, Port: 2, Streams: []string{"VELO-0"}},
		}}}
	if err := c.Create(ctx, fabric); err != nil {
		t.Fatal(err)
	}
	ebrun := &ebv1.EventBuilderRun{ObjectMeta: metav1.ObjectMeta{Name: "physics", Namespace: "default"},
		Spec: ebv1.EventBuilderRunSpec{Units: 1, FabricRef: &ebv1.FabricReference{Name: "farm"},
			Builder: ebv1.BuilderSpec{Image: "eb-builder:dev"}}}
	if err := c.Create(ctx, ebrun); err != nil {
		t.Fatal(err)
	}
	ebrun.Status = ebv1.EventBuilderRunStatus{Phase: ebv1.PhaseRunning, Epoch: 2, LiveUnits: 1, EventsBuilt: 123456,
		Ranks: []ebv1.RankStatus{{Rank: 0, Role: ebv1.RoleLive, Unit: ptr.To(int32(0)), Endpoint: "srv-a-0",
			Node: "srv-a", Pod: "physics-eb-0", State: "RUNNING"}}}
	if err := c.Status().Update(ctx, ebrun); err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeKubeconfig(t, env, "default")
	// A failover Event about the run, and a pod of it the scheduler could not place.
	failover := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "physics.failover", Namespace: "default"},
		EventTime: metav1.NowMicro(), ReportingController: "eventbuilder.daq.io/operator", ReportingInstance: "test",
		Action: "Failover", Reason: "Failover", Type: corev1.EventTypeWarning,
		Note:      "epoch 2, MovedToSpare in 1.1s: unit 0 (NodeNotReady) rank 0 -> 1",
		Regarding: corev1.ObjectReference{Kind: "EventBuilderRun", Namespace: "default", Name: "physics", UID: ebrun.UID}}
	if err := c.Create(ctx, failover); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "physics-eb-1", Namespace: "default", Labels: builderpod.Selector("physics")},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "builder", Image: "eb-builder:dev"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient rdma/hca."}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"status", "physics", "--kubeconfig", kubeconfig},
			[]string{"Run default/physics: Running", "epoch 2", "123 456 built"}},
		{[]string{"ranks", "--kubeconfig", kubeconfig, "-n", "default", "physics"},
			[]string{"LEAF/PORT", "srv-a-0", "0/2", "VELO-0", "RUNNING", "physics-eb-0"}},
		{[]string{"failovers", "physics", "--kubeconfig", kubeconfig},
			[]string{"Warning", "Failover", "unit 0 (NodeNotReady) rank 0 -> 1", "No failover recorded in the run's status"}},
		{[]string{"why", "physics", "--kubeconfig", kubeconfig},
			[]string{"pod physics-eb-1: not scheduled (Unschedulable): 0/1 nodes are available: 1 Insufficient rdma/hca."}},
		{[]string{"fabric", "farm", "--kubeconfig", kubeconfig},
			[]string{"Fabric farm:", "srv-a-0", "VELO-0", "default/physics", "Live"}},
	} {
		var out, errOut strings.Builder
		if err := run(tc.args, &out, &errOut); err != nil {
			t.Fatalf("%v: %v (%s)", tc.args, err, errOut.String())
		}
		for _, want := range tc.want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v printed %q, without %q", tc.args, out.String(), want)
			}
		}
	}

	var out, errOut strings.Builder
	err = run([]string{"status", "physics", "--kubeconfig", kubeconfig, "-n", "elsewhere", "--request-timeout", "10s"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "run elsewhere/physics") || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a run in another namespace: %v; want an error naming elsewhere/physics, not found", err)
	}
}

// writeKubeconfig writes a kubeconfig that reaches env as its
// administrator, in namespace by default.
func writeKubeconfig(t *testing.T, env *testenv.Env, namespace string) string {
	t.Helper()
	cfg := env.Config
	config := clientcmdapi.NewConfig()
	config.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	config.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		Token: cfg.BearerToken}
	config.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: namespace}
	config.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		t.Fatal(err)
	}
	return path
}
