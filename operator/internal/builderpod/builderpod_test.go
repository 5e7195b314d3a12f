package builderpod

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/planner"
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

// The CRD admits a run only if units*(2*len(name)+18) < 131072 (Linux's
// MAX_ARG_STRLEN, counting the NUL); that bound must cover the real --peers.
func TestPeersArgumentFitsLinuxLimit(t *testing.T) {
	const maxArgStrlen = 128 << 10
	for _, n := range []int{1, 8, 20, 40, 55} {
		name := strings.Repeat("r", n)
		units := int32(min(1024, (maxArgStrlen-1)/(2*n+18)))
		arg := strings.Join(Peers(name, units), ",")
		if len(arg)+1 > maxArgStrlen {
			t.Errorf("name of %d chars, %d units: --peers is %d bytes, over the limit the CRD rule promises", n, units, len(arg))
		}
	}
}

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		run     *ebv1.EventBuilderRun
		rank    int32
		dummies []int32
		want    []string
	}{
		{
			name: "single unit",
			run:  testRun("solo", 1),
			rank: 0,
			want: []string{"--rank", "0", "--peers", "solo-eb-0.solo-eb:7000", "--http-port", "8080",
				"--packing-factor", "30000", "--fragment-size", "133"},
		},
		{
			name: "last rank of two",
			run:  testRun("demo", 2),
			rank: 1,
			want: []string{"--rank", "1", "--peers", "demo-eb-0.demo-eb:7000,demo-eb-1.demo-eb:7000", "--http-port", "8080",
				"--packing-factor", "30000", "--fragment-size", "133"},
		},
		{
			name:    "dummy and spare ranks",
			run:     testRun("fab", 4),
			rank:    0,
			dummies: []int32{1, 3},
			want: []string{"--rank", "0", "--peers", "fab-eb-0.fab-eb:7000,fab-eb-1.fab-eb:7000,fab-eb-2.fab-eb:7000,fab-eb-3.fab-eb:7000",
				"--http-port", "8080", "--packing-factor", "30000", "--fragment-size", "133", "--dummies", "1,3"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Args(tc.run, tc.rank, tc.run.Spec.Units, tc.dummies); !slices.Equal(got, tc.want) {
				t.Errorf("Args() =\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

func TestPod(t *testing.T) {
	run := testRun("demo", 4)
	run.Spec.Resources = ebv1.UnitResources{CPUs: 2}
	pod := Pod(run, 3, 4, nil, nil)

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
		{"readiness path", c.ReadinessProbe.HTTPGet.Path, "/healthz"},
		{"readiness port", c.ReadinessProbe.HTTPGet.Port.String(), "http"},
		{"runAsNonRoot", *sc.RunAsNonRoot, true},
		{"runAsUser", *sc.RunAsUser, int64(65532)},
		{"readOnlyRootFilesystem", *sc.ReadOnlyRootFilesystem, true},
		{"allowPrivilegeEscalation", *sc.AllowPrivilegeEscalation, false},
		{"capabilities dropped", sc.Capabilities.Drop, []corev1.Capability{"ALL"}},
		{"capabilities added", len(sc.Capabilities.Add), 0},
		{"no node chosen", pod.Spec.NodeName, ""},
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
	pod := Pod(run, 5, 8, nil, &Placement{Endpoint: "eb007-numa1", Node: "eb007", NUMA: 1, RDMADevice: "mlx5_1", Netdev: "ib1"})
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
		{"node", pod.Spec.NodeName, "eb007"},
		{"endpoint label", pod.Labels[LabelEndpoint], "eb007-numa1"},
		{"requests", quantities(c.Resources.Requests), want},
		{"limits = requests", quantities(c.Resources.Limits), want},
		{"networks", pod.Annotations[NetworksAnnotation], `[{"name":"ib-numa1","interface":"eb0"}]`},
		{"NUMA env", env[EnvNUMANode], "1"},
		{"RDMA env", env[EnvRDMADevice], "mlx5_1"},
		{"netdev env", env[EnvNetdev], "ib1"},
		{"capabilities added", c.SecurityContext.Capabilities.Add, []corev1.Capability{"IPC_LOCK"}},
		{"capabilities dropped", c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"}},
		{"hugepages medium", pod.Spec.Volumes[2].EmptyDir.Medium, corev1.StorageMedium("HugePages-1Gi")},
		{"hugepages mount", c.VolumeMounts[2].MountPath, "/dev/hugepages"},
		{"peers count", strings.Count(c.Args[3], ",") + 1, 8},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
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

func TestDummies(t *testing.T) {
	tab := planner.RankTable{Ranks: []planner.Rank{
		{Rank: 0, Role: planner.Live}, {Rank: 1, Role: planner.Spare}, {Rank: 2, Role: planner.Live}, {Rank: 3, Role: planner.Dummy},
	}}
	if got := Dummies(tab); !slices.Equal(got, []int32{1, 3}) {
		t.Errorf("Dummies() = %v, want [1 3]", got)
	}
}

// The spec hash changes with anything the builder runs with: a new table
// (other dummies), image or resources; not with the rendering alone.
func TestSpecHash(t *testing.T) {
	run := testRun("demo", 4)
	base := Pod(run, 0, 4, []int32{3}, nil)
	if got := base.Annotations[SpecHashAnnotation]; got == "" || got != SpecHash(Pod(run, 0, 4, []int32{3}, nil)) {
		t.Fatalf("hash %q not stable", got)
	}
	other := run.DeepCopy()
	other.Spec.Builder.Image = "other:1"
	for name, pod := range map[string]*corev1.Pod{
		"dummies": Pod(run, 0, 4, []int32{2}, nil),
		"ranks":   Pod(run, 0, 5, []int32{3}, nil),
		"image":   Pod(other, 0, 4, []int32{3}, nil),
	} {
		if pod.Annotations[SpecHashAnnotation] == base.Annotations[SpecHashAnnotation] {
			t.Errorf("%s changed but the spec hash did not", name)
		}
	}
}
