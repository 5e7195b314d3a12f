package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderemu"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/opmetrics"
	"daq.io/eventbuilder/operator/internal/ranktable"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// smallFabric is 2 leaves of 4 server ports and 2 spines, with four
// dual-NUMA servers <prefix>-srv0..3: srvS NUMA n on leaf S/2, port
// 2*(S%2)+n. Its nodes are created Ready. The endpoints of the servers
// numbered in readout read one stream each, <endpoint>-mfp0; the others
// have no fibres.
func smallFabric(t *testing.T, prefix string, readout ...int) *ebv1.Fabric {
	t.Helper()
	f := &ebv1.Fabric{
		ObjectMeta: metav1.ObjectMeta{Name: prefix},
		Spec:       ebv1.FabricSpec{Leaves: 2, Spines: 2, PortsPerLeaf: 4},
	}
	for s := range 4 {
		node := fmt.Sprintf("%s-srv%d", prefix, s)
		createNode(t, node)
		for n := range 2 {
			f.Spec.Endpoints = append(f.Spec.Endpoints, ebv1.FabricEndpoint{
				Name: fmt.Sprintf("%s-numa%d", node, n), Node: node, NUMA: int32(n),
				RDMADevice: fmt.Sprintf("mlx5_%d", n), Netdev: fmt.Sprintf("ib%d", n),
				Leaf: int32(s / 2), Port: int32(2*(s%2) + n),
			})
			if slices.Contains(readout, s) {
				last := &f.Spec.Endpoints[len(f.Spec.Endpoints)-1]
				last.Streams = []string{last.Name + "-mfp0"}
			}
		}
	}
	if err := k8s.Create(context.Background(), f); err != nil {
		t.Fatalf("create fabric: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), f) })
	return f
}

// createNode creates a node, as a kubelet would register it, and marks it Ready.
func createNode(t *testing.T, name string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"eventbuilder.daq.io/simulated": "true"}}}
	if err := k8s.Create(context.Background(), node); err != nil {
		t.Fatalf("create node: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	setNodeReady(t, name, corev1.ConditionTrue)
}

// farmNode is what a simulated farm node offers: CPUs, memory, 1 GiB
// hugepages, and per NUMA node an RDMA device and readout cards.
var farmNode = corev1.ResourceList{
	"cpu": resource.MustParse("64"), "memory": resource.MustParse("256Gi"), "hugepages-1Gi": resource.MustParse("64Gi"),
	"rdma/hca_numa0": resource.MustParse("1k"), "rdma/hca_numa1": resource.MustParse("1k"),
	"daq.io/tell40-numa0": resource.MustParse("4"), "daq.io/tell40-numa1": resource.MustParse("4"),
}

// setNodeReady plays the node lifecycle controller: the node's Ready
// condition turns to status now, or at the optional time given (at the
// API's precision, whole seconds); the node offers farmNode.
func setNodeReady(t *testing.T, name string, status corev1.ConditionStatus, at ...time.Time) {
	t.Helper()
	node := &corev1.Node{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	transition := metav1.Now()
	if len(at) > 0 {
		transition = metav1.NewTime(at[0])
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: transition}}
	if node.Status.NodeInfo.BootID == "" {
		node.Status.NodeInfo.BootID = name + "-boot-1"
	}
	if node.Status.Allocatable == nil {
		node.Status.Capacity, node.Status.Allocatable = farmNode.DeepCopy(), farmNode.DeepCopy()
	}
	if err := k8s.Status().Update(context.Background(), node); err != nil {
		t.Fatalf("node %s Ready=%s: %v", name, status, err)
	}
}

// rebootNode plays a server restarted faster than the node controller
// turns it NotReady: its kubelet reports another boot ID, its Ready
// condition stays as it was.
func rebootNode(t *testing.T, name, bootID string) {
	t.Helper()
	node := &corev1.Node{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.NodeInfo.BootID = bootID
	if err := k8s.Status().Update(context.Background(), node); err != nil {
		t.Fatalf("node %s boot ID %s: %v", name, bootID, err)
	}
}

func fabricRun(ns, name, fabric string, units, spares int32) *ebv1.EventBuilderRun {
	mem, huge := resource.MustParse("8Gi"), resource.MustParse("4Gi")
	return &ebv1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: ebv1.EventBuilderRunSpec{
			Units: units, Spares: spares, FabricRef: &ebv1.FabricReference{Name: fabric},
			Builder: ebv1.BuilderSpec{Image: "eventbuilder/builder:test"},
			Resources: ebv1.UnitResources{
				CPUs: 4, Memory: &mem, Hugepages: &ebv1.Hugepages{PageSize: "1Gi", Size: huge},
				RDMA: "rdma/hca_numa{numa}", Readout: &ebv1.ReadoutResource{Resource: "daq.io/tell40-numa{numa}", Count: 2},
				Network: "daq/ib-numa{numa}",
			},
		},
	}
}

// rankTable reads the published rank table of a run.
func rankTable(ctx context.Context, ns, run string) (ranktable.Document, error) {
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: run + "-ranks"}, cm); err != nil {
		return ranktable.Document{}, err
	}
	return ranktable.Parse(cm.Data["ranks.json"])
}

// roles spells a table's ranks: L live, S spare, . dummy.
func roles(d ranktable.Document) string {
	var b strings.Builder
	for _, r := range d.Ranks {
		switch {
		case r.State == ranktable.Live:
			b.WriteByte('L')
		case r.Spare:
			b.WriteByte('S')
		default:
			b.WriteByte('.')
		}
	}
	return b.String()
}

// livePods returns the run's pods that are not being deleted, by name. It
// plays the kubelet finishing the deletion of pods bound to a node (the
// API server waits for the kubelet there), so that a replaced pod's
// successor can be created.
func livePods(ctx context.Context, ns, run string) (map[string]corev1.Pod, error) {
	pods, err := runPods(ctx, ns, run)
	m := map[string]corev1.Pod{}
	for _, p := range pods {
		if p.DeletionTimestamp.IsZero() {
			m[p.Name] = p
		} else if derr := k8s.Delete(ctx, &p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(derr) != nil {
			return nil, derr
		}
	}
	return m, err
}

func waitPods(t *testing.T, ns, run string, want ...string) map[string]corev1.Pod {
	t.Helper()
	var pods map[string]corev1.Pod
	eventually(t, fmt.Sprintf("pods %v", want), func() (err error) {
		if pods, err = livePods(context.Background(), ns, run); err != nil {
			return err
		}
		var got []string
		for name := range pods {
			got = append(got, name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("pods %v", got)
		}
		return nil
	})
	return pods
}

func TestInvalidFabricsAreRejected(t *testing.T) {
	requireEnvtest(t)
	for _, tc := range []struct {
		name      string
		edit      func(*ebv1.FabricSpec)
		wantField string
	}{
		{"leaf out of range", func(s *ebv1.FabricSpec) { s.Endpoints[1].Leaf = 2 }, "raise spec.leaves"},
		{"port out of range", func(s *ebv1.FabricSpec) { s.Endpoints[1].Port = 4 }, "raise spec.portsPerLeaf"},
		{"duplicate endpoint name", func(s *ebv1.FabricSpec) { s.Endpoints[1].Name = s.Endpoints[0].Name }, "spec.endpoints[1]"},
		{"no endpoints", func(s *ebv1.FabricSpec) { s.Endpoints = nil }, "spec.endpoints"},
		{"zero spines", func(s *ebv1.FabricSpec) { s.Spines = 0 }, "spec.spines"},
		{"unknown routing", func(s *ebv1.FabricSpec) { s.Routing = "Random" }, "spec.routing"},
		{"negative NUMA id", func(s *ebv1.FabricSpec) { s.Endpoints[0].NUMA = -1 }, "spec.endpoints[0].numa"},
		{"an unavailable leaf the fabric does not have", func(s *ebv1.FabricSpec) { s.UnavailableLeaves = []int32{0, 2} },
			"spec.unavailableLeaves: a leaf >= spec.leaves"},
		{"a negative unavailable leaf", func(s *ebv1.FabricSpec) { s.UnavailableLeaves = []int32{-1} }, "spec.unavailableLeaves[0]"},
		// Stream names travel as they are in rank tables and MEP stream maps.
		{"a stream name with a space", func(s *ebv1.FabricSpec) { s.Endpoints[1].Streams = []string{"velo0", "velo 1"} },
			"spec.endpoints[1].streams[1]"},
		{"a stream name starting with punctuation", func(s *ebv1.FabricSpec) { s.Endpoints[0].Streams = []string{"-velo0"} },
			"spec.endpoints[0].streams[0]"},
		{"a stream name over 128 characters", func(s *ebv1.FabricSpec) { s.Endpoints[0].Streams = []string{strings.Repeat("v", 129)} },
			"spec.endpoints[0].streams[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &ebv1.Fabric{ObjectMeta: metav1.ObjectMeta{Name: "invalid"}, Spec: ebv1.FabricSpec{
				Leaves: 2, Spines: 2, PortsPerLeaf: 4,
				Endpoints: []ebv1.FabricEndpoint{{Name: "a", Node: "n0", Leaf: 0, Port: 0}, {Name: "b", Node: "n0", NUMA: 1, Leaf: 0, Port: 1}},
			}}
			tc.edit(&f.Spec)
			err := k8s.Create(context.Background(), f)
			if !apierrors.IsInvalid(err) {
				_ = k8s.Delete(context.Background(), f)
				t.Fatalf("create: got %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tc.wantField) {
				t.Errorf("error does not say %q: %v", tc.wantField, err)
			}
		})
	}
	t.Run("every character a stream name may have", func(t *testing.T) {
		f := &ebv1.Fabric{ObjectMeta: metav1.ObjectMeta{Name: "stream-names"}, Spec: ebv1.FabricSpec{
			Leaves: 1, Spines: 1, PortsPerLeaf: 2,
			Endpoints: []ebv1.FabricEndpoint{{Name: "a", Node: "n0", Leaf: 0, Port: 0,
				Streams: []string{"Velo:0/a-1.b_c", "9", strings.Repeat("v", 128)}}},
		}}
		if err := k8s.Create(context.Background(), f); err != nil {
			t.Fatalf("create: %v", err)
		}
		_ = k8s.Delete(context.Background(), f)
	})
}

// What the schema cannot check, and nodes that are missing or not Ready,
// show in the Fabric's status.
func TestFabricStatusReportsUnusableEndpoints(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	f := smallFabric(t, "fstatus", 3)
	setNodeReady(t, "fstatus-srv1", corev1.ConditionFalse)
	patch := client.MergeFrom(f.DeepCopy())
	f.Spec.Endpoints[0].Node = "fstatus-gone"
	f.Spec.Endpoints[7].Streams = f.Spec.Endpoints[6].Streams // one stream on two endpoints
	// Two cables on one port pass admission (a pairwise rule costs CEL too
	// much at 800 endpoints) and are reported here.
	f.Spec.Endpoints[3].Port = f.Spec.Endpoints[2].Port
	if err := k8s.Patch(ctx, f, patch); err != nil {
		t.Fatal(err)
	}
	setCordoned(t, "fstatus-srv2", true)
	eventually(t, "fabric status", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(f), f); err != nil {
			return err
		}
		st := f.Status
		valid := meta.FindStatusCondition(st.Conditions, ebv1.FabricValid)
		nodes := meta.FindStatusCondition(st.Conditions, ebv1.FabricNodesReady)
		want := []ebv1.UnschedulableEndpoint{
			{Name: "fstatus-srv0-numa0", Node: "fstatus-gone", Reason: ebv1.EndpointNodeNotFound},
			{Name: "fstatus-srv1-numa0", Node: "fstatus-srv1", Reason: ebv1.EndpointNodeNotReady},
			{Name: "fstatus-srv1-numa1", Node: "fstatus-srv1", Reason: ebv1.EndpointNodeNotReady},
			{Name: "fstatus-srv2-numa0", Node: "fstatus-srv2", Reason: ebv1.EndpointNodeCordoned},
			{Name: "fstatus-srv2-numa1", Node: "fstatus-srv2", Reason: ebv1.EndpointNodeCordoned},
		}
		switch {
		case st.ObservedGeneration != f.Generation || st.Endpoints != 8 || st.SchedulableEndpoints != 3:
			return fmt.Errorf("status %+v", st)
		case !slices.Equal(st.Unschedulable, want):
			return fmt.Errorf("unschedulable %+v", st.Unschedulable)
		case valid == nil || valid.Status != metav1.ConditionFalse || !strings.Contains(valid.Message, "spec.endpoints[7].streams") ||
			!strings.Contains(valid.Message, "spec.endpoints[3]"):
			return fmt.Errorf("Valid %+v", valid)
		case nodes == nil || nodes.Status != metav1.ConditionFalse || nodes.Reason != ebv1.ReasonNodesUnavailable:
			return fmt.Errorf("NodesReady %+v", nodes)
		}
		return nil
	})
}

// A run on the small fabric: 5 units and 2 spares on 8 endpoints.
// Spares are a whole server (srv1, leaf 0 ports 2-3); the endpoint left
// over (srv3 NUMA 1) idles on a dummy rank.
func TestFabricRunPlacesUnitsAndFailsOver(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "fo")
	run := fabricRun(ns, "fo", "fo", 5, 2)
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	key := client.ObjectKeyFromObject(run)

	var doc ranktable.Document
	eventually(t, "rank table epoch 1", func() (err error) {
		doc, err = rankTable(ctx, ns, "fo")
		return err
	})
	if got := roles(doc); got != "LLSSLLL." || doc.Epoch != 1 || doc.Fabric != "fo" {
		t.Fatalf("rank table epoch %d fabric %q roles %s, want epoch 1, fo, LLSSLLL.", doc.Epoch, doc.Fabric, got)
	}
	r0 := doc.Ranks[0]
	if r0.Address != "fo-eb-0.fo-eb:7000" || *r0.Unit != 0 || r0.Endpoint != "fo-srv0-numa0" || r0.Node != "fo-srv0" ||
		*r0.NUMA != 0 || r0.RDMADevice != "mlx5_0" || *r0.Leaf != 0 || *r0.Port != 0 || r0.Sources != nil {
		t.Errorf("rank 0: %+v", r0)
	}
	if r7 := doc.Ranks[7]; r7.State != ranktable.Dummy || r7.Endpoint != "" || r7.Address != "fo-eb-7.fo-eb:7000" {
		t.Errorf("rank 7 (idle endpoint): %+v", r7)
	}

	// Live ranks and warm spares (2, 3) get a pod each.
	pods := waitPods(t, ns, "fo", "fo-eb-0", "fo-eb-1", "fo-eb-2", "fo-eb-3", "fo-eb-4", "fo-eb-5", "fo-eb-6")
	for name, at := range map[string]struct{ node, numa string }{
		"fo-eb-0": {"fo-srv0", "0"}, "fo-eb-1": {"fo-srv0", "1"}, "fo-eb-2": {"fo-srv1", "0"}, "fo-eb-3": {"fo-srv1", "1"},
		"fo-eb-4": {"fo-srv2", "0"}, "fo-eb-5": {"fo-srv2", "1"}, "fo-eb-6": {"fo-srv3", "0"},
	} {
		pod := pods[name]
		c := pod.Spec.Containers[0]
		node, numa := at.node, at.numa
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		want := corev1.ResourceList{
			"cpu": resource.MustParse("4"), "memory": resource.MustParse("8Gi"), "hugepages-1Gi": resource.MustParse("4Gi"),
			corev1.ResourceName("rdma/hca_numa" + numa): resource.MustParse("1"), corev1.ResourceName("daq.io/tell40-numa" + numa): resource.MustParse("2"),
		}
		sc := c.SecurityContext
		switch {
		case pod.Status.QOSClass != corev1.PodQOSGuaranteed:
			t.Errorf("%s QoS class %s, want Guaranteed", name, pod.Status.QOSClass)
		case builderpod.Node(&pod) != node || pod.Spec.NodeName != "":
			t.Errorf("%s placed on node %q (bound to %q), want %s by affinity, bound by the scheduler", name, builderpod.Node(&pod), pod.Spec.NodeName, node)
		case !equalResources(c.Resources.Requests, want) || !equalResources(c.Resources.Limits, want):
			t.Errorf("%s resources %v, want requests = limits = %v", name, c.Resources, want)
		case pod.Annotations[builderpod.NetworksAnnotation] != `[{"name":"ib-numa`+numa+`","namespace":"daq","interface":"eb0"}]`:
			t.Errorf("%s networks %q", name, pod.Annotations[builderpod.NetworksAnnotation])
		case env["EB_NUMA_NODE"] != numa || env["EB_RDMA_DEVICE"] != "mlx5_"+numa || env["EB_RANK_TABLE"] != "/etc/eventbuilder/ranks.json":
			t.Errorf("%s env %v", name, env)
		case !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"IPC_LOCK"}) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
			t.Errorf("%s capabilities %+v, want IPC_LOCK only", name, sc.Capabilities)
		case !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s security context %+v", name, sc)
		case !slices.Equal(c.Args[:2], []string{"--rank", name[len("fo-eb-"):]}) || slices.Contains(c.Args, "--peers") || slices.Contains(c.Args, "--dummies"):
			t.Errorf("%s args %q, want a controlled builder: its rank, no table", name, c.Args)
		}
	}

	emu := map[string]*builderemu.Builder{}
	for name, pod := range pods {
		emu[name] = startPod(t, &pod)
	}
	eventually(t, "Running with the rank table in status", func() error {
		if err := k8s.Get(ctx, key, run); err != nil {
			return err
		}
		st := run.Status
		if st.Phase != ebv1.PhaseRunning || st.LiveUnits != 5 || st.SparesLeft != 2 || st.RankCount != 8 || st.Epoch != 1 || len(st.Ranks) != 8 || len(st.Units) != 5 {
			return fmt.Errorf("phase %s (%v) live %d spares %d ranks %d epoch %d", st.Phase, st.Conditions, st.LiveUnits, st.SparesLeft, st.RankCount, st.Epoch)
		}
		if r := st.Ranks[2]; r.Pod != "fo-eb-2" || r.State != builderapi.StateRunning {
			return fmt.Errorf("spare rank 2: %+v, want its pod and a standby builder RUNNING", r)
		}
		return nil
	})
	if r := run.Status.Ranks[2]; r.Role != ebv1.RoleSpare || r.Endpoint != "fo-srv1-numa0" || r.Node != "fo-srv1" || r.Unit != nil {
		t.Errorf("status rank 2 %+v, want spare fo-srv1-numa0", r)
	}
	// Spares are configured and started like the others: standby dummies.
	for _, name := range []string{"fo-eb-2", "fo-eb-3"} {
		if got := commands(emu[name]); got != "configure@1 start" {
			t.Errorf("spare %s was sent %q", name, got)
		}
	}

	// The kubelet's Topology Manager refuses unit 2's pod (rank 4, leaf 1):
	// no spare on leaf 1, so the lowest-ranked spare (rank 2) takes it.
	failPod(t, ns, "fo-eb-4", "TopologyAffinityError")
	fo := waitFailover(t, key, 2)
	farm.Kill(string(pods["fo-eb-4"].UID)) // the refused pod ran nothing
	if fo.Outcome != ebv1.OutcomeMovedToSpare || len(fo.Moves) != 1 || !reflect.DeepEqual(fo.Moves[0], ebv1.UnitMove{
		Unit: 2, FailedRank: 4, FailedEndpoint: "fo-srv2-numa0", Reason: "TopologyAffinityError", SpareRank: ptr(int32(2)), SpareEndpoint: "fo-srv1-numa0",
	}) {
		t.Errorf("lastFailover %+v", fo)
	}
	if fo.Duration.Duration <= 0 || fo.CompletedTime.Before(&fo.ObservedTime) {
		t.Errorf("failover times: observed %v completed %v duration %v", fo.ObservedTime, fo.CompletedTime, fo.Duration)
	}
	// The new epoch reaches the running builders by configure: no pod
	// but the failed one is replaced, and the spare on rank 2 goes live.
	fo = waitFailoverConfigured(t, key, 2)
	survivors := waitPods(t, ns, "fo", "fo-eb-0", "fo-eb-1", "fo-eb-2", "fo-eb-3", "fo-eb-5", "fo-eb-6")
	for name, p := range survivors {
		if p.UID != pods[name].UID {
			t.Errorf("pod %s replaced by the failover", name)
		}
		waitCommands(t, name, emu[name], "configure@1 start configure@2")
	}
	if fo.ConfiguredDuration.Duration < fo.Duration.Duration || fo.ConfiguredTime.Before(&fo.CompletedTime) {
		t.Errorf("failover configured at %v (%v), table published at %v (%v)", fo.ConfiguredTime, fo.ConfiguredDuration, fo.CompletedTime, fo.Duration)
	}
	if doc, _ = rankTable(ctx, ns, "fo"); roles(doc) != "LLLS.LL." || doc.Epoch != 2 || *doc.Ranks[2].Unit != 2 {
		t.Errorf("rank table epoch %d roles %s, want epoch 2 LLLS.LL. with unit 2 on rank 2", doc.Epoch, roles(doc))
	}
	expectEvent(t, ns, "fo", "Failover")
	expectEvent(t, ns, "fo", "FailoverConfigured")
	// The operator's metrics saw it (the counters are the process's: other tests fail over too).
	if n := testutil.ToFloat64(opmetrics.Failovers.WithLabelValues("TopologyAffinityError", ebv1.OutcomeMovedToSpare)); n < 1 {
		t.Errorf("eb_operator_failovers_total{reason=TopologyAffinityError,outcome=MovedToSpare} %v, want at least 1", n)
	}
	if n, err := testutil.GatherAndCount(metrics.Registry, "eb_operator_failover_duration_seconds"); err != nil || n != 1 {
		t.Errorf("eb_operator_failover_duration_seconds: %d series, %v", n, err)
	}
	eventually(t, "the epoch and spares-left gauges", func() error {
		epoch, spares := testutil.ToFloat64(opmetrics.Epoch.WithLabelValues(ns, "fo")), testutil.ToFloat64(opmetrics.SparesLeft.WithLabelValues(ns, "fo"))
		if epoch != 2 || spares != 1 {
			return fmt.Errorf("epoch %v, spares left %v; want 2 and 1", epoch, spares)
		}
		return nil
	})
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	if e, p := emu["fo-eb-2"].Epoch(); e != 2 || p != 0 {
		t.Errorf("the spare that took unit 2 over runs epoch %d (pending %d), want 2", e, p)
	}

	// Server srv0 goes NotReady (its builders keep running): its two units
	// need two spares, one is left (rank 3). Unit 0 moves there; unit 1 is
	// lost and, by the default policy, the run carries on degraded.
	// It fails over once NotReady for the grace period, not before.
	notReadyAt := time.Now().Truncate(time.Second) // LastTransitionTime's precision
	setNodeReady(t, "fo-srv0", corev1.ConditionFalse)
	fo = waitFailover(t, key, 3)
	if early := fo.ObservedTime.Sub(notReadyAt.Add(notReadyGrace)); early < 0 {
		t.Errorf("failed over %v before the NotReady grace period was over", -early)
	}
	if fo.Outcome != ebv1.OutcomeDegraded || len(fo.Moves) != 2 ||
		fo.Moves[0].SpareEndpoint != "fo-srv1-numa1" || fo.Moves[0].Reason != ebv1.EndpointNodeNotReady ||
		fo.Moves[1].SpareRank != nil || fo.Moves[1].Unit != 1 {
		t.Errorf("lastFailover %+v", fo)
	}
	waitPods(t, ns, "fo", "fo-eb-2", "fo-eb-3", "fo-eb-5", "fo-eb-6")
	waitFailoverConfigured(t, key, 3)
	// Each failover, seconds apart, is an Event of its own with its note
	// (the events API keeps only the first note of a series).
	eventually(t, "Failover events of epochs 2 and 3", func() error {
		notes := eventNotes(t, ns, "fo", "Failover")
		for _, epoch := range []string{"epoch 2, ", "epoch 3, "} {
			if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, epoch) }) {
				return fmt.Errorf("Failover notes %q: none of %s", notes, strings.TrimSuffix(epoch, ", "))
			}
		}
		return nil
	})
	waitPhase(t, key, ebv1.PhaseDegraded, ebv1.ReasonUnitsLost)
	if err := k8s.Get(ctx, key, run); err != nil {
		t.Fatal(err)
	}
	if st := run.Status; st.LiveUnits != 4 || st.SparesLeft != 0 {
		t.Errorf("degraded run: live %d spares %d", st.LiveUnits, st.SparesLeft)
	}

	// srv0 comes back: its two endpoints are warm spares again (a new
	// epoch, their pods created and started as standby builders), up to
	// spec.spares; rank 4, whose pod the kubelet refused on a node that
	// never went away, is not offered again.
	// A server takes longer than a second to come back: its Ready turns
	// True in a second after the failover's (transition times have whole
	// seconds; one in the failover's own second does not count).
	setNodeReady(t, "fo-srv0", corev1.ConditionTrue, fo.ObservedTime.Truncate(time.Second).Add(time.Second))
	eventually(t, "srv0's endpoints spares again at epoch 4", func() (err error) {
		if doc, err = rankTable(ctx, ns, "fo"); err == nil && (doc.Epoch != 4 || roles(doc) != "SSLL.LL.") {
			err = fmt.Errorf("epoch %d roles %s", doc.Epoch, roles(doc))
		}
		return err
	})
	expectEvent(t, ns, "fo", "SparesReplenished")
	back := waitPods(t, ns, "fo", "fo-eb-0", "fo-eb-1", "fo-eb-2", "fo-eb-3", "fo-eb-5", "fo-eb-6")
	// Rank 0's spare is warm (its pod Ready) before rank 1's builder
	// starts: unit 1 is restored onto the first warm spare, whichever
	// kubelet's probe came first.
	for _, name := range []string{"fo-eb-0", "fo-eb-1"} {
		farm.Kill(string(pods[name].UID)) // the old builders went with their pods
		pod := back[name]
		emu[name] = startPod(t, &pod)
		waitPodReady(t, &pod)
	}
	// Once a spare is warm, unit 1, lost with no spare left, runs again on
	// it (rank 0), by configure: the run has all its units back.
	eventually(t, "unit 1 back on rank 0 at epoch 5", func() (err error) {
		if doc, err = rankTable(ctx, ns, "fo"); err == nil && (doc.Epoch != 5 || roles(doc) != "LSLL.LL." || *doc.Ranks[0].Unit != 1) {
			err = fmt.Errorf("epoch %d roles %s", doc.Epoch, roles(doc))
		}
		return err
	})
	expectEvent(t, ns, "fo", "UnitsRestored")
	waitCommands(t, "fo-eb-0", emu["fo-eb-0"], "configure@4 start configure@5")
	// Rank 1's builder, started after rank 0's, may first hear of epoch 5.
	eventually(t, "fo-eb-1 standing by at epoch 5", func() error {
		if got := commands(emu["fo-eb-1"]); got != "configure@4 start configure@5" && got != "configure@5 start" {
			return fmt.Errorf("sent %q", got)
		}
		return nil
	})
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	eventually(t, "five units building, one spare standing by", func() error {
		if err := k8s.Get(ctx, key, run); err != nil {
			return err
		}
		if st := run.Status; st.LiveUnits != 5 || st.SparesLeft != 1 || st.Epoch != 5 || st.Ranks[1].Role != ebv1.RoleSpare {
			return fmt.Errorf("live %d, spares left %d, epoch %d, rank 1 %+v", st.LiveUnits, st.SparesLeft, st.Epoch, st.Ranks[1])
		}
		return nil
	})
	if fo := run.Status.LastFailover; fo == nil || fo.Epoch != 3 {
		t.Errorf("lastFailover %+v; want the failover of epoch 3 kept", fo)
	}
}

// functions spells a table's ranks: RU0 (unit 0's RU), BU1, RU+BU2, S
// (spare), - (dummy).
func functions(d ranktable.Document) string {
	var parts []string
	for _, r := range d.Ranks {
		switch {
		case r.State == ranktable.Live:
			parts = append(parts, fmt.Sprintf("%s%d", r.Function, *r.Unit))
		case r.Spare:
			parts = append(parts, "S")
		default:
			parts = append(parts, "-")
		}
	}
	return strings.Join(parts, " ")
}

// An Unfolded run on a Fabric: each unit's RU and BU run on ranks of their
// own, the RUs first, each rank with a pod, and the rank table says which
// rank runs which. A failed RU and a failed BU each move to a spare that
// takes over the function, with no other pod touched. Every endpoint reads
// a stream: an RU reads its endpoint's, so the failed RU's stream is unread
// after its failover and the run is Degraded, naming it.
func TestUnfoldedRunPlacesRusAndBusAndFailsOver(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "unf", 0, 1, 2, 3)
	run := fabricRun(ns, "unf", "unf", 3, 2)
	run.Spec.Layout = ebv1.LayoutUnfolded
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	key := client.ObjectKeyFromObject(run)

	var doc ranktable.Document
	eventually(t, "rank table epoch 1", func() (err error) {
		doc, err = rankTable(ctx, ns, "unf")
		return err
	})
	if got := functions(doc); got != "RU0 RU1 S S RU2 BU0 BU1 BU2" || doc.Layout != "Unfolded" || doc.Epoch != 1 {
		t.Fatalf("rank table epoch %d layout %s: %s, want Unfolded epoch 1: RU0 RU1 S S RU2 BU0 BU1 BU2", doc.Epoch, doc.Layout, got)
	}
	for _, r := range doc.Ranks {
		if want := r.Function == "RU"; (len(r.Sources) == 1) != want {
			t.Errorf("rank %d (%s) sources %v: an RU reads its endpoint's stream, a BU none", r.Rank, r.Function, r.Sources)
		}
	}

	all := []string{"unf-eb-0", "unf-eb-1", "unf-eb-2", "unf-eb-3", "unf-eb-4", "unf-eb-5", "unf-eb-6", "unf-eb-7"}
	pods := waitPods(t, ns, "unf", all...)
	emu := map[string]*builderemu.Builder{}
	for name, pod := range pods {
		emu[name] = startPod(t, &pod)
	}
	eventually(t, "Running, three units on six live ranks", func() error {
		st := getRun(t, key).Status
		if st.Phase != ebv1.PhaseRunning || st.LiveUnits != 3 || len(st.Units) != 6 || st.SparesLeft != 2 || st.RankCount != 8 {
			return fmt.Errorf("phase %s (%v) live units %d unit rows %d spares %d ranks %d", st.Phase, st.Conditions, st.LiveUnits, len(st.Units), st.SparesLeft, st.RankCount)
		}
		return nil
	})

	// Unit 0's RU (rank 0, leaf 0) is refused by the kubelet: with no spare
	// on another leaf, the spare on its leaf (rank 2) runs it, reading the
	// spare's own stream.
	failPod(t, ns, "unf-eb-0", "TopologyAffinityError")
	fo := waitFailover(t, key, 2)
	farm.Kill(string(pods["unf-eb-0"].UID))
	if len(fo.Moves) != 1 || fo.Moves[0].Unit != 0 || fo.Moves[0].FailedRank != 0 || fo.Moves[0].SpareRank == nil || *fo.Moves[0].SpareRank != 2 {
		t.Errorf("lastFailover %+v, want unit 0 from rank 0 to spare rank 2", fo)
	}
	waitFailoverConfigured(t, key, 2)
	if doc, _ = rankTable(ctx, ns, "unf"); functions(doc) != "- RU1 RU0 S RU2 BU0 BU1 BU2" ||
		!slices.Equal(doc.Ranks[2].Sources, []string{"unf-srv1-numa0-mfp0"}) {
		t.Errorf("epoch %d: %s, rank 2 sources %v; want - RU1 RU0 S RU2 BU0 BU1 BU2, rank 2 reading unf-srv1-numa0-mfp0",
			doc.Epoch, functions(doc), doc.Ranks[2].Sources)
	}

	// Unit 1's BU (rank 6, leaf 1) goes: the last spare (rank 3, leaf 0) runs it.
	failPod(t, ns, "unf-eb-6", "TopologyAffinityError")
	fo = waitFailover(t, key, 3)
	farm.Kill(string(pods["unf-eb-6"].UID))
	if len(fo.Moves) != 1 || fo.Moves[0].Unit != 1 || fo.Moves[0].SpareRank == nil || *fo.Moves[0].SpareRank != 3 {
		t.Errorf("lastFailover %+v, want unit 1 from rank 6 to spare rank 3", fo)
	}
	waitFailoverConfigured(t, key, 3)
	if doc, _ = rankTable(ctx, ns, "unf"); functions(doc) != "- RU1 RU0 BU1 RU2 BU0 - BU2" || len(doc.Ranks[3].Sources) != 0 {
		t.Errorf("epoch %d: %s, rank 3 sources %v; want - RU1 RU0 BU1 RU2 BU0 - BU2, no sources on the BU",
			doc.Epoch, functions(doc), doc.Ranks[3].Sources)
	}
	survivors := waitPods(t, ns, "unf", "unf-eb-1", "unf-eb-2", "unf-eb-3", "unf-eb-4", "unf-eb-5", "unf-eb-7")
	for name, p := range survivors {
		if p.UID != pods[name].UID {
			t.Errorf("pod %s replaced by a failover", name)
		}
		waitCommands(t, name, emu[name], "configure@1 start configure@2 configure@3")
	}
	c := waitPhase(t, key, ebv1.PhaseDegraded, ebv1.ReasonStreamsUnread)
	if !strings.Contains(c.Message, "endpoint unf-srv0-numa0 (node unf-srv0, streams unf-srv0-numa0-mfp0): no rank runs it") {
		t.Errorf("Degraded %q, want it to name the failed RU's stream", c.Message)
	}
	if st := getRun(t, key).Status; st.LiveUnits != 3 || st.SparesLeft != 0 {
		t.Errorf("after two failovers: live units %d, spares left %d; want 3 and 0", st.LiveUnits, st.SparesLeft)
	}
}

// Without a Fabric, an Unfolded run of 2 units has 4 ranks and pods: the
// RUs on ranks 0 and 1, their BUs on 2 and 3.
func TestUnfoldedRunWithoutFabric(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	run := &ebv1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: "unf2", Namespace: ns},
		Spec: ebv1.EventBuilderRunSpec{Units: 2, Layout: ebv1.LayoutUnfolded,
			Builder: ebv1.BuilderSpec{Image: "eventbuilder/builder:test"}},
	}
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	pods := waitPods(t, ns, "unf2", "unf2-eb-0", "unf2-eb-1", "unf2-eb-2", "unf2-eb-3")
	for _, pod := range pods {
		startPod(t, &pod)
	}
	key := client.ObjectKeyFromObject(run)
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	if doc, err := rankTable(ctx, ns, "unf2"); err != nil || functions(doc) != "RU0 RU1 BU0 BU1" {
		t.Errorf("rank table %s (%v), want RU0 RU1 BU0 BU1", functions(doc), err)
	}
	if st := getRun(t, key).Status; st.LiveUnits != 2 || len(st.Units) != 4 || st.RankCount != 4 {
		t.Errorf("live units %d, unit rows %d, ranks %d; want 2, 4, 4", st.LiveUnits, len(st.Units), st.RankCount)
	}
}

// A builder that its peers report lost (here: its process died, and its
// pod still looks Running) fails its unit over: the new epoch is
// configured on the running survivors and on the spare that takes the
// unit over, and no survivor's pod is touched.
func TestLostPeerFailsOver(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "lost")
	run := fabricRun(ns, "lost", "lost", 5, 2)
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	pods := waitPods(t, ns, "lost", "lost-eb-0", "lost-eb-1", "lost-eb-2", "lost-eb-3", "lost-eb-4", "lost-eb-5", "lost-eb-6")
	emu := map[string]*builderemu.Builder{}
	for name, pod := range pods {
		emu[name] = startPod(t, &pod)
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)

	// Rank 4's builder dies; every live peer marks it lost.
	farm.Kill(string(pods["lost-eb-4"].UID))
	fo := waitFailover(t, key, 2)
	if fo.Outcome != ebv1.OutcomeMovedToSpare || len(fo.Moves) != 1 || fo.Moves[0].FailedRank != 4 || fo.Moves[0].Reason != "PeerLost" ||
		fo.Moves[0].SpareRank == nil || *fo.Moves[0].SpareRank != 2 {
		t.Errorf("lastFailover %+v", fo)
	}
	fo = waitFailoverConfigured(t, key, 2)
	t.Logf("failover: table published %v, configured %v after the failure was observed", fo.Duration.Duration, fo.ConfiguredDuration.Duration)
	now := waitPods(t, ns, "lost", "lost-eb-0", "lost-eb-1", "lost-eb-2", "lost-eb-3", "lost-eb-5", "lost-eb-6")
	for name, p := range now {
		if p.UID != pods[name].UID {
			t.Errorf("pod %s replaced", name)
		}
		waitCommands(t, name, emu[name], "configure@1 start configure@2")
	}
	// The set switches to epoch 2 together, the spare goes live, the lost
	// list resets, and the run is Running again with unit 2 on rank 2.
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	var st ebv1.EventBuilderRunStatus
	eventually(t, "every unit on epoch 2", func() error {
		st = getRun(t, key).Status
		for _, u := range st.Units {
			if u.Epoch != 2 || u.PendingEpoch != 0 || len(u.LostPeers) != 0 {
				return fmt.Errorf("unit row %+v, want epoch 2 and no lost peers", u)
			}
		}
		return nil
	})
	if r := st.Ranks[2]; r.Role != ebv1.RoleLive || r.Unit == nil || *r.Unit != 2 {
		t.Errorf("rank 2 %+v, want unit 2 live", r)
	}
	expectEvent(t, ns, "lost", "FailoverConfigured")
}

// A whole server lost with every peer that could report it: both live
// units' builders stop answering (their pods still look Running and Ready,
// their node still Ready), and the spares, in standby, watch nobody. The
// operator's own polls find them unreachable and move both units to the
// spares within a few polls, without waiting for the node to turn NotReady;
// so does an operator that never heard them (a new leader, the old one lost
// with the server): the kubelet found their pods Ready.
func TestUnreachableUnitsFailOverWithNoPeerLeftToReportThem(t *testing.T) {
	requireEnvtest(t)
	for _, tc := range []struct {
		name      string
		newLeader bool
	}{
		{name: "heard by this operator", newLeader: false},
		{name: "by a new leader that heard none of them", newLeader: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "unr"
			if tc.newLeader {
				prefix = "unr-leader"
			}
			unreachableUnitsFailOver(t, prefix, tc.newLeader)
		})
	}
}

func unreachableUnitsFailOver(t *testing.T, prefix string, newLeader bool) {
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, prefix)
	run := fabricRun(ns, "unr", prefix, 2, 2)
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	var pods map[string]corev1.Pod
	eventually(t, "4 pods", func() (err error) {
		if pods, err = livePods(ctx, ns, "unr"); err == nil && len(pods) != 4 {
			err = fmt.Errorf("%d pods", len(pods))
		}
		return err
	})
	for _, pod := range pods {
		startPod(t, &pod)
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	if newLeader {
		// What a new leader knows of the run's builders: nothing.
		reconciler.polls.Forget(key)
	}
	var live []int32
	lostNodes := map[string]bool{}
	for _, r := range getRun(t, key).Status.Ranks {
		if r.Role == ebv1.RoleLive {
			live = append(live, r.Rank)
			lostNodes[r.Node] = true
			uid := pods[r.Pod].UID
			prober.lose(uid) // with the server: its kubelet, then its builders
			farm.Kill(string(uid))
		}
	}
	killed := time.Now()
	// Both move in one failover, or in two when a poll was under way as
	// they stopped (one answered it, the other did not, so one's silence
	// starts a poll earlier): either way by their silence, to the spares.
	var st ebv1.EventBuilderRunStatus
	eventually(t, "both live units moved to the spares", func() error {
		st = getRun(t, key).Status
		var nowLive []int32
		for _, r := range st.Ranks {
			if r.Role == ebv1.RoleLive {
				nowLive = append(nowLive, r.Rank)
			}
		}
		if len(nowLive) != 2 || slices.ContainsFunc(nowLive, func(r int32) bool { return slices.Contains(live, r) }) {
			return fmt.Errorf("live ranks %v, were %v", nowLive, live)
		}
		return nil
	})
	t.Logf("both live units unreachable: failed over by epoch %d, %v after their builders stopped answering (threshold %v, polls every %v)",
		st.Epoch, time.Since(killed).Round(time.Millisecond), unreachableAfter, pollInterval)
	if st.Epoch > 3 {
		t.Errorf("epoch %d: two units lost at once took more than two failovers", st.Epoch)
	}
	// The first failover finds them by silence alone; a unit left behind
	// by it may be reported lost by the spare that joined meanwhile.
	var failovers []string
	eventually(t, "Failover events naming both units", func() error {
		failovers = eventNotes(t, ns, "unr", "Failover")
		var moved []int32
		for _, note := range failovers {
			for _, rank := range live {
				if strings.Contains(note, fmt.Sprintf("on rank %d (", rank)) {
					moved = append(moved, rank)
				}
			}
		}
		slices.Sort(moved)
		if !slices.Equal(moved, live) {
			return fmt.Errorf("failovers %q moved ranks %v, want %v", failovers, moved, live)
		}
		return nil
	})
	unreachable := 0
	for _, note := range failovers {
		moves := strings.Count(note, " failed: ")
		unreachable += strings.Count(note, ": "+runplan.ReasonUnreachable+"; moved to spare")
		if moves != strings.Count(note, ": "+runplan.ReasonUnreachable+"; moved to spare")+strings.Count(note, ": "+runplan.ReasonPeerLost+"; moved to spare") {
			t.Errorf("failover %q: every move must go to a spare, Unreachable or PeerLost", note)
		}
	}
	if unreachable == 0 {
		t.Errorf("failovers %q: none found a unit by its silence (Unreachable)", failovers)
	}
	waitFailoverConfigured(t, key, st.Epoch)
	expectEvent(t, ns, "unr", "FailoverConfigured")

	// The server restarts faster than its node turns NotReady: its new
	// boot ID alone says it is back, and its endpoints are spares again.
	for node := range lostNodes {
		rebootNode(t, node, node+"-boot-2")
	}
	eventually(t, "the lost server's endpoints spares again", func() error {
		st := getRun(t, key).Status
		back := 0
		for _, r := range st.Ranks {
			if r.Role == ebv1.RoleSpare && lostNodes[r.Node] {
				back++
			}
		}
		if back != 2 || st.SparesLeft != 2 {
			return fmt.Errorf("epoch %d: %d spares on %v, spares left %d", st.Epoch, back, lostNodes, st.SparesLeft)
		}
		return nil
	})
	expectEvent(t, ns, "unr", "SparesReplenished")
}

// A spare that takes a unit over but cannot join the running set (its
// node's data network down, while its control API answers) no longer
// wedges it: its peers report it lost at the failover's epoch (eb-builder's
// --join-timeout-ms), and it is failed over in turn: to another spare, or,
// with none left, the run degrades.
func TestSpareThatCannotJoinIsFailedOver(t *testing.T) {
	requireEnvtest(t)
	for _, tc := range []struct {
		name   string
		spares int32
		spare  int32 // the rank the planner moves rank 4's unit to (another leaf first)
		// Outcome of the spare's own failover, at epoch 3.
		outcome   string
		phase     ebv1.RunPhase
		reason    string
		liveUnits int32
		// Spares left at the end: a failed spare's sibling (the other half
		// of its server) is never used for it.
		sparesLeft int32
	}{
		{"another spare takes over", 3, 2, ebv1.OutcomeMovedToSpare, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning, 5, 1},
		{"only its sibling left: the run degrades", 2, 2, ebv1.OutcomeDegraded, ebv1.PhaseDegraded, ebv1.ReasonUnitsLost, 4, 1},
		{"none left: the run degrades", 1, 3, ebv1.OutcomeDegraded, ebv1.PhaseDegraded, ebv1.ReasonUnitsLost, 4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t)
			name := fmt.Sprintf("nojoin%d", tc.spares)
			smallFabric(t, name)
			run := fabricRun(ns, name, name, 5, tc.spares)
			if err := k8s.Create(ctx, run); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKeyFromObject(run)
			want := []string{}
			for r := range 5 + tc.spares {
				want = append(want, fmt.Sprintf("%s-eb-%d", name, r))
			}
			pods := waitPods(t, ns, name, want...)
			for _, pod := range pods {
				startPod(t, &pod)
			}
			waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
			doc, err := rankTable(ctx, ns, name)
			if err != nil || roles(doc)[tc.spare] != 'S' || roles(doc)[4] != 'L' {
				t.Fatalf("rank table %s (%v), want a spare on rank %d and rank 4 live", roles(doc), err, tc.spare)
			}
			// Rank 4's builder dies; its unit goes to the spare, whose data
			// network is down.
			farm.SetUnreachable(string(pods[fmt.Sprintf("%s-eb-%d", name, tc.spare)].UID), true)
			farm.Kill(string(pods[name+"-eb-4"].UID))

			fo := waitFailover(t, key, 3)
			if m := fo.Moves; fo.Outcome != tc.outcome || len(m) != 1 || m[0].FailedRank != tc.spare || m[0].Reason != runplan.ReasonPeerLost ||
				(m[0].SpareRank != nil) != (tc.outcome == ebv1.OutcomeMovedToSpare) {
				b, _ := json.Marshal(fo)
				t.Errorf("lastFailover %s, want the spare on rank %d (PeerLost at epoch 2) %s", b, tc.spare, tc.outcome)
			}
			waitPhase(t, key, tc.phase, tc.reason)
			eventually(t, "every unit at epoch 3, nobody lost", func() error {
				st := getRun(t, key).Status
				if st.LiveUnits != tc.liveUnits || len(st.Units) != int(tc.liveUnits) {
					return fmt.Errorf("live units %d, unit rows %d", st.LiveUnits, len(st.Units))
				}
				for _, u := range st.Units {
					if u.Epoch != 3 || len(u.LostPeers) != 0 {
						return fmt.Errorf("unit row %+v", u)
					}
				}
				return nil
			})
			if st := getRun(t, key).Status; st.SparesLeft != tc.sparesLeft || st.Ranks[tc.spare].Role != ebv1.RoleDummy || st.Ranks[4].Role != ebv1.RoleDummy {
				t.Errorf("spares left %d, ranks %+v; want %d left, ranks %d and 4 dummies", st.SparesLeft, st.Ranks, tc.sparesLeft, tc.spare)
			}
		})
	}
}

// A verbs run on a fabric: every builder (live and spare) is given its
// endpoint's RDMA device and NUMA node's RDMA resource, runs as root with
// IPC_LOCK alone, and the rank table shows the port each reports.
func TestVerbsRunOnAFabric(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "verbs")
	run := fabricRun(ns, "verbs", "verbs", 5, 2)
	run.Spec.Builder.Transport = ebv1.TransportVerbs
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	key := client.ObjectKeyFromObject(run)
	pods := waitPods(t, ns, "verbs", "verbs-eb-0", "verbs-eb-1", "verbs-eb-2", "verbs-eb-3", "verbs-eb-4", "verbs-eb-5", "verbs-eb-6")
	device := map[string]string{} // by pod
	for name, pod := range pods {
		c := pod.Spec.Containers[0]
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		numa := env["EB_NUMA_NODE"]
		device[name] = "mlx5_" + numa
		sc := c.SecurityContext
		switch {
		case !slices.Equal(c.Args[len(c.Args)-4:], []string{"--transport", "verbs", "--rdma-device", device[name]}):
			t.Errorf("%s args %q, want --transport verbs --rdma-device %s", name, c.Args, device[name])
		case env["EB_RDMA_DEVICE"] != device[name]:
			t.Errorf("%s env %v", name, env)
		case c.Resources.Limits.Name(corev1.ResourceName("rdma/hca_numa"+numa), resource.DecimalSI).Value() != 1:
			t.Errorf("%s resources %v, want one rdma/hca_numa%s", name, c.Resources, numa)
		case *sc.RunAsUser != 0 || *sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s security context %+v, want root, no privilege escalation, read-only root", name, sc)
		case !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"IPC_LOCK"}) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
			t.Errorf("%s capabilities %+v, want IPC_LOCK only", name, sc.Capabilities)
		}
	}

	for _, pod := range pods {
		startPod(t, &pod)
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	eventually(t, "every builder's RDMA port in the rank table", func() error {
		ranks := getRun(t, key).Status.Ranks
		if len(ranks) != 8 {
			return fmt.Errorf("%d ranks in status, want 8", len(ranks))
		}
		for _, rk := range ranks {
			var want *ebv1.RankTransport
			if rk.Pod != "" {
				want = &ebv1.RankTransport{Device: device[rk.Pod], PortState: "ACTIVE"} // InfiniBand: no GID index
			}
			if !reflect.DeepEqual(rk.Transport, want) {
				return fmt.Errorf("rank %d (%s) transport %+v, want %+v", rk.Rank, rk.Role, rk.Transport, want)
			}
		}
		return nil
	})
}

// A warm spare whose pod the kubelet refuses is not used: it does not
// count as left, and its pod is kept (not recreated in a loop) to show why.
func TestFailedSpareIsNotUsed(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "spf")
	run := fabricRun(ns, "spf", "spf", 5, 2)
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	pods := waitPods(t, ns, "spf", "spf-eb-0", "spf-eb-1", "spf-eb-2", "spf-eb-3", "spf-eb-4", "spf-eb-5", "spf-eb-6")
	failPod(t, ns, "spf-eb-2", "TopologyAffinityError")
	eventually(t, "one spare left", func() error {
		if st := getRun(t, key).Status; st.SparesLeft != 1 {
			return fmt.Errorf("spares left %d", st.SparesLeft)
		}
		return nil
	})
	// Unit 2 (rank 4) fails: it goes to rank 3, not to the refused spare.
	failPod(t, ns, "spf-eb-4", "Evicted")
	fo := waitFailover(t, key, 2)
	if len(fo.Moves) != 1 || fo.Moves[0].SpareRank == nil || *fo.Moves[0].SpareRank != 3 {
		t.Errorf("lastFailover %+v", fo)
	}
	now := waitPods(t, ns, "spf", "spf-eb-0", "spf-eb-1", "spf-eb-2", "spf-eb-3", "spf-eb-5", "spf-eb-6")
	if p := now["spf-eb-2"]; p.UID != pods["spf-eb-2"].UID || p.Status.Phase != corev1.PodFailed {
		t.Errorf("the refused spare's pod was replaced")
	}
}

// With failurePolicy Stop, a failure with no spare left stops the run.
func TestNoSpareStopsTheRun(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "stop")
	run := fabricRun(ns, "stop", "stop", 4, 0)
	run.Spec.FailurePolicy = ebv1.FailureStop
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	// Four units fill leaf 0: no dummies.
	waitPods(t, ns, "stop", "stop-eb-0", "stop-eb-1", "stop-eb-2", "stop-eb-3")
	setNodeReady(t, "stop-srv1", corev1.ConditionFalse)
	cond := waitPhase(t, client.ObjectKeyFromObject(run), ebv1.PhaseFailed, ebv1.ReasonNoSpareLeft)
	if !strings.Contains(cond.Message, "spec.failurePolicy is Stop") {
		t.Errorf("message %q", cond.Message)
	}
	waitPods(t, ns, "stop")
	expectEvent(t, ns, "stop", ebv1.ReasonNoSpareLeft)
	if fo := waitFailover(t, client.ObjectKeyFromObject(run), 2); fo.Outcome != ebv1.OutcomeStopped || len(fo.Moves) != 2 {
		t.Errorf("lastFailover %+v", fo)
	}
}

// A run naming a Fabric that does not exist waits for it.
func TestRunWaitsForItsFabric(t *testing.T) {
	requireEnvtest(t)
	ns := newNamespace(t)
	run := fabricRun(ns, "early", "early", 4, 0)
	if err := k8s.Create(context.Background(), run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	key := client.ObjectKeyFromObject(run)
	cond := waitPhase(t, key, ebv1.PhasePending, ebv1.ReasonFabricNotFound)
	if !strings.Contains(cond.Message, "spec.fabricRef") {
		t.Errorf("message %q", cond.Message)
	}
	// Nothing changes while it waits (no pods, no polls), yet the operator
	// keeps saying it looked: an old observedTime means no operator does.
	first := getRun(t, key).Status.ObservedTime
	if first == nil {
		t.Fatal("status.observedTime unset")
	}
	eventually(t, "status.observedTime moving on while the run waits", func() error {
		if now := getRun(t, key).Status.ObservedTime; !now.After(first.Time) {
			return fmt.Errorf("still %v", now)
		}
		return nil
	})
	// kubectl get ebrun shows its age.
	row, err := printedRow(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if age, _ := row["Observed"].(string); !regexp.MustCompile(`^[0-9]+s$`).MatchString(age) {
		t.Errorf("kubectl get ebrun shows Observed %q (row %v), want an age in seconds", row["Observed"], row)
	}
	smallFabric(t, "early")
	waitPods(t, ns, "early", "early-eb-0", "early-eb-1", "early-eb-2", "early-eb-3")
}

// A Fabric whose schedule would overload a leaf-spine link (3 leaves x 7
// ports, 4 spines, 2 links per pair, routed by the global port) is
// refused: the run is Pending, PlanFailed, its message naming the phase,
// the link and the fixes, and no pod is created.
func TestOverloadingFabricIsRefusedWithTheLinkAndTheFix(t *testing.T) {
	requireEnvtest(t)
	ns := newNamespace(t)
	f := &ebv1.Fabric{
		ObjectMeta: metav1.ObjectMeta{Name: "seven-ports"},
		Spec:       ebv1.FabricSpec{Leaves: 3, Spines: 4, PortsPerLeaf: 7, LinksPerPair: 2},
	}
	for leaf := range 3 {
		for port := range 7 {
			node := fmt.Sprintf("seven-l%dp%d", leaf, port)
			createNode(t, node)
			f.Spec.Endpoints = append(f.Spec.Endpoints, ebv1.FabricEndpoint{Name: node, Node: node, Leaf: int32(leaf), Port: int32(port)})
		}
	}
	if err := k8s.Create(context.Background(), f); err != nil {
		t.Fatalf("create fabric: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), f) })
	run := fabricRun(ns, "overloaded", f.Name, 21, 0)
	if err := k8s.Create(context.Background(), run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	cond := waitPhase(t, client.ObjectKeyFromObject(run), ebv1.PhasePending, ebv1.ReasonPlanFailed)
	for _, says := range []string{"carries 3 flows over 2 links", "phase ", "add spines or links per pair", "routing LeafPortModSpines"} {
		if !strings.Contains(cond.Message, says) {
			t.Errorf("Ready message %q, want it to say %q", cond.Message, says)
		}
	}
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(ns)); err != nil || len(pods.Items) != 0 {
		t.Errorf("%d pods (%v), want none for a refused plan", len(pods.Items), err)
	}
}

// failPod plays the kubelet refusing or evicting a pod.
func failPod(t *testing.T, ns, name, reason string) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: reason, Message: "Resources cannot be allocated with Topology locality"}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatalf("fail pod %s: %v", name, err)
	}
}

// waitFailoverConfigured waits for the failover of an epoch to reach every
// live builder (status.lastFailover.configuredTime).
func waitFailoverConfigured(t *testing.T, key client.ObjectKey, epoch int64) *ebv1.FailoverStatus {
	t.Helper()
	run := &ebv1.EventBuilderRun{}
	eventually(t, fmt.Sprintf("failover to epoch %d configured", epoch), func() error {
		if err := k8s.Get(context.Background(), key, run); err != nil {
			return err
		}
		if fo := run.Status.LastFailover; fo == nil || fo.Epoch != epoch || fo.ConfiguredTime == nil || fo.ConfiguredDuration == nil {
			b, _ := json.Marshal(fo)
			return fmt.Errorf("lastFailover %s", b)
		}
		return nil
	})
	return run.Status.LastFailover
}

// waitFailover waits for status.lastFailover at an epoch.
func waitFailover(t *testing.T, key client.ObjectKey, epoch int64) *ebv1.FailoverStatus {
	t.Helper()
	run := &ebv1.EventBuilderRun{}
	eventually(t, fmt.Sprintf("failover to epoch %d", epoch), func() error {
		if err := k8s.Get(context.Background(), key, run); err != nil {
			return err
		}
		if fo := run.Status.LastFailover; fo == nil || fo.Epoch != epoch || run.Status.Epoch != epoch {
			b, _ := json.Marshal(fo)
			return fmt.Errorf("epoch %d, lastFailover %s", run.Status.Epoch, b)
		}
		return nil
	})
	return run.Status.LastFailover
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func ptr[T any](v T) *T { return &v }

// The largest Fabric the schema allows (800 endpoints, maxItems) must be
// accepted: a validation rule over every pair of endpoints would exceed
// the API server's per-call CEL cost at this size.
func TestLargestFabricIsAccepted(t *testing.T) {
	requireEnvtest(t)
	f := &ebv1.Fabric{ObjectMeta: metav1.ObjectMeta{Name: "largest"}, Spec: ebv1.FabricSpec{Leaves: 40, Spines: 10, PortsPerLeaf: 20}}
	for i := range 800 {
		f.Spec.Endpoints = append(f.Spec.Endpoints, ebv1.FabricEndpoint{
			Name: fmt.Sprintf("eb%03d-numa%d", i/2, i%2), Node: fmt.Sprintf("eb%03d", i/2), NUMA: int32(i % 2),
			Leaf: int32(i / 20), Port: int32(i % 20), Streams: []string{fmt.Sprintf("s%d", i)},
		})
	}
	if err := k8s.Create(context.Background(), f); err != nil {
		t.Fatalf("create a Fabric of 800 endpoints: %v", err)
	}
	_ = k8s.Delete(context.Background(), f)
}
