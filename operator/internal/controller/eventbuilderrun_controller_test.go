package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderstatus"
)

// fakeBuilder serves /status like eb-builder, building 10 000 events of
// 1 kB per second from the moment it starts.
type fakeBuilder struct {
	*httptest.Server
	start time.Time

	mu    sync.Mutex
	state string
}

func newFakeBuilder(t *testing.T) *fakeBuilder {
	b := &fakeBuilder{start: time.Now(), state: builderstatus.StateRunning}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		b.mu.Lock()
		state := b.state
		b.mu.Unlock()
		events := time.Since(b.start).Milliseconds() * 10
		_ = json.NewEncoder(w).Encode(map[string]any{
			"state": state, "events_built": events, "events_incomplete": 0, "bytes_built": events * 1000,
		})
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *fakeBuilder) setState(s string) {
	b.mu.Lock()
	b.state = s
	b.mu.Unlock()
}

// startPod plays kubelet: the pod runs, is Ready and has an IP.
// startPod plays scheduler and kubelet: binds a pod the operator did not place
// to a node, then reports it running and ready.
func startPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	if pod.Spec.NodeName == "" {
		binding := &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: "scheduled-node"}}
		if err := k8s.SubResource("binding").Create(ctx, pod, binding); err != nil {
			t.Fatalf("bind pod %s: %v", pod.Name, err)
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			t.Fatalf("get pod %s: %v", pod.Name, err)
		}
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIP:  "127.0.0.1",
		PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatalf("mark pod %s running: %v", pod.Name, err)
	}
}

func runPods(ctx context.Context, ns, run string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{builderpod.LabelRun: run})
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods.Items, err
}

func TestRunLifecycle(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)

	// Packing factor, fragment size, transport and pull policy left to the defaults.
	run := &ebv1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns},
		Spec: ebv1.EventBuilderRunSpec{
			Units:   3,
			Builder: ebv1.BuilderSpec{Image: "eventbuilder/builder:test"},
		},
	}
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	b := run.Spec.Builder
	if b.ImagePullPolicy != corev1.PullIfNotPresent || b.Transport != ebv1.TransportTCP || b.PackingFactor != 1000 ||
		b.Source == nil || b.Source.Generator == nil || b.Source.Generator.FragmentSize != 128 {
		t.Errorf("defaults not applied: %+v (source %+v)", b, b.Source)
	}
	key := client.ObjectKeyFromObject(run)

	svc := &corev1.Service{}
	eventually(t, "service demo-eb", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-eb"}, svc)
	})
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("service: clusterIP %q publishNotReadyAddresses %v, want headless and publishing", svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	if !metav1.IsControlledBy(svc, run) {
		t.Errorf("service owner references %v, want the run as controller", svc.OwnerReferences)
	}

	var pods []corev1.Pod
	eventually(t, "3 pods", func() (err error) {
		if pods, err = runPods(ctx, ns, "demo"); err == nil && len(pods) != 3 {
			err = fmt.Errorf("%d pods", len(pods))
		}
		return err
	})
	peers := "demo-eb-0.demo-eb:7000,demo-eb-1.demo-eb:7000,demo-eb-2.demo-eb:7000"
	for rank, pod := range pods {
		name := fmt.Sprintf("demo-eb-%d", rank)
		c := pod.Spec.Containers[0]
		wantArgs := []string{"--rank", strconv.Itoa(rank), "--peers", peers, "--http-port", "8080",
			"--packing-factor", "1000", "--fragment-size", "128"}
		sc := c.SecurityContext
		switch {
		case pod.Name != name || pod.Spec.Hostname != name || pod.Spec.Subdomain != "demo-eb":
			t.Errorf("pod %s: hostname %q subdomain %q, want %s and demo-eb", pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain, name)
		case pod.Labels[builderpod.LabelRank] != strconv.Itoa(rank) || pod.Labels[builderpod.LabelName] != "eventbuilder":
			t.Errorf("pod %s labels %v", pod.Name, pod.Labels)
		case !metav1.IsControlledBy(&pod, run):
			t.Errorf("pod %s owner references %v, want the run as controller", pod.Name, pod.OwnerReferences)
		case c.Name != "builder" || c.Image != "eventbuilder/builder:test" || !slices.Equal(c.Command, []string{"eb-builder"}):
			t.Errorf("pod %s container %s image %s command %v", pod.Name, c.Name, c.Image, c.Command)
		case !slices.Equal(c.Args, wantArgs):
			t.Errorf("pod %s args\n %q\nwant\n %q", pod.Name, c.Args, wantArgs)
		case !*sc.RunAsNonRoot || *sc.RunAsUser != 65532 || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
			!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
			t.Errorf("pod %s security context %+v", pod.Name, sc)
		case c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/healthz":
			t.Errorf("pod %s readiness probe %+v", pod.Name, c.ReadinessProbe)
		}
	}

	eventually(t, "phase Pending", func() error {
		if err := k8s.Get(ctx, key, run); err != nil {
			return err
		}
		if run.Status.Phase != ebv1.PhasePending {
			return fmt.Errorf("phase %q", run.Status.Phase)
		}
		return nil
	})

	fakes := make([]*fakeBuilder, len(pods))
	for i := range pods {
		fakes[i] = newFakeBuilder(t)
		builders.set(&pods[i], fakes[i].URL)
		startPod(t, &pods[i])
	}

	eventually(t, "phase Running with events and rates", func() error {
		if err := k8s.Get(ctx, key, run); err != nil {
			return err
		}
		st := run.Status
		ready := meta.FindStatusCondition(st.Conditions, ebv1.ConditionReady)
		switch {
		case st.Phase != ebv1.PhaseRunning || st.ReadyUnits != 3:
			return fmt.Errorf("phase %s, %d ready", st.Phase, st.ReadyUnits)
		case ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != run.Generation:
			return fmt.Errorf("Ready condition %+v at generation %d", ready, run.Generation)
		// Three builders at 10 000 events/s of 1 kB each: 30 000 events/s,
		// 0.24 Gb/s, once all three have a baseline from an earlier poll.
		case st.EventsBuilt <= 0 || st.BytesBuilt != st.EventsBuilt*1000 || st.EventRate < 20000 || st.ThroughputGbps == "0.000":
			return fmt.Errorf("events %d bytes %d rate %d/s %s Gb/s", st.EventsBuilt, st.BytesBuilt, st.EventRate, st.ThroughputGbps)
		case len(st.Units) != 3:
			return fmt.Errorf("units %+v", st.Units)
		}
		var sum int64
		for i, u := range st.Units {
			if u.Rank != int32(i) || u.Pod != pods[i].Name || !u.Ready || u.State != builderstatus.StateRunning {
				return fmt.Errorf("unit row %d: %+v", i, u)
			}
			sum += u.EventsBuilt
		}
		if sum != st.EventsBuilt {
			return fmt.Errorf("eventsBuilt %d is not the sum of the units' %d", st.EventsBuilt, sum)
		}
		return nil
	})
	// The window is short and timing loose: only check the order of magnitude.
	if r := run.Status.EventRate; r > 45000 {
		t.Errorf("eventRate %d/s, want about 30000/s", r)
	}
	if run.Status.ObservedGeneration != run.Generation {
		t.Errorf("observedGeneration %d, want %d", run.Status.ObservedGeneration, run.Generation)
	}
	expectEvent(t, ns, "demo", ebv1.ReasonAllUnitsRunning)

	// A builder in ERROR fails the run; back in RUNNING, the run recovers.
	fakes[1].setState(builderstatus.StateError)
	waitPhase(t, key, ebv1.PhaseFailed, ebv1.ReasonBuilderError)
	expectEvent(t, ns, "demo", ebv1.ReasonBuilderError)
	fakes[1].setState(builderstatus.StateRunning)
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)

	// Scale down: the pods of ranks 1 and 2 go, the rank table shrinks.
	patch := client.MergeFrom(run.DeepCopy())
	run.Spec.Units = 1
	if err := k8s.Patch(ctx, run, patch); err != nil {
		t.Fatalf("scale down: %v", err)
	}
	// Bound pods terminate gracefully; livePods finishes that as a kubelet would.
	eventually(t, "scale-down to 1 pod", func() error {
		pods, err := livePods(ctx, ns, "demo")
		if _, ok := pods["demo-eb-0"]; err == nil && (len(pods) != 1 || !ok) {
			err = fmt.Errorf("%d pods", len(pods))
		}
		return err
	})
	// The table changed (--peers): with no control API, the remaining
	// builder restarts with it, so its pod is replaced.
	var pod0 corev1.Pod
	eventually(t, "demo-eb-0 replaced with the new peers", func() error {
		pods, err := livePods(ctx, ns, "demo")
		if err != nil {
			return err
		}
		var ok bool
		if pod0, ok = pods["demo-eb-0"]; !ok {
			return fmt.Errorf("no live demo-eb-0")
		}
		if args := pod0.Spec.Containers[0].Args; !slices.Equal(args[:4], []string{"--rank", "0", "--peers", "demo-eb-0.demo-eb:7000"}) {
			return fmt.Errorf("args %q", args)
		}
		return nil
	})
	eventually(t, "status of 1 unit, not yet Running", func() error {
		if err := k8s.Get(ctx, key, run); err != nil {
			return err
		}
		if st := run.Status; st.ObservedGeneration != run.Generation || len(st.Units) != 1 || st.Phase != ebv1.PhasePending {
			return fmt.Errorf("generation %d: %+v", run.Generation, st)
		}
		return nil
	})
	startPod(t, &pod0)
	eventually(t, "status of 1 unit, Running", func() error {
		if err := k8s.Get(ctx, key, run); err != nil {
			return err
		}
		if st := run.Status; st.ObservedGeneration != run.Generation || len(st.Units) != 1 || st.Phase != ebv1.PhaseRunning || st.Epoch != 2 {
			return fmt.Errorf("generation %d: %+v", run.Generation, st)
		}
		return nil
	})

	// Deleting the ConfigMap replans, at the next epoch, never back at 1;
	// the same table renders the same pod, which is kept.
	if err := k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-ranks"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rank table epoch 3", func() error {
		doc, err := rankTable(ctx, ns, "demo")
		if err == nil && doc.Epoch != 3 {
			err = fmt.Errorf("epoch %d", doc.Epoch)
		}
		return err
	})
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	var again corev1.Pod
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-eb-0"}, &again); err != nil || again.UID != pod0.UID {
		t.Errorf("pod demo-eb-0 replaced by a replan to the same table (%v)", err)
	}
}

// A pod the API server refuses (here: a quota of no pods) shows in the
// run's status; once the quota is lifted, the pods come.
func TestPodCreateFailureIsReported(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "nopods", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	if err := k8s.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// No quota controller in envtest: play it.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := k8s.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	run := &ebv1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: "quota", Namespace: ns},
		Spec:       ebv1.EventBuilderRunSpec{Units: 2, Builder: ebv1.BuilderSpec{Image: "eventbuilder/builder:test"}},
	}
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	cond := waitPhase(t, client.ObjectKeyFromObject(run), ebv1.PhasePending, ebv1.ReasonPodCreateFailed)
	if !strings.Contains(cond.Message, "quota") || !strings.Contains(cond.Message, "creating pod quota-eb-") {
		t.Errorf("message %q does not quote the API server", cond.Message)
	}
	if err := k8s.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// Nothing the run watches changes: the error's backoff retries.
	waitPods(t, ns, "quota", "quota-eb-0", "quota-eb-1")
	waitPhase(t, client.ObjectKeyFromObject(run), ebv1.PhasePending, ebv1.ReasonUnitsPending)
}

func TestVerbsTransportFails(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	run := &ebv1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: "rdma", Namespace: ns},
		Spec: ebv1.EventBuilderRunSpec{
			Units:   2,
			Builder: ebv1.BuilderSpec{Image: "eventbuilder/builder:test", Transport: ebv1.TransportVerbs},
		},
	}
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	cond := waitPhase(t, client.ObjectKeyFromObject(run), ebv1.PhaseFailed, ebv1.ReasonUnsupportedTransport)
	if !strings.Contains(cond.Message, "spec.builder.transport") {
		t.Errorf("message %q does not name spec.builder.transport", cond.Message)
	}
	expectEvent(t, ns, "rdma", ebv1.ReasonUnsupportedTransport)
	if pods, err := runPods(ctx, ns, "rdma"); err != nil || len(pods) != 0 {
		t.Errorf("a failed run got %d pods (err %v), want none", len(pods), err)
	}
}

func TestInvalidRunsAreRejected(t *testing.T) {
	requireEnvtest(t)
	ns := newNamespace(t)
	valid := func() map[string]any {
		return map[string]any{
			"units":   int64(2),
			"builder": map[string]any{"image": "eventbuilder/builder:test"},
		}
	}
	for _, tc := range []struct {
		name      string
		runName   string
		edit      func(spec map[string]any)
		wantField string
	}{
		{"zero units", "", func(s map[string]any) { s["units"] = int64(0) }, "spec.units"},
		{"too many units", "", func(s map[string]any) { s["units"] = int64(1025) }, "spec.units"},
		{"no units", "", func(s map[string]any) { delete(s, "units") }, "spec.units"},
		{"no image", "", func(s map[string]any) { delete(s["builder"].(map[string]any), "image") }, "spec.builder.image"},
		{"empty image", "", func(s map[string]any) { s["builder"].(map[string]any)["image"] = "" }, "spec.builder.image"},
		{"bogus transport", "", func(s map[string]any) { s["builder"].(map[string]any)["transport"] = "bogus" }, "spec.builder.transport"},
		{"bogus pull policy", "", func(s map[string]any) { s["builder"].(map[string]any)["imagePullPolicy"] = "Sometimes" }, "spec.builder.imagePullPolicy"},
		{"zero packing factor", "", func(s map[string]any) { s["builder"].(map[string]any)["packingFactor"] = int64(0) }, "spec.builder.packingFactor"},
		{"tiny fragments", "", func(s map[string]any) {
			s["builder"].(map[string]any)["source"] = map[string]any{"generator": map[string]any{"fragmentSize": int64(4)}}
		}, "spec.builder.source.generator.fragmentSize"},
		{"no data source", "", func(s map[string]any) { s["builder"].(map[string]any)["source"] = map[string]any{} }, "spec.builder.source"},
		{"name too long for pod hostnames", strings.Repeat("a", 56), func(map[string]any) {}, "metadata.name"},
		{"name not a DNS label", "run.1", func(map[string]any) {}, "metadata.name"},
		{"peer list over the argument limit", strings.Repeat("a", 55), func(s map[string]any) { s["units"] = int64(1024) }, "metadata.name"},
		{"spares without a fabric", "", func(s map[string]any) { s["spares"] = int64(2) }, "set spec.fabricRef"},
		{"{numa} without a fabric", "", func(s map[string]any) {
			s["resources"] = map[string]any{"cpus": int64(2), "memory": "1Gi", "rdma": "rdma/hca_numa{numa}"}
		}, "only a run on a Fabric has"},
		{"cpus without memory", "", func(s map[string]any) { s["resources"] = map[string]any{"cpus": int64(2)} }, "spec.resources.memory"},
		{"rdma without pinned cpus", "", func(s map[string]any) { s["resources"] = map[string]any{"rdma": "rdma/hca"} }, "spec.resources.cpus"},
		{"bogus hugepage size", "", func(s map[string]any) {
			s["resources"] = map[string]any{"cpus": int64(2), "memory": "1Gi", "hugepages": map[string]any{"pageSize": "4Ki", "size": "1Gi"}}
		}, "spec.resources.hugepages.pageSize"},
		{"bogus failure policy", "", func(s map[string]any) { s["failurePolicy"] = "Pray" }, "spec.failurePolicy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := valid()
			tc.edit(spec)
			name := tc.runName
			if name == "" {
				name = "invalid"
			}
			run := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": ebv1.GroupVersion.String(),
				"kind":       "EventBuilderRun",
				"metadata":   map[string]any{"name": name, "namespace": ns},
				"spec":       spec,
			}}
			err := k8s.Create(context.Background(), run)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: got %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tc.wantField) {
				t.Errorf("error does not name %s: %v", tc.wantField, err)
			}
			t.Log(err)
		})
	}
}

// The samples that docs and `make demo` apply are valid.
func TestSamplesAreValid(t *testing.T) {
	requireEnvtest(t)
	ns := newNamespace(t)
	for _, file := range []string{
		"eventbuilder_v1alpha1_eventbuilderrun.yaml",
		"eventbuilder_v1alpha1_fabric.yaml",
		"eventbuilder_v1alpha1_eventbuilderrun_fabric.yaml",
	} {
		raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "samples", file))
		if err != nil {
			t.Fatal(err)
		}
		sample := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &sample.Object); err != nil {
			t.Fatalf("parse %s: %v", file, err)
		}
		if sample.GetKind() != "Fabric" {
			sample.SetNamespace(ns)
		}
		if err := k8s.Create(context.Background(), sample, client.DryRunAll); err != nil {
			t.Errorf("the API server rejects %s: %v", file, err)
		}
	}
}

// The chart ships the CRD and manager role that controller-gen writes to config/.
func TestChartCopiesGeneratedManifests(t *testing.T) {
	for generated, copied := range map[string]string{
		"config/crd/bases/eventbuilder.daq.io_eventbuilderruns.yaml": "charts/eventbuilder-operator/crds/eventbuilder.daq.io_eventbuilderruns.yaml",
		"config/crd/bases/eventbuilder.daq.io_fabrics.yaml":          "charts/eventbuilder-operator/crds/eventbuilder.daq.io_fabrics.yaml",
		"config/rbac/role.yaml":                                      "charts/eventbuilder-operator/files/manager-role.yaml",
	} {
		want, err := os.ReadFile(filepath.Join(repoRoot, generated))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(repoRoot, copied))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s; run operator/hack/generate.sh", copied, generated)
		}
	}
}

// waitPhase waits for the run's phase and Ready reason and returns the condition.
func waitPhase(t *testing.T, key client.ObjectKey, phase ebv1.RunPhase, reason string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	eventually(t, "phase "+string(phase), func() error {
		run := &ebv1.EventBuilderRun{}
		if err := k8s.Get(context.Background(), key, run); err != nil {
			return err
		}
		cond = meta.FindStatusCondition(run.Status.Conditions, ebv1.ConditionReady)
		if run.Status.Phase != phase || cond == nil || cond.Reason != reason || cond.ObservedGeneration != run.Generation {
			return fmt.Errorf("phase %s, Ready condition %+v", run.Status.Phase, cond)
		}
		return nil
	})
	return cond
}

// expectEvent waits for an Event about the run with the given reason.
func expectEvent(t *testing.T, ns, run, reason string) {
	t.Helper()
	eventually(t, "event "+reason, func() error {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "EventBuilderRun" && e.Regarding.Name == run && e.Reason == reason {
				return nil
			}
			seen = append(seen, e.Reason)
		}
		return fmt.Errorf("events seen: %v", seen)
	})
}
