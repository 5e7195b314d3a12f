package builderpod

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

func testRun(name string, units int32) *ebv1.EventBuilderRun {
	return &ebv1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "daq", UID: "uid-1"},
		Spec: ebv1.EventBuilderRunSpec{
			Units: units,
			Builder: ebv1.BuilderSpec{
				Image:           "eventbuilder/builder:test",
				ImagePullPolicy: corev1.PullNever,
				Transport:       ebv1.TransportTCP,
				PackingFactor:   30000,
				Source:          &ebv1.SourceSpec{Generator: &ebv1.GeneratorSource{FragmentSize: 133}},
			},
		},
	}
}

func TestPeers(t *testing.T) {
	for _, tc := range []struct {
		run   string
		units int32
		want  []string
	}{
		{"r", 1, []string{"r-eb-0.r-eb:7000"}},
		{"demo", 3, []string{"demo-eb-0.demo-eb:7000", "demo-eb-1.demo-eb:7000", "demo-eb-2.demo-eb:7000"}},
	} {
		if got := Peers(tc.run, tc.units); !slices.Equal(got, tc.want) {
			t.Errorf("Peers(%q, %d) = %v, want %v", tc.run, tc.units, got, tc.want)
		}
	}
}

func TestArgs(t *testing.T) {
	// A controlled builder: no table on the command line.
	base := []string{"--rank", "3", "--http-port", "8080", "--token-file", "/var/run/eventbuilder/control/token",
		"--data-key-file", "/var/run/eventbuilder/control/data-key",
		"--packing-factor", "30000", "--fragment-size", "133"}
	onFabric := &Placement{Endpoint: "eb007-numa1", Node: "eb007", NUMA: 1, RDMADevice: "mlx5_1", Netdev: "ib1"}
	for _, tc := range []struct {
		name      string
		transport ebv1.Transport
		place     *Placement
		want      []string
	}{
		// tcp is the builder's default: TCP command lines stay as they were.
		{"tcp", ebv1.TransportTCP, nil, base},
		{"tcp on a fabric", ebv1.TransportTCP, onFabric, base},
		{"verbs on a fabric: the endpoint's device", ebv1.TransportVerbs, onFabric,
			append(slices.Clone(base), "--transport", "verbs", "--rdma-device", "mlx5_1")},
		{"verbs without a fabric: the builder chooses", ebv1.TransportVerbs, nil,
			append(slices.Clone(base), "--transport", "verbs")},
		{"verbs on an endpoint without rdmaDevice", ebv1.TransportVerbs, &Placement{Endpoint: "e", Node: "n"},
			append(slices.Clone(base), "--transport", "verbs")},
	} {
		run := testRun("demo", 4)
		run.Spec.Builder.Transport = tc.transport
		if got := Args(run, 3, tc.place); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Args() =\n  %q\nwant\n  %q", tc.name, got, tc.want)
		}
	}
}

// Only verbs builders run as root, and only for IPC_LOCK: a non-root
// process never has an added capability in its effective set.
func TestSecurityContext(t *testing.T) {
	nonRoot := corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](65532),
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	withCaps := func(sc corev1.SecurityContext, add ...corev1.Capability) corev1.SecurityContext {
		sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: add}
		return sc
	}
	root := withCaps(nonRoot, "IPC_LOCK")
	root.RunAsNonRoot, root.RunAsUser = ptr.To(false), ptr.To[int64](0)
	for _, tc := range []struct {
		name      string
		transport ebv1.Transport
		rdma      bool
		want      corev1.SecurityContext
	}{
		{"tcp", ebv1.TransportTCP, false, nonRoot},
		// As before verbs: IPC_LOCK inert in the bounding set.
		{"tcp with rdma", ebv1.TransportTCP, true, withCaps(nonRoot, "IPC_LOCK")},
		{"verbs", ebv1.TransportVerbs, true, root},
	} {
		if got := securityContext(tc.transport, tc.rdma); !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("%s: security context %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestPod(t *testing.T) {
	run := testRun("demo", 4)
	run.Spec.Resources = ebv1.UnitResources{CPUs: 2}
	pod := Pod(run, 3, nil, "secret-uid-1")

	checks := []struct {
		what      string
		got, want any
	}{
		{"name", pod.Name, "demo-eb-3"},
		{"namespace", pod.Namespace, "daq"},
		{"hostname", pod.Spec.Hostname, "demo-eb-3"},
		{"subdomain", pod.Spec.Subdomain, "demo-eb"},
		{"label name", pod.Labels[LabelName], "eventbuilder"},
		{"label run", pod.Labels[LabelRun], "demo"},
		{"label rank", pod.Labels[LabelRank], "3"},
		{"restartPolicy", pod.Spec.RestartPolicy, corev1.RestartPolicyAlways},
		{"owner is controller", *pod.OwnerReferences[0].Controller, true},
		{"owner kind", pod.OwnerReferences[0].Kind, "EventBuilderRun"},
		{"owner uid", string(pod.OwnerReferences[0].UID), "uid-1"},
		{"containers", len(pod.Spec.Containers), 1},
	}
	c := pod.Spec.Containers[0]
	sc := c.SecurityContext
	checks = append(checks, []struct {
		what      string
		got, want any
	}{
		{"container name", c.Name, "builder"},
		{"image", c.Image, "eventbuilder/builder:test"},
		{"pull policy", c.ImagePullPolicy, corev1.PullNever},
		{"command", c.Command[0], "eb-builder"},
		{"rank arg", c.Args[1], "3"},
		{"data port", c.Ports[0], corev1.ContainerPort{Name: "data", ContainerPort: 7000, Protocol: corev1.ProtocolTCP}},
		{"http port", c.Ports[1], corev1.ContainerPort{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		{"cpu request", c.Resources.Requests.Cpu().String(), "2"},
		{"readiness path", c.ReadinessProbe.HTTPGet.Path, "/readyz"},
		{"readiness port", c.ReadinessProbe.HTTPGet.Port.String(), "http"},
		{"liveness path", c.LivenessProbe.HTTPGet.Path, "/healthz"},
		{"liveness port", c.LivenessProbe.HTTPGet.Port.String(), "http"},
		{"token file arg", c.Args[4:6], []string{"--token-file", "/var/run/eventbuilder/control/token"}},
		{"token mount", c.VolumeMounts[2], corev1.VolumeMount{Name: "control-token", MountPath: "/var/run/eventbuilder/control", ReadOnly: true}},
		{"data key file arg", c.Args[6:8], []string{"--data-key-file", "/var/run/eventbuilder/control/data-key"}},
		{"token volume", *pod.Spec.Volumes[2].Secret, corev1.SecretVolumeSource{
			SecretName: "demo-control", Items: []corev1.KeyToPath{{Key: "token", Path: "token"}, {Key: "data-key", Path: "data-key"}},
			DefaultMode: ptr.To[int32](0o440)}},
		{"token readable by the builder's group", *pod.Spec.SecurityContext.FSGroup, int64(65532)},
		{"control secret annotation", pod.Annotations[ControlSecretAnnotation], "secret-uid-1"},
		{"runAsNonRoot", *sc.RunAsNonRoot, true},
		{"runAsUser", *sc.RunAsUser, int64(65532)},
		{"readOnlyRootFilesystem", *sc.ReadOnlyRootFilesystem, true},
		{"allowPrivilegeEscalation", *sc.AllowPrivilegeEscalation, false},
		{"capabilities dropped", sc.Capabilities.Drop, []corev1.Capability{"ALL"}},
		{"capabilities added", len(sc.Capabilities.Add), 0},
		{"no node chosen", pod.Spec.NodeName, ""},
		{"no affinity", pod.Spec.Affinity, (*corev1.Affinity)(nil)},
		{"no networks", pod.Annotations[NetworksAnnotation], ""},
		{"rank table env", c.Env, []corev1.EnvVar{{Name: "EB_RANK_TABLE", Value: "/etc/eventbuilder/ranks.json"}}},
		{"rank table mount", c.VolumeMounts[1], corev1.VolumeMount{Name: "ranks", MountPath: "/etc/eventbuilder", ReadOnly: true}},
		{"rank table volume", pod.Spec.Volumes[1].ConfigMap.Name, "demo-ranks"},
		{"seccomp", sc.SeccompProfile.Type, corev1.SeccompProfileTypeRuntimeDefault},
		{"service account token", *pod.Spec.AutomountServiceAccountToken, false},
	}...)
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}

}

func TestService(t *testing.T) {
	svc := Service(testRun("demo", 2))
	if svc.Name != "demo-eb" || svc.Namespace != "daq" {
		t.Errorf("service %s/%s, want daq/demo-eb", svc.Namespace, svc.Name)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("want headless service publishing not-ready addresses, got clusterIP %q publishNotReady %v",
			svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	want := map[string]string{LabelName: "eventbuilder", LabelRun: "demo"}
	for k, v := range want {
		if svc.Spec.Selector[k] != v {
			t.Errorf("selector[%s] = %q, want %q", k, svc.Spec.Selector[k], v)
		}
	}
	if len(svc.Spec.Selector) != len(want) {
		t.Errorf("selector %v has extra keys; want %v", svc.Spec.Selector, want)
	}
	ports := map[string]int32{}
	for _, p := range svc.Spec.Ports {
		ports[p.Name] = p.Port
	}
	if ports["data"] != 7000 || ports["http"] != 8080 || len(ports) != 2 {
		t.Errorf("ports %v, want data 7000 and http 8080", ports)
	}
}

func TestRank(t *testing.T) {
	for _, tc := range []struct {
		label  string
		want   int32
		wantOK bool
	}{
		{"0", 0, true},
		{"1023", 1023, true},
		{"", 0, false},
		{"-1", 0, false},
		{"x", 0, false},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelRank: tc.label}}}
		got, ok := Rank(pod)
		if ok != tc.wantOK || (ok && got != tc.want) {
			t.Errorf("Rank(label %q) = %d, %v; want %d, %v", tc.label, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestStatusURL(t *testing.T) {
	for ip, want := range map[string]string{
		"10.0.0.7": "http://10.0.0.7:8080",
		"fd00::7":  "http://[fd00::7]:8080",
	} {
		pod := &corev1.Pod{Status: corev1.PodStatus{PodIP: ip}}
		if got := StatusURL(pod); got != want {
			t.Errorf("StatusURL(%s) = %s, want %s", ip, got, want)
		}
	}
}

func TestFabricPod(t *testing.T) {
	run := testRun("demo", 4)
	mem, huge := resource.MustParse("16Gi"), resource.MustParse("2Gi")
	run.Spec.Resources = ebv1.UnitResources{
		CPUs: 8, Memory: &mem, Hugepages: &ebv1.Hugepages{PageSize: "1Gi", Size: huge},
		RDMA: "rdma/hca_numa{numa}", Readout: &ebv1.ReadoutResource{Resource: "daq.io/tell40", Count: 3}, Network: "ib-numa{numa}",
	}
	pod := Pod(run, 5, &Placement{Endpoint: "eb007-numa1", Node: "eb007", NUMA: 1, RDMADevice: "mlx5_1", Netdev: "ib1"}, "uid")
	c := pod.Spec.Containers[0]
	want := map[string]string{"cpu": "8", "memory": "16Gi", "hugepages-1Gi": "2Gi", "rdma/hca_numa1": "1", "daq.io/tell40": "3"}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"left to the scheduler", pod.Spec.NodeName, ""},
		{"node", Node(pod), "eb007"},
		{"node affinity", pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms,
			[]corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: "In", Values: []string{"eb007"}}}}}},
		{"endpoint label", pod.Labels[LabelEndpoint], "eb007-numa1"},
		{"requests", quantities(c.Resources.Requests), want},
		{"limits = requests", quantities(c.Resources.Limits), want},
		{"networks", pod.Annotations[NetworksAnnotation], `[{"name":"ib-numa1","interface":"eb0"}]`},
		{"NUMA env", env[EnvNUMANode], "1"},
		{"RDMA env", env[EnvRDMADevice], "mlx5_1"},
		{"netdev env", env[EnvNetdev], "ib1"},
		{"capabilities added", c.SecurityContext.Capabilities.Add, []corev1.Capability{"IPC_LOCK"}},
		{"capabilities dropped", c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"}},
		{"hugepages medium", pod.Spec.Volumes[3].EmptyDir.Medium, corev1.StorageMedium("HugePages-1Gi")},
		{"hugepages mount", c.VolumeMounts[3].MountPath, "/dev/hugepages"},
		{"args", c.Args[:2], []string{"--rank", "5"}},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}
}

// A verbs unit on a fabric: its endpoint's device on the command line
// (and, as for TCP, in the environment), its NUMA node's RDMA resource,
// root with IPC_LOCK alone; the pod's volumes stay the builder group's.
func TestVerbsFabricPod(t *testing.T) {
	run := testRun("demo", 4)
	run.Spec.Builder.Transport = ebv1.TransportVerbs
	mem := resource.MustParse("16Gi")
	run.Spec.Resources = ebv1.UnitResources{CPUs: 8, Memory: &mem, RDMA: "rdma/hca_numa{numa}"}
	place := &Placement{Endpoint: "eb007-numa1", Node: "eb007", NUMA: 1, RDMADevice: "mlx5_1", Netdev: "ib1"}
	pod := Pod(run, 5, place, "uid")
	c := pod.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	sc := c.SecurityContext
	checks := []struct {
		what      string
		got, want any
	}{
		{"transport args", c.Args[len(c.Args)-4:], []string{"--transport", "verbs", "--rdma-device", "mlx5_1"}},
		{"RDMA env", env[EnvRDMADevice], "mlx5_1"},
		{"NUMA env", env[EnvNUMANode], "1"},
		{"requests", quantities(c.Resources.Requests), map[string]string{"cpu": "8", "memory": "16Gi", "rdma/hca_numa1": "1"}},
		{"runAsUser", *sc.RunAsUser, int64(0)},
		{"runAsNonRoot", *sc.RunAsNonRoot, false},
		{"capabilities added", sc.Capabilities.Add, []corev1.Capability{"IPC_LOCK"}},
		{"capabilities dropped", sc.Capabilities.Drop, []corev1.Capability{"ALL"}},
		{"allowPrivilegeEscalation", *sc.AllowPrivilegeEscalation, false},
		{"readOnlyRootFilesystem", *sc.ReadOnlyRootFilesystem, true},
		{"volumes' group", *pod.Spec.SecurityContext.FSGroup, int64(65532)},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}
	// Switching a run's transport replaces its pods.
	tcp := run.DeepCopy()
	tcp.Spec.Builder.Transport = ebv1.TransportTCP
	if Pod(tcp, 5, place, "uid").Annotations[SpecHashAnnotation] == pod.Annotations[SpecHashAnnotation] {
		t.Errorf("the transport changed but the spec hash did not")
	}
}

func TestResourcesUnset(t *testing.T) {
	if got := Resources(ebv1.UnitResources{}, 0); got.Requests != nil || got.Limits != nil {
		t.Errorf("no resources asked, got %v", got)
	}
}

func quantities(l corev1.ResourceList) map[string]string {
	m := map[string]string{}
	for k, v := range l {
		m[string(k)] = v.String()
	}
	return m
}

func TestControlSecret(t *testing.T) {
	run := testRun("demo", 2)
	sec := ControlSecret(run, "t0k3n", "k3y")
	if sec.Name != "demo-control" || sec.Namespace != "daq" || string(sec.Data["token"]) != "t0k3n" ||
		string(sec.Data["data-key"]) != "k3y" || !*sec.Immutable ||
		!metav1.IsControlledBy(sec, run) || sec.Labels[LabelRun] != "demo" || sec.Labels[LabelName] != "eventbuilder" {
		t.Errorf("secret %+v", sec)
	}
}

// The spec hash changes with what the builder runs with (image, control
// Secret, node), not with the rendering alone, and never with the table.
func TestSpecHash(t *testing.T) {
	run := testRun("demo", 4)
	base := Pod(run, 0, nil, "uid-a")
	if got := base.Annotations[SpecHashAnnotation]; got == "" || got != SpecHash(Pod(run, 0, nil, "uid-a")) {
		t.Fatalf("hash %q not stable", got)
	}
	scaled := run.DeepCopy()
	scaled.Spec.Units = 7
	if Pod(scaled, 0, nil, "uid-a").Annotations[SpecHashAnnotation] != base.Annotations[SpecHashAnnotation] {
		t.Errorf("a different number of units changed rank 0's pod")
	}
	other := run.DeepCopy()
	other.Spec.Builder.Image = "other:1"
	tolerating := run.DeepCopy()
	tolerating.Spec.Tolerations = []corev1.Toleration{{Key: "daq.io/eventbuilder", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if got := Pod(tolerating, 0, nil, "uid-a").Spec.Tolerations; len(got) != 1 || got[0].Key != "daq.io/eventbuilder" {
		t.Errorf("tolerations %v, want the run's", got)
	}
	for name, pod := range map[string]*corev1.Pod{
		"image":          Pod(other, 0, nil, "uid-a"),
		"control secret": Pod(run, 0, nil, "uid-b"),
		"node":           Pod(run, 0, &Placement{Node: "n1"}, "uid-a"),
		"tolerations":    Pod(tolerating, 0, nil, "uid-a"),
	} {
		if pod.Annotations[SpecHashAnnotation] == base.Annotations[SpecHashAnnotation] {
			t.Errorf("%s changed but the spec hash did not", name)
		}
	}
}

// Settings left at the builder's defaults go unsaid, so a pod's command line
// (and spec hash) is what it always was; the others become flags, and the
// run's identity goes into the environment.
func TestBuilderSettingsBecomeFlags(t *testing.T) {
	run := testRun("demo", 2)
	if got := strings.Join(Args(run, 1, nil), " "); strings.Contains(got, "--output") || strings.Contains(got, "--incomplete") ||
		strings.Contains(got, "timeout") || strings.Contains(got, "busy-poll") || strings.Contains(got, "data-threads") ||
		strings.Contains(got, "tcp-streams") {
		t.Errorf("defaults said: %s", got)
	}
	run.Spec.Builder.Output = &ebv1.OutputSpec{Discard: &ebv1.DiscardOutput{}}
	run.Spec.Builder.IncompleteEvents = ebv1.IncompleteFlag
	run.Spec.Builder.PeerTimeout = &metav1.Duration{Duration: 1500 * time.Millisecond}
	run.Spec.Builder.JoinTimeout = &metav1.Duration{Duration: 10 * time.Second}
	run.Spec.Builder.BusyPoll = &metav1.Duration{Duration: 0}
	threads := int32(3)
	run.Spec.Builder.DataThreads = &threads
	streams := int32(2)
	run.Spec.Builder.TCPStreams = &streams
	n := int64(255003)
	run.Spec.RunNumber, run.Spec.Partition = &n, "LHCb"
	got := strings.Join(Args(run, 1, nil), " ")
	for _, want := range []string{"--output discard", "--incomplete flag", "--peer-timeout-ms 1500", "--join-timeout-ms 10000", "--busy-poll-us 0", "--data-threads 3", "--tcp-streams 2"} {
		if !strings.Contains(got, want) {
			t.Errorf("args %q lack %q", got, want)
		}
	}
	env := map[string]string{}
	for _, e := range Pod(run, 1, nil, "uid").Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env[EnvRunNumber] != "255003" || env[EnvPartition] != "LHCb" {
		t.Errorf("env %v, want %s=255003 and %s=LHCb", env, EnvRunNumber, EnvPartition)
	}
}

// A pod an earlier operator bound by spec.nodeName is on that node, as one
// placed by affinity is: an upgrade replaces no pod for it.
func TestNodeOfPodsBoundBeforeAffinity(t *testing.T) {
	run := testRun("demo", 4)
	placed := Pod(run, 5, &Placement{Endpoint: "eb007-numa1", Node: "eb007", NUMA: 1}, "uid")
	old := placed.DeepCopy()
	old.Spec.Affinity, old.Spec.NodeName = nil, "eb007"
	if Node(placed) != "eb007" || Node(old) != "eb007" || SpecHash(placed) != SpecHash(old) {
		t.Errorf("Node %q and %q, hashes %s and %s: want eb007 for both, one hash", Node(placed), Node(old), SpecHash(placed), SpecHash(old))
	}
}
