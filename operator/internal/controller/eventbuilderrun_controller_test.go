package controller

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderemu"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// startPod plays scheduler and kubelet: binds a pod the operator did not
// place to a node, reports it running with an IP, and starts its builder:
// an emulated eb-builder (builderemu) started from the pod's command line,
// reading its token from the Secret the pod mounts (edit, if given,
// changes what the kubelet finds in that Secret). The readiness prober
// then keeps the pod's Ready condition from GET /readyz.
func startPod(t *testing.T, pod *corev1.Pod, edit ...func(*corev1.Secret)) *builderemu.Builder {
	t.Helper()
	ctx := context.Background()
	bind(t, pod)
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: builderpod.ControlSecretName(pod.Labels[builderpod.LabelRun])}, secret); err != nil {
		t.Fatalf("control secret of pod %s: %v", pod.Name, err)
	}
	for _, e := range edit {
		e(secret)
	}
	b, err := farm.StartPod(string(pod.UID), pod, secret, builderpod.LabelRun)
	if err != nil {
		t.Fatalf("starting the builder of pod %s: %v", pod.Name, err)
	}
	prober.add(pod)
	t.Cleanup(func() { prober.lose(pod.UID) })
	attachDataNetwork(t, pod)
	ip := nextPodIP()
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		PodIP:      ip,
		PodIPs:     []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}},
	}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatalf("mark pod %s running: %v", pod.Name, err)
	}
	return b
}

// multusDown holds the UIDs of pods whose node runs no Multus: started,
// they get no network-status.
var multusDown sync.Map

// attachDataNetwork plays Multus for a pod that asks for a network (the
// NPWG interface: k8s.v1.cni.cncf.io/networks in, network-status out,
// written before the pod runs): eb0 gets an address of 192.168.0.0/16.
func attachDataNetwork(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if _, down := multusDown.Load(pod.UID); down {
		return
	}
	var asked []struct{ Name, Namespace, Interface string }
	if raw := pod.Annotations[builderpod.NetworksAnnotation]; raw == "" {
		return
	} else if err := json.Unmarshal([]byte(raw), &asked); err != nil || len(asked) != 1 {
		t.Fatalf("pod %s: %s %q: %v", pod.Name, builderpod.NetworksAnnotation, raw, err)
	}
	n := podIPsHandedOut.Add(1)
	status, _ := json.Marshal([]map[string]any{
		{"name": "podnet", "interface": "eth0", "default": true},
		{"name": cmp.Or(asked[0].Namespace, pod.Namespace) + "/" + asked[0].Name, "interface": asked[0].Interface,
			"ips": []string{fmt.Sprintf("192.168.%d.%d", n>>8&0xff, n&0xff)}},
	})
	pod.Annotations[builderpod.NetworkStatusAnnotation] = string(status)
	if err := k8s.Update(context.Background(), pod); err != nil {
		t.Fatalf("pod %s: write %s: %v", pod.Name, builderpod.NetworkStatusAnnotation, err)
	}
}

// podIPsHandedOut counts the distinct IPs handed out to pods started (as
// a CNI would): the operator addresses the ranks of a configure by them.
var podIPsHandedOut atomic.Uint32

func nextPodIP() string {
	n := podIPsHandedOut.Add(1)
	return fmt.Sprintf("10.%d.%d.%d", 244+n>>16&0xf, n>>8&0xff, n&0xff)
}

// bind plays the scheduler: a pod not bound yet goes to the node its
// affinity names (a fabric pod), or to any node; then the pod is read back.
func bind(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if pod.Spec.NodeName != "" {
		return
	}
	ctx := context.Background()
	node := builderpod.Node(pod)
	if node == "" {
		node = "scheduled-node"
	}
	binding := &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := k8s.SubResource("binding").Create(ctx, pod, binding); err != nil {
		t.Fatalf("bind pod %s: %v", pod.Name, err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatalf("get pod %s: %v", pod.Name, err)
	}
}

func runPods(ctx context.Context, ns, run string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{builderpod.LabelRun: run})
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods.Items, err
}

// commands spells what a builder was sent: "configure@1 start", with
// "!" after a command refused.
func commands(b *builderemu.Builder) string {
	var out []string
	for _, r := range b.Requests() {
		c := r.Command
		if r.Command == "configure" {
			c += fmt.Sprintf("@%d", r.Epoch)
		}
		if r.Status != http.StatusOK {
			c += "!"
		}
		out = append(out, c)
	}
	return strings.Join(out, " ")
}

// waitCommands waits for a builder to have been sent want; the commands
// in refusedOK may appear refused ("stop!" for "stop") where want has them
// accepted.
func waitCommands(t *testing.T, what string, b *builderemu.Builder, want string, refusedOK ...string) {
	t.Helper()
	eventually(t, what+" sent "+want, func() error {
		got := commands(b)
		for _, r := range refusedOK {
			got = strings.ReplaceAll(got, r, strings.TrimSuffix(r, "!"))
		}
		if got != want {
			return fmt.Errorf("sent %q", got)
		}
		return nil
	})
}

// createRun creates a run of units without a fabric, in a new namespace,
// and waits for its pods (<name>-eb-0 …, returned in rank order).
func createRun(t *testing.T, name string, units int32) (client.ObjectKey, []corev1.Pod) {
	t.Helper()
	run := &ebv1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: newNamespace(t)},
		Spec:       ebv1.EventBuilderRunSpec{Units: units, Builder: ebv1.BuilderSpec{Image: "eventbuilder/builder:test"}},
	}
	if err := k8s.Create(context.Background(), run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	names := make([]string, units)
	for i := range names {
		names[i] = fmt.Sprintf("%s-eb-%d", name, i)
	}
	byName := waitPods(t, run.Namespace, name, names...)
	pods := make([]corev1.Pod, units)
	for i, n := range names {
		pods[i] = byName[n]
	}
	return client.ObjectKeyFromObject(run), pods
}

// startRun creates a run of units without a fabric (createRun), starts
// every pod's builder (startPod) and waits for phase Running.
func startRun(t *testing.T, name string, units int32) (client.ObjectKey, []corev1.Pod, []*builderemu.Builder) {
	t.Helper()
	key, pods := createRun(t, name, units)
	emu := make([]*builderemu.Builder, len(pods))
	for i := range pods {
		emu[i] = startPod(t, &pods[i])
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	return key, pods, emu
}

func getRun(t *testing.T, key client.ObjectKey) *ebv1.EventBuilderRun {
	t.Helper()
	run := &ebv1.EventBuilderRun{}
	if err := k8s.Get(context.Background(), key, run); err != nil {
		t.Fatal(err)
	}
	return run
}

func TestRunLifecycle(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)

	// Packing factor, fragment size, transport, pull policy and state left to the defaults.
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
		b.Source == nil || b.Source.Generator == nil || b.Source.Generator.FragmentSize != 128 || run.Spec.State != ebv1.StateRunning {
		t.Errorf("defaults not applied: %+v (source %+v) state %q", b, b.Source, run.Spec.State)
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
	secret := &corev1.Secret{}
	eventually(t, "secret demo-control", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-control"}, secret)
	})
	if tok := secret.Data["token"]; len(tok) != 64 || !metav1.IsControlledBy(secret, run) || secret.Immutable == nil || !*secret.Immutable {
		t.Errorf("secret: token of %d characters, owners %v, immutable %v; want 32 random bytes in hex, the run as controller, immutable",
			len(tok), secret.OwnerReferences, secret.Immutable)
	}
	if key := secret.Data["data-key"]; len(key) != 64 || string(key) == string(secret.Data["token"]) {
		t.Errorf("secret: data key of %d characters; want 32 random bytes in hex of its own", len(key))
	}
	expectEvent(t, ns, "demo", "ControlSecretCreated")

	var pods []corev1.Pod
	eventually(t, "3 pods", func() (err error) {
		if pods, err = runPods(ctx, ns, "demo"); err == nil && len(pods) != 3 {
			err = fmt.Errorf("%d pods", len(pods))
		}
		return err
	})
	for rank, pod := range pods {
		name := fmt.Sprintf("demo-eb-%d", rank)
		c := pod.Spec.Containers[0]
		wantArgs := []string{"--rank", strconv.Itoa(rank), "--http-port", "8080", "--token-file", "/var/run/eventbuilder/control/token",
			"--data-key-file", "/var/run/eventbuilder/control/data-key",
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
		case c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz":
			t.Errorf("pod %s probes: readiness %+v liveness %+v", pod.Name, c.ReadinessProbe, c.LivenessProbe)
		case pod.Annotations[builderpod.ControlSecretAnnotation] != string(secret.UID):
			t.Errorf("pod %s annotations %v, want the control secret's UID", pod.Name, pod.Annotations)
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

	// The kubelet starts the builders; the operator configures them with
	// the table of epoch 1 and their ranks, then starts them, with the
	// Secret's token.
	emu := make([]*builderemu.Builder, len(pods))
	for i := range pods {
		emu[i] = startPod(t, &pods[i])
	}
	for i, b := range emu {
		waitCommands(t, pods[i].Name, b, "configure@1 start")
		for _, r := range b.Requests() {
			if !r.Authorized || (r.Command == "configure" && r.Rank != int32(i)) {
				t.Errorf("%s got %+v", pods[i].Name, r)
			}
		}
	}
	expectEvent(t, ns, "demo", "BuildersConfigured")
	expectEvent(t, ns, "demo", "BuildersStarted")

	eventually(t, "phase Running with events and rates", func() error {
		if err := k8s.Get(ctx, key, run); err != nil {
			return err
		}
		st := run.Status
		ready := meta.FindStatusCondition(st.Conditions, ebv1.ConditionReady)
		configured := meta.FindStatusCondition(st.Conditions, ebv1.ConditionConfigured)
		switch {
		case st.Phase != ebv1.PhaseRunning || st.ReadyUnits != 3:
			return fmt.Errorf("phase %s, %d ready", st.Phase, st.ReadyUnits)
		case ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != run.Generation:
			return fmt.Errorf("Ready condition %+v at generation %d", ready, run.Generation)
		case configured == nil || configured.Status != metav1.ConditionTrue:
			return fmt.Errorf("Configured condition %+v", configured)
		// Three builders at 10 000 events/s of 1 kB each: 30 000 events/s,
		// 0.24 Gb/s, once all three have a baseline from an earlier poll.
		case st.EventsBuilt <= 0 || st.BytesBuilt != st.EventsBuilt*1000 || st.EventRate < 20000 || st.ThroughputGbps == "0.000":
			return fmt.Errorf("events %d bytes %d rate %d/s %s Gb/s", st.EventsBuilt, st.BytesBuilt, st.EventRate, st.ThroughputGbps)
		case len(st.Units) != 3:
			return fmt.Errorf("units %+v", st.Units)
		}
		var sum int64
		for i, u := range st.Units {
			if u.Rank != int32(i) || u.Pod != pods[i].Name || !u.Ready || u.State != builderapi.StateRunning || u.Epoch != 1 {
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

	// A builder in ERROR fails the run; the operator leaves it so (the
	// error stays readable). Its pod deleted, its peers lose it; the new
	// pod's builder rejoins the set at a new epoch of the same table
	// (configured on every builder), and the run recovers.
	emu[1].Fail("peer 0 sent a corrupt MFP")
	cond := waitPhase(t, key, ebv1.PhaseFailed, ebv1.ReasonBuilderError)
	if !strings.Contains(cond.Message, "corrupt MFP") {
		t.Errorf("message %q does not quote the builder's error", cond.Message)
	}
	expectEvent(t, ns, "demo", ebv1.ReasonBuilderError)
	if err := k8s.Delete(ctx, &pods[1]); err != nil {
		t.Fatal(err)
	}
	var pod1 corev1.Pod
	eventually(t, "demo-eb-1 recreated", func() error {
		live, err := livePods(ctx, ns, "demo")
		if p, ok := live["demo-eb-1"]; err == nil && (!ok || p.UID == pods[1].UID) {
			err = errors.New("not yet")
		}
		pod1 = live["demo-eb-1"]
		return err
	})
	farm.Kill(string(pods[1].UID))
	b1 := startPod(t, &pod1)
	waitCommands(t, "the new demo-eb-1", b1, "configure@2 start")
	waitCommands(t, "demo-eb-0", emu[0], "configure@1 start configure@2")
	// Every pod was running at epoch 2: the table configured addresses each
	// rank by its pod's IP, so the data plane needs no cluster DNS.
	live, err := livePods(ctx, ns, "demo")
	if err != nil {
		t.Fatal(err)
	}
	for rank, address := range emu[0].Addresses() {
		pod := live[fmt.Sprintf("demo-eb-%d", rank)]
		if want := net.JoinHostPort(pod.Status.PodIP, "7000"); address != want {
			t.Errorf("epoch 2 gives rank %d the address %q, want its pod's IP, %q", rank, address, want)
		}
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	if fo := getRun(t, key).Status.LastFailover; fo == nil || fo.Outcome != ebv1.OutcomeRejoined || fo.Epoch != 2 {
		t.Errorf("lastFailover %+v, want Rejoined at epoch 2", fo)
	}

	// Scale down: the pods of ranks 1 and 2 go, the rank table shrinks.
	// A running set cannot change its number of ranks: the operator stops
	// it, publishes the table and starts the builder of rank 0 again on
	// it, in its pod (no restart).
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
	// The stop may reach rank 0 after the set stopped (409 READY, done: "stop!").
	waitCommands(t, "demo-eb-0", emu[0], "configure@1 start configure@2 stop configure@3 start", "stop!")
	eventually(t, "status of 1 unit, Running at epoch 3", func() error {
		if err := k8s.Get(ctx, key, run); err != nil {
			return err
		}
		if st := run.Status; st.ObservedGeneration != run.Generation || len(st.Units) != 1 || st.Phase != ebv1.PhaseRunning ||
			st.Epoch != 3 || st.Units[0].Epoch != 3 || st.LastFailover != nil {
			return fmt.Errorf("generation %d: %+v", run.Generation, st)
		}
		return nil
	})
	var again corev1.Pod
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-eb-0"}, &again); err != nil || again.UID != pods[0].UID {
		t.Errorf("pod demo-eb-0 replaced by a new table (%v)", err)
	}

	// Deleting the ConfigMap replans, at the next epoch, never back at 1;
	// the pod is kept and configured with it.
	if err := k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-ranks"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rank table epoch 4", func() error {
		doc, err := rankTable(ctx, ns, "demo")
		if err == nil && doc.Epoch != 4 {
			err = fmt.Errorf("epoch %d", doc.Epoch)
		}
		return err
	})
	waitCommands(t, "demo-eb-0", emu[0], "configure@1 start configure@2 stop configure@3 start configure@4", "stop!")
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-eb-0"}, &again); err != nil || again.UID != pods[0].UID {
		t.Errorf("pod demo-eb-0 replaced by a replan (%v)", err)
	}
}

// A run that has built and loses a unit's pod is Degraded, naming the
// unit, never Pending; the pod recreated and its builder back, it rejoins
// and the run is Running.
func TestMissingUnitDegradesARunThatBuilt(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	key, pods, _ := startRun(t, "missing", 2)
	if err := k8s.Delete(ctx, &pods[1]); err != nil {
		t.Fatal(err)
	}
	farm.Kill(string(pods[1].UID))
	// A poll of rank 0 that times out on a loaded machine names it too,
	// rightly, for that poll: the message must come to name rank 1 alone.
	waitPhaseSaying(t, key, ebv1.PhaseDegraded, ebv1.ReasonUnitsMissing, "1 of 2 units are not building: rank 1 (")
	var again corev1.Pod
	eventually(t, "missing-eb-1 recreated", func() error {
		live, err := livePods(ctx, key.Namespace, "missing")
		if p, ok := live["missing-eb-1"]; err == nil && (!ok || p.UID == pods[1].UID) {
			err = errors.New("not yet")
		}
		again = live["missing-eb-1"]
		return err
	})
	startPod(t, &again)
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
}

// A node restart recreates its pods' sandboxes: a builder comes back at
// another IP while keeping its rank, and the builders configured before
// dial the old one, connecting for ever, reporting nobody lost. The
// operator sees the pod answer from another IP than its peers were given
// and publishes a new epoch carrying the address as it is (lastFailover
// Rejoined, AddressChanged), which every builder is configured with.
func TestMovedAddressIsGivenToEveryBuilderAtANewEpoch(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	key, pods, emu := startRun(t, "moved", 3)
	// The kubelet recreates the sandbox: a new IP. (Its builder process
	// restarts too, which its peers report as lost, a rejoin of its own:
	// here only the address moves.)
	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(&pods[1]), pod); err != nil {
		t.Fatal(err)
	}
	moved := nextPodIP()
	pod.Status.PodIP, pod.Status.PodIPs = moved, []corev1.PodIP{{IP: moved}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	fo := waitFailoverConfigured(t, key, 2)
	if m := fo.Moves; fo.Outcome != ebv1.OutcomeRejoined || len(m) != 1 || m[0].FailedRank != 1 || m[0].Reason != runplan.ReasonAddressChanged || m[0].SpareRank != nil {
		b, _ := json.Marshal(fo)
		t.Errorf("lastFailover %s, want rank 1 Rejoined at epoch 2 for %s", b, runplan.ReasonAddressChanged)
	}
	for i := range emu {
		waitCommands(t, pods[i].Name, emu[i], "configure@1 start configure@2")
		if got := emu[i].Addresses(); len(got) != 3 || !strings.HasPrefix(got[1], moved+":") {
			t.Errorf("rank %d dials %v at epoch 2, want rank 1 at its new IP %s", i, got, moved)
		}
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
}

// Ready means building: a set whose builders are all RUNNING but whose
// event stream stands still for longer than StallAfter (a unit connecting
// to a peer it cannot resolve, the rest waiting for it) is Degraded, not
// Ready, naming the units, what they do and how long; moving again, it is
// Running.
func TestStalledSetIsNotReady(t *testing.T) {
	requireEnvtest(t)
	key, pods, _ := startRun(t, "stall", 2)
	farm.SetStalled(string(pods[1].UID), true)
	stalledAt := time.Now()
	waitPhase(t, key, ebv1.PhaseDegraded, ebv1.ReasonUnitsNotBuilding)
	seen := time.Since(stalledAt)
	// Each rank's last progress is the poll that last saw it build, so the
	// first message may name one rank: the other's stallAfter ends a
	// poll later. Both are named once both stood still that long.
	var cond *metav1.Condition
	eventually(t, "both ranks named as not building", func() error {
		cond = meta.FindStatusCondition(getRun(t, key).Status.Conditions, ebv1.ConditionReady)
		if cond == nil || cond.Reason != ebv1.ReasonUnitsNotBuilding ||
			!strings.Contains(cond.Message, "ranks 0 (connecting, node scheduled-node), 1 (connecting, node scheduled-node) have built nothing for") {
			return fmt.Errorf("Ready condition %+v", cond)
		}
		return nil
	})
	for _, want := range []string{"rank 0 cannot connect to its peers", "every builder is RUNNING"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("message %q does not say %q", cond.Message, want)
		}
	}
	if seen < stallAfter {
		t.Errorf("not Ready %s after the stall, before stallAfter (%s)", seen, stallAfter)
	}
	t.Logf("a stalled set is Degraded %s after it stalled (stallAfter %s, poll interval %s)", seen.Round(time.Millisecond), stallAfter, pollInterval)
	expectEvent(t, key.Namespace, key.Name, ebv1.ReasonUnitsNotBuilding)

	farm.SetStalled(string(pods[1].UID), false)
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
}

// spec.state drives the builders: Paused pauses them, Running resumes
// them, Stopped stops them (pods stay), Running starts them again.
func TestRunStateDrivesBuilders(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	key, pods, emu := startRun(t, "states", 2)
	ns := key.Namespace

	setState := func(s ebv1.RunState) {
		t.Helper()
		run := getRun(t, key)
		patch := client.MergeFrom(run.DeepCopy())
		run.Spec.State = s
		if err := k8s.Patch(ctx, run, patch); err != nil {
			t.Fatal(err)
		}
	}
	// Pause acts on the whole running set: the builder that the operator
	// reaches second may already be PAUSED, which is no error.
	setState(ebv1.StatePaused)
	cond := waitPhase(t, key, ebv1.PhasePaused, ebv1.ReasonRunPaused)
	for _, b := range emu {
		if b.State() != builderemu.Paused || !strings.HasSuffix(commands(b), "pause") && !strings.HasSuffix(commands(b), "pause!") {
			t.Errorf("builder %s: %s, sent %q", b.Key(), b.State(), commands(b))
		}
	}
	if !strings.Contains(cond.Message, "2 builders PAUSED") {
		t.Errorf("message %q", cond.Message)
	}
	expectEvent(t, ns, "states", "BuildersPaused")
	// Paused builders build nothing: the counters stand still over three
	// more polls of the builders.
	paused := getRun(t, key).Status
	for poll := range 3 {
		last := getRun(t, key).Status.LastSampleTime
		eventually(t, fmt.Sprintf("poll %d while paused", poll+1), func() error {
			if now := getRun(t, key).Status.LastSampleTime; now == nil || last != nil && !now.After(last.Time) {
				return fmt.Errorf("status.lastSampleTime %v, not after %v", now, last)
			}
			return nil
		})
	}
	if after := getRun(t, key).Status.EventsBuilt; after != paused.EventsBuilt {
		t.Errorf("events built while paused: %d -> %d", paused.EventsBuilt, after)
	}

	setState(ebv1.StateRunning)
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	expectEvent(t, ns, "states", "BuildersResumed")

	setState(ebv1.StateStopped)
	waitPhase(t, key, ebv1.PhaseStopped, ebv1.ReasonRunStopped)
	expectEvent(t, ns, "states", "BuildersStopped")
	if now := waitPods(t, ns, "states", "states-eb-0", "states-eb-1"); now["states-eb-0"].UID != pods[0].UID {
		t.Errorf("a stopped run's pod was replaced")
	}

	setState(ebv1.StateRunning)
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	for _, b := range emu {
		cmds := strings.ReplaceAll(commands(b), "!", "") // pause and stop may reach a builder the set already took there
		if cmds != "configure@1 start pause resume stop start" {
			t.Errorf("builder %s was sent %q", b.Key(), commands(b))
		}
	}
}

// Without a fabric there is no spare: a unit its peers lost waits while
// its builder does not answer (no epoch is spent), and rejoins on its own
// rank once it answers again (here: its process restarted in its pod),
// by the same table at the next epoch, configured on every builder; the
// set switches to it together, the pods untouched.
func TestLostUnitRejoins(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	key, pods, emu := startRun(t, "rejoin", 3)
	ns := key.Namespace

	// Rank 1's builder dies; its peers mark it lost. While nothing answers
	// there, the operator waits: polls go by at epoch 1.
	uid := string(pods[1].UID)
	farm.Kill(uid)
	var seen *metav1.MicroTime
	eventually(t, "two polls that find rank 1 silent and lost", func() error {
		st := getRun(t, key).Status
		if len(st.Units) != 3 || st.Units[1].State != "" || !slices.Equal(st.Units[0].LostPeers, []int32{1}) || st.LastSampleTime == nil {
			return fmt.Errorf("unit rows %+v", st.Units)
		}
		if seen == nil {
			seen = st.LastSampleTime
		}
		if !st.LastSampleTime.After(seen.Time) {
			return errors.New("one poll so far")
		}
		return nil
	})
	if st := getRun(t, key).Status; st.Epoch != 1 || st.LastFailover != nil {
		t.Fatalf("a silent lost unit changed the table: epoch %d, lastFailover %+v", st.Epoch, st.LastFailover)
	}

	// The kubelet restarts the container: a new builder, NOT_READY with no
	// table, answers at the same address. It is configured with the new
	// epoch only, never with the one its peers lost it in.
	emu[1] = farm.Restart(uid)
	fo := waitFailoverConfigured(t, key, 2)
	if m := fo.Moves; fo.Outcome != ebv1.OutcomeRejoined || len(m) != 1 || m[0].Unit != 1 || m[0].FailedRank != 1 ||
		m[0].Reason != "PeerLost" || m[0].SpareRank != nil || fo.CompletedTime.Before(&fo.ObservedTime) ||
		fo.ConfiguredTime.Before(&fo.CompletedTime) {
		b, _ := json.Marshal(fo)
		t.Errorf("lastFailover %s, want unit 1 of rank 1 Rejoined at epoch 2 (PeerLost, no spare), observed <= completed <= configured", b)
	}
	waitCommands(t, "the restarted rejoin-eb-1", emu[1], "configure@2 start")
	for _, i := range []int{0, 2} {
		waitCommands(t, pods[i].Name, emu[i], "configure@1 start configure@2")
	}
	doc, err := rankTable(ctx, ns, "rejoin")
	if err != nil || doc.Epoch != 2 || roles(doc) != "LLL" {
		t.Errorf("rank table: epoch %d, %s (%v); want the same table, LLL, at epoch 2", doc.Epoch, roles(doc), err)
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	eventually(t, "every unit on epoch 2, nobody lost", func() error {
		for _, u := range getRun(t, key).Status.Units {
			if u.Epoch != 2 || u.PendingEpoch != 0 || len(u.LostPeers) != 0 || u.State != builderapi.StateRunning {
				return fmt.Errorf("unit row %+v", u)
			}
		}
		return nil
	})
	for i, b := range emu {
		if e, p := b.Epoch(); e != 2 || p != 0 || b.State() != builderemu.Running {
			t.Errorf("builder of rank %d: %s at epoch %d pending %d", i, b.State(), e, p)
		}
	}
	expectEvent(t, ns, "rejoin", "UnitRejoined")
	expectEvent(t, ns, "rejoin", "FailoverConfigured")
	expectPodsKept(t, pods)
}

// expectPodsKept checks that the run's pods are still pods, none
// replaced (a new epoch reaches the builders by configure).
func expectPodsKept(t *testing.T, pods []corev1.Pod) {
	t.Helper()
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	now := waitPods(t, pods[0].Namespace, pods[0].Labels[builderpod.LabelRun], names...)
	for _, p := range pods {
		if now[p.Name].UID != p.UID {
			t.Errorf("pod %s replaced", p.Name)
		}
	}
}

// rejoinRecord reads the rejoin attempts recorded on the run's rank-table
// ConfigMap.
func rejoinRecord(ctx context.Context, key client.ObjectKey) (runplan.RejoinAttempts, error) {
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name + "-ranks"}, cm); err != nil {
		return nil, err
	}
	return record[runplan.RejoinAttempts](cm, annRejoins)
}

// waitAllAt waits for every unit of the run to report RUNNING at one
// epoch of at least from, nobody lost, and returns that epoch.
func waitAllAt(t *testing.T, key client.ObjectKey, from int64) int64 {
	t.Helper()
	var epoch int64
	eventually(t, fmt.Sprintf("every unit RUNNING at one epoch from %d, nobody lost", from), func() error {
		st := getRun(t, key).Status
		epoch = st.Epoch
		if epoch < from || len(st.Units) == 0 {
			return fmt.Errorf("epoch %d", epoch)
		}
		for _, u := range st.Units {
			if u.Epoch != epoch || u.PendingEpoch != 0 || len(u.LostPeers) != 0 || u.State != builderapi.StateRunning {
				return fmt.Errorf("unit row %+v at table epoch %d", u, epoch)
			}
		}
		return nil
	})
	return epoch
}

// A unit that loses its set while its builder still answers the operator
// (a partition: its data network down, its control API up) goes on alone
// in its session, RUNNING at the epoch it was lost in. Configured with the
// rejoin epoch as it is, it would join the set at its own place in the
// event stream, out of step: refused (the emulation does as eb-builder:
// lost both ways), it would never rejoin. So the operator resets it
// first, and it rejoins as a restarted process does: configured with the
// new epoch and started. A partition that healed before the operator
// looked rejoins at once; one that lasts is not tried while its builder
// reaches none of the peers it lost; a fresh process cut off is taken
// back, cannot join, waits its back-off and, healed, rejoins.
func TestPartitionedUnitIsResetToRejoin(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	key, pods, emu := startRun(t, "partition", 3)
	ns := key.Namespace

	// Healed already: rank 1 and its peers lost each other (its own
	// report first: the operator acts on its peers' majority).
	emu[1].LosePeer(0)
	emu[1].LosePeer(2)
	emu[0].LosePeer(1)
	emu[2].LosePeer(1)
	if fo := waitFailoverConfigured(t, key, 2); fo.Outcome != ebv1.OutcomeRejoined || len(fo.Moves) != 1 || fo.Moves[0].FailedRank != 1 {
		t.Errorf("lastFailover %+v, want rank 1 Rejoined at epoch 2", fo)
	}
	waitCommands(t, "the partitioned partition-eb-1", emu[1], "configure@1 start reset configure@2 start")
	if e := waitAllAt(t, key, 2); e != 2 {
		t.Errorf("the healed partition took until epoch %d, want one rejoin (2)", e)
	}
	expectEvent(t, ns, "partition", "BuildersReset")
	eventually(t, "the rejoin record cleared", func() error {
		if a, err := rejoinRecord(ctx, key); err != nil || len(a) != 0 {
			return fmt.Errorf("rejoin attempts %+v (%v)", a, err)
		}
		return nil
	})

	// Cut off now, still in its session: it reaches none of the peers it
	// lost (lost_peers_reachable), and no rejoin is tried while the cut
	// lasts (each would cost the set a join timeout): the epoch stays.
	uid := string(pods[1].UID)
	farm.SetUnreachable(uid, true)
	waitPhase(t, key, ebv1.PhaseDegraded, ebv1.ReasonUnitsLostByPeers)
	cutSeen := getRun(t, key).Status.LastSampleTime
	eventually(t, "three polls more of the cut-off run", func() error {
		if seen := getRun(t, key).Status.LastSampleTime; seen.Sub(cutSeen.Time) < 3*pollInterval {
			return fmt.Errorf("last sample %v, cut seen at %v", seen, cutSeen)
		}
		return nil
	})
	if st := getRun(t, key).Status; st.Epoch != 2 {
		t.Errorf("epoch %d while rank 1 was cut off in its session, want 2: a rejoin was tried into a set it cannot reach: %+v",
			st.Epoch, st.LastFailover)
	}
	// Its process restarts while the cut lasts: a fresh process has no
	// peers to dial, so it is taken back at once (epoch 3), cannot join,
	// and waits its back-off; its network back, the next rejoin holds.
	emu[1] = farm.Restart(uid)
	eventually(t, "the rejoin at epoch 3 recorded as failed", func() error {
		if a, err := rejoinRecord(ctx, key); err != nil || !a[1].Failed || a[1].Epoch != 3 {
			return fmt.Errorf("rejoin attempts %+v (%v)", a, err)
		}
		return nil
	})
	farm.SetUnreachable(uid, false)
	last := waitAllAt(t, key, 4)
	want1, want := "configure@3 start", "configure@1 start configure@2"
	for e := int64(3); e <= last; e++ {
		if e > 3 {
			want1 += fmt.Sprintf(" reset configure@%d start", e)
		}
		want += fmt.Sprintf(" configure@%d", e)
	}
	waitCommands(t, "partition-eb-1", emu[1], want1)
	for _, i := range []int{0, 2} {
		waitCommands(t, pods[i].Name, emu[i], want)
	}
	for i, b := range emu {
		if e, p := b.Epoch(); e != last || p != 0 || b.State() != builderemu.Running {
			t.Errorf("builder of rank %d: %s at epoch %d pending %d, want RUNNING at %d", i, b.State(), e, p, last)
		}
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	expectPodsKept(t, pods)
}

// A record that does not parse (hand-edited, corrupt) does not wedge the
// run: it is reported by a Warning event naming the annotation and the
// parse error, and removed; the run goes on.
func TestInvalidRecordIsDropped(t *testing.T) {
	requireEnvtest(t)
	for _, tc := range []struct{ name, annotation, value, reason string }{
		{"rejoin", annRejoins, `{"1":{"attempts":"two"}}`, "RejoinRecordInvalid"},
		{"failover", annLastFailover, `{"epoch":"three"}`, "FailoverRecordInvalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			key, pods, _ := startRun(t, "record-"+tc.name, 2)
			cm := &corev1.ConfigMap{}
			cmKey := client.ObjectKey{Namespace: key.Namespace, Name: key.Name + "-ranks"}
			if err := k8s.Get(ctx, cmKey, cm); err != nil {
				t.Fatal(err)
			}
			cm.Annotations[tc.annotation] = tc.value
			if err := k8s.Update(ctx, cm); err != nil {
				t.Fatal(err)
			}
			eventually(t, "a Warning event naming the annotation and the parse error", func() error {
				var list eventsv1.EventList
				if err := k8s.List(ctx, &list, client.InNamespace(key.Namespace)); err != nil {
					return err
				}
				for _, e := range list.Items {
					if e.Reason == tc.reason && e.Type == corev1.EventTypeWarning &&
						strings.Contains(e.Note, "annotation "+tc.annotation) && strings.Contains(e.Note, "cannot unmarshal") {
						return nil
					}
				}
				return errors.New("none yet")
			})
			eventually(t, "the annotation removed", func() error {
				if err := k8s.Get(ctx, cmKey, cm); err != nil {
					return err
				}
				if v, ok := cm.Annotations[tc.annotation]; ok {
					return fmt.Errorf("annotation %q", v)
				}
				return nil
			})
			seen := getRun(t, key).Status.LastSampleTime
			eventually(t, "the run polled again, Running", func() error {
				st := getRun(t, key).Status
				if st.Phase != ebv1.PhaseRunning || !st.LastSampleTime.After(seen.Time) {
					return fmt.Errorf("phase %s, last sample %v", st.Phase, st.LastSampleTime)
				}
				return nil
			})
			expectPodsKept(t, pods)
		})
	}
}

func TestRejoinAttemptsAnnotation(t *testing.T) {
	with := func(v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "r-ranks", Annotations: map[string]string{annRejoins: v}}}
	}
	for _, tc := range []struct {
		name string
		cm   *corev1.ConfigMap
		want runplan.RejoinAttempts
		err  string // in the error, which names the annotation
	}{
		{"no ConfigMap", nil, nil, ""},
		{"no annotation", &corev1.ConfigMap{}, nil, ""},
		{"a record", with(`{"1":{"attempts":2,"epoch":5,"time":"2030-01-01T12:00:00Z","failed":true}}`),
			runplan.RejoinAttempts{1: {Attempts: 2, Epoch: 5, Time: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC), Failed: true}}, ""},
		{"not JSON", with(`{`), nil, "unexpected end of JSON input"},
		{"a rank that is not a number", with(`{"one":{"attempts":1}}`), nil, "one"},
		{"a field of the wrong type (part read)", with(`{"1":{"epoch":3},"2":{"attempts":"two"}}`), nil, "cannot unmarshal string"},
		{"a list", with(`[]`), nil, "cannot unmarshal array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := record[runplan.RejoinAttempts](tc.cm, annRejoins)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) ||
				!strings.Contains(err.Error(), "ConfigMap r-ranks annotation eventbuilder.daq.io/rejoin-attempts")):
				t.Errorf("error %v, want one naming the annotation and saying %q", err, tc.err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("record %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A lost unit whose builder answers the operator but cannot join the set
// (its node's data network is down) would cost the set a join timeout of
// dropped events on every poll: its rejoins back off. Each one that does
// not hold (its peers report it lost again at its epoch) makes the next
// wait twice as long (rejoinBackoff: 2 s, then 4 s), said by the event
// RejoinDeferred and the Ready condition, recorded on the rank-table
// ConfigMap; one that holds clears the record.
func TestRejoinBacksOffWhileItDoesNotHold(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	key, pods, emu := startRun(t, "backoff", 3)
	ns := key.Namespace
	uid := string(pods[1].UID)
	attempts := func() (runplan.RejoinAttempts, error) {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "backoff-ranks"}, cm); err != nil {
			return nil, err
		}
		return record[runplan.RejoinAttempts](cm, annRejoins)
	}
	waitFailedRejoins := func(n int) runplan.RejoinAttempt {
		t.Helper()
		var at runplan.RejoinAttempt
		eventually(t, fmt.Sprintf("rejoin %d of rank 1 recorded as failed", n), func() error {
			a, err := attempts()
			if at = a[1]; err != nil || len(a) != 1 || at.Attempts != n || !at.Failed {
				return fmt.Errorf("rejoin attempts %+v (%v)", a, err)
			}
			return nil
		})
		return at
	}

	// Rank 1's process restarts, its node's data network down.
	farm.SetUnreachable(uid, true)
	emu[1] = farm.Restart(uid)
	first := waitFailover(t, key, 2)
	failed := waitFailedRejoins(1)
	expectEvent(t, ns, "backoff", "RejoinDeferred")
	eventually(t, "the Ready condition to say rank 1 waits", func() error {
		cond := meta.FindStatusCondition(getRun(t, key).Status.Conditions, ebv1.ConditionReady)
		want := runplan.Deferral{Rank: 1, Attempts: 1, Until: failed.Time.Add(rejoinBackoff.First)}.String()
		if cond == nil || !strings.Contains(cond.Message, want) {
			return fmt.Errorf("Ready condition %+v does not say %q", cond, want)
		}
		return nil
	})
	second := waitFailover(t, key, 3)
	if waited := second.ObservedTime.Sub(first.ObservedTime.Time); waited < rejoinBackoff.Delay(1) {
		t.Errorf("the second rejoin came %v after the first, want at least %v", waited, rejoinBackoff.Delay(1))
	}
	waitFailedRejoins(2)

	// Its network back, the third rejoin, twice as late, holds.
	farm.SetUnreachable(uid, false)
	third := waitFailover(t, key, 4)
	if waited := third.ObservedTime.Sub(second.ObservedTime.Time); waited < rejoinBackoff.Delay(2) {
		t.Errorf("the third rejoin came %v after the second, want at least %v", waited, rejoinBackoff.Delay(2))
	}
	eventually(t, "every unit on epoch 4, nobody lost, the record cleared", func() error {
		for _, u := range getRun(t, key).Status.Units {
			if u.Epoch != 4 || len(u.LostPeers) != 0 || u.State != builderapi.StateRunning {
				return fmt.Errorf("unit row %+v", u)
			}
		}
		if a, err := attempts(); err != nil || len(a) != 0 {
			return fmt.Errorf("rejoin attempts %+v (%v)", a, err)
		}
		return nil
	})
	cond := waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	if strings.Contains(cond.Message, "waits to rejoin") {
		t.Errorf("Ready condition %q still says a rank waits", cond.Message)
	}
	if e, _ := emu[1].Epoch(); e != 4 {
		t.Errorf("rank 1's builder at epoch %d", e)
	}
	expectPodsKept(t, pods)
}

// Builders that refuse the operator's token (401), or have none (403),
// fail the run with a message naming them; builders started with the
// Secret's token are driven as usual.
func TestControlTokenRefusalIsReported(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	key, pods := createRun(t, "tokens", 3)
	ns := key.Namespace
	p0, p1, p2 := pods[0], pods[1], pods[2]
	startPod(t, &p0)
	wrong := startPod(t, &p1, func(s *corev1.Secret) { s.Data["token"] = []byte("not-the-token\n") })
	// A builder with no token at all (its container started without
	// --token-file, e.g. an old image): its control API is off (403).
	// (An empty token file stops eb-builder at start.)
	bind(t, &p2)
	untokened := p2.DeepCopy()
	c := &untokened.Spec.Containers[0]
	i := slices.Index(c.Args, "--token-file")
	c.Args = slices.Delete(c.Args, i, i+2)
	none := startPod(t, untokened)
	p2.Status = untokened.Status

	waitPhase(t, key, ebv1.PhaseFailed, ebv1.ReasonControlUnauthorized)
	// Rank 0 is configured; every reconcile tries the two others again.
	eventually(t, "both refusals in the message", func() error {
		cond := meta.FindStatusCondition(getRun(t, key).Status.Conditions, ebv1.ConditionReady)
		for _, want := range []string{"configure failed on 2 of 2 builders", "rank 1: configure: 401 wrong bearer token",
			"rank 2: configure: 403 the control API is disabled", "Secret tokens-control"} {
			if !strings.Contains(cond.Message, want) {
				return fmt.Errorf("message %q does not say %q", cond.Message, want)
			}
		}
		return nil
	})
	expectEvent(t, ns, "tokens", ebv1.ReasonControlUnauthorized)
	if got := commands(wrong); !strings.HasPrefix(got, "configure@1!") {
		t.Errorf("builder with the wrong token was sent %q", got)
	}
	for _, r := range wrong.Requests() {
		if r.Authorized {
			t.Errorf("the emulation took a wrong token: %+v", r)
		}
	}
	if run := getRun(t, key); meta.IsStatusConditionTrue(run.Status.Conditions, ebv1.ConditionConfigured) {
		t.Errorf("Configured is True with two builders refusing")
	}

	// Restarted with the right token (the pods recreated), they run.
	for _, p := range []corev1.Pod{p1, p2} {
		if err := k8s.Delete(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}
	farm.Kill(string(p1.UID))
	farm.Kill(string(p2.UID))
	_ = none
	eventually(t, "pods recreated", func() error {
		live, err := livePods(ctx, ns, "tokens")
		if err != nil {
			return err
		}
		for _, old := range []corev1.Pod{p1, p2} {
			if p, ok := live[old.Name]; !ok || p.UID == old.UID {
				return fmt.Errorf("%s not recreated", old.Name)
			}
		}
		p1, p2 = live[p1.Name], live[p2.Name]
		return nil
	})
	startPod(t, &p1)
	startPod(t, &p2)
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
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
		{"bogus state", "", func(s map[string]any) { s["state"] = "Sleeping" }, "spec.state"},
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
		{"zero event rate floor", "", func(s map[string]any) { s["minEventRate"] = int64(0) }, "spec.minEventRate"},
		{"peer timeout too short", "", func(s map[string]any) { s["builder"].(map[string]any)["peerTimeout"] = "10ms" }, "spec.builder.peerTimeout must be between 100ms and 60s"},
		{"join timeout too long", "", func(s map[string]any) { s["builder"].(map[string]any)["joinTimeout"] = "1h" }, "spec.builder.joinTimeout must be between 100ms and 300s"},
		{"busy poll too long", "", func(s map[string]any) { s["builder"].(map[string]any)["busyPoll"] = "20ms" }, "spec.builder.busyPoll must be between 0s and 10ms"},
		{"negative busy poll", "", func(s map[string]any) { s["builder"].(map[string]any)["busyPoll"] = "-1us" }, "spec.builder.busyPoll must be between 0s and 10ms"},
		{"no data threads", "", func(s map[string]any) { s["builder"].(map[string]any)["dataThreads"] = int64(0) }, "spec.builder.dataThreads"},
		{"more data threads than cpus", "", func(s map[string]any) {
			s["builder"].(map[string]any)["dataThreads"] = int64(4)
			s["resources"] = map[string]any{"cpus": int64(2), "memory": "1Gi"}
		}, "spec.builder.dataThreads is more than spec.resources.cpus"},
		{"fragments too large for an MFP", "", func(s map[string]any) {
			s["builder"].(map[string]any)["source"] = map[string]any{"generator": map[string]any{"fragmentSize": int64(65536)}}
		}, "spec.builder.source.generator.fragmentSize"},
		{"too many tcp streams", "", func(s map[string]any) { s["builder"].(map[string]any)["tcpStreams"] = int64(17) }, "spec.builder.tcpStreams"},
		{"tcp streams over verbs", "", func(s map[string]any) {
			s["builder"].(map[string]any)["tcpStreams"] = int64(2)
			s["builder"].(map[string]any)["transport"] = "verbs"
			s["resources"] = map[string]any{"cpus": int64(2), "memory": "1Gi", "rdma": "rdma/hca"}
		}, "spec.builder.tcpStreams slices data over TCP connections"},
		{"receive window over tcp", "", func(s map[string]any) { s["builder"].(map[string]any)["receiveWindow"] = int64(1) }, "spec.builder.receiveWindow paces the verbs transport's receives"},
		{"receive window too large", "", func(s map[string]any) {
			s["builder"].(map[string]any)["receiveWindow"] = int64(1000001)
			s["builder"].(map[string]any)["transport"] = "verbs"
			s["resources"] = map[string]any{"cpus": int64(2), "memory": "1Gi", "rdma": "rdma/hca"}
		}, "spec.builder.receiveWindow"},
		{"two outputs", "", func(s map[string]any) {
			s["builder"].(map[string]any)["output"] = map[string]any{"check": map[string]any{}, "discard": map[string]any{}}
		}, "spec.builder.output must name exactly one output"},
		{"no output", "", func(s map[string]any) { s["builder"].(map[string]any)["output"] = map[string]any{} }, "spec.builder.output must name exactly one output"},
		{"bogus incomplete policy", "", func(s map[string]any) { s["builder"].(map[string]any)["incompleteEvents"] = "Keep" }, "spec.builder.incompleteEvents"},
		{"negative run number", "", func(s map[string]any) { s["runNumber"] = int64(-1) }, "spec.runNumber"},
		{"partition with a space", "", func(s map[string]any) { s["partition"] = "LHCb VELO" }, "spec.partition"},
		// Without the device plugin's resource the pod has no /dev/infiniband.
		{"verbs without rdma", "", func(s map[string]any) { s["builder"].(map[string]any)["transport"] = "verbs" }, "set spec.resources.rdma"},
		{"verbs with pinned cpus but no rdma", "", func(s map[string]any) {
			s["builder"].(map[string]any)["transport"] = "verbs"
			s["resources"] = map[string]any{"cpus": int64(2), "memory": "1Gi"}
		}, "spec.builder.transport verbs needs the NIC's /dev/infiniband devices"},
		{"claims without a fabric", "", func(s map[string]any) {
			s["resources"] = map[string]any{"claims": map[string]any{}}
		}, "spec.resources.claims asks for each endpoint's own NIC"},
		{"claims beside a device plugin's rdma", "", func(s map[string]any) {
			s["fabricRef"] = map[string]any{"name": "f"}
			s["resources"] = map[string]any{"cpus": int64(2), "memory": "1Gi", "rdma": "rdma/hca", "claims": map[string]any{}}
		}, "in place of the device plugins' spec.resources.rdma and spec.resources.readout"},
		{"claims aligned on a bogus attribute", "", func(s map[string]any) {
			s["fabricRef"] = map[string]any{"name": "f"}
			s["resources"] = map[string]any{"claims": map[string]any{"alignOn": "Rack"}}
		}, "spec.resources.claims.alignOn"},
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
		"eventbuilder_v1alpha1_eventbuilderrun_production.yaml",
		"eventbuilder_v1alpha1_eventbuilderrun_claims.yaml",
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
	return waitPhaseSaying(t, key, phase, reason, "")
}

// waitPhaseSaying is waitPhase for a Ready condition whose message also
// contains text.
func waitPhaseSaying(t *testing.T, key client.ObjectKey, phase ebv1.RunPhase, reason, text string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	eventually(t, "phase "+string(phase), func() error {
		run := &ebv1.EventBuilderRun{}
		if err := k8s.Get(context.Background(), key, run); err != nil {
			return err
		}
		cond = meta.FindStatusCondition(run.Status.Conditions, ebv1.ConditionReady)
		if run.Status.Phase != phase || cond == nil || cond.Reason != reason || cond.ObservedGeneration != run.Generation ||
			!strings.Contains(cond.Message, text) {
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

// eventNotes are the notes of the run's Events with reason.
func eventNotes(t *testing.T, ns, run, reason string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "EventBuilderRun" && e.Regarding.Name == run && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}
