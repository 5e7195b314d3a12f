package builderstatus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/testenv"
)

// farmUnits is the largest run the API takes (spec.units at most 1024,
// spec.spares 64), each unit RU+BU on its own rank, over verbs.
const farmUnits, farmSpares = 1024, 64

// etcd refuses a request over 1.5 MiB (--max-request-bytes); a status
// that fills two thirds of it leaves room for the spec, the metadata and
// a failover's record.
const statusBudget = 1 << 20

// The status of a farm's run, as the operator writes it after hours of
// building (counters of 12 digits, every field it fills), fits etcd's
// object limit with room to spare once stored by a real API server,
// managed fields included.
func TestAFarmRunsStatusFitsEtcd(t *testing.T) {
	env := testenv.StartForTest(t, "../../..")
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "farm"}}); err != nil {
		t.Fatal(err)
	}
	run := &ebv1.EventBuilderRun{ObjectMeta: metav1.ObjectMeta{Namespace: "farm", Name: "lhcb-run-3"}}
	run.Spec.Units, run.Spec.Spares = farmUnits, farmSpares
	run.Spec.Builder.Image = "registry.example/eventbuilder/builder:1.0.0"
	run.Spec.Builder.Transport = ebv1.TransportVerbs
	run.Spec.FabricRef = &ebv1.FabricReference{Name: "lhcb"}
	run.Spec.Resources = ebv1.UnitResources{RDMA: "rdma/hca_numa{numa}", CPUs: 16, Memory: ptr.To(resource.MustParse("64Gi"))}
	if err := c.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	// Two writes, as the operator's polls make them: the second finds the
	// first's managed fields.
	for poll := range 2 {
		run.Status = farmStatus(run.Name, time.Date(2026, 11, 29, 3, 0, poll, 0, time.UTC))
		if err := c.Status().Update(ctx, run); err != nil {
			t.Fatalf("status write %d: %v", poll, err)
		}
	}
	var stored ebv1.EventBuilderRun
	if err := c.Get(ctx, client.ObjectKeyFromObject(run), &stored); err != nil {
		t.Fatal(err)
	}
	whole, _ := json.Marshal(&stored)
	status, _ := json.Marshal(&stored.Status)
	managed, _ := json.Marshal(stored.ManagedFields)
	t.Logf("%d units + %d spares: object %d B, of which status %d B (%d B per unit) and managed fields %d B",
		farmUnits, farmSpares, len(whole), len(status), len(status)/farmUnits, len(managed))
	if len(whole) > statusBudget {
		t.Errorf("the run's object is %d B, over the %d B budget (etcd's limit is 1.5 MiB)", len(whole), statusBudget)
	}
}

// farmStatus is the status of a run of farmUnits units and farmSpares
// spares over verbs at time at: every unit building, every spare standing
// by, as Aggregate and the rank table make it.
func farmStatus(name string, at time.Time) ebv1.EventBuilderRunStatus {
	const events = int64(123_456_789_012)
	units := make([]builderstatus.Unit, farmUnits)
	reports := map[int32]builderapi.Report{}
	for i := range units {
		rank := int32(i)
		units[i] = builderstatus.Unit{Rank: rank, Pod: fmt.Sprintf("%s-eb-%d", name, rank), Node: fmt.Sprintf("server-%04d", rank/2), Ready: true}
		reports[rank] = builderapi.Report{State: builderapi.StateRunning, Activity: builderapi.ActivityBuilding, Epoch: 12,
			NextEvent: events + at.Unix(), EventsBuilt: events / farmUnits, BytesBuilt: events / farmUnits * 9000,
			Consumer: &builderapi.Consumer{MEPs: events / farmUnits / 1000, EventsComplete: events / farmUnits}}
	}
	prev := ebv1.EventBuilderRunStatus{LastSampleTime: ptr.To(metav1.NewMicroTime(at.Add(-time.Second)))}
	s := builderstatus.Aggregate(&prev, units, &builderstatus.Poll{Time: at, Reports: reports}, ebv1.StateRunning, 10*time.Second)
	st := ebv1.EventBuilderRunStatus{Phase: s.Phase, Units: s.Units, ReadyUnits: s.ReadyUnits, EventsBuilt: s.EventsBuilt,
		BytesBuilt: s.BytesBuilt, Consumed: s.Consumed, EventRate: s.EventRate, ThroughputGbps: s.ThroughputGbps,
		LastSampleTime: s.LastSampleTime, Epoch: 12, RankCount: farmUnits + farmSpares, LiveUnits: farmUnits, SparesLeft: farmSpares,
		ObservedTime: ptr.To(metav1.NewMicroTime(at)), Selector: "eventbuilder.daq.io/run=" + name}
	for rank := range int32(farmUnits + farmSpares) {
		r := ebv1.RankStatus{Rank: rank, Role: ebv1.RoleLive, Endpoint: fmt.Sprintf("server-%04d-numa%d", rank/2, rank%2),
			Node: fmt.Sprintf("server-%04d", rank/2), Pod: fmt.Sprintf("%s-eb-%d", name, rank), State: builderapi.StateRunning,
			Transport: &ebv1.RankTransport{Device: fmt.Sprintf("mlx5_%d", rank%2), PortState: "ACTIVE"},
			NUMA:      &ebv1.RankNUMA{Node: ptr.To(rank % 2), Aligned: true}}
		if rank < farmUnits {
			r.Unit = ptr.To(rank)
		} else {
			r.Role = ebv1.RoleSpare
		}
		st.Ranks = append(st.Ranks, r)
	}
	return st
}
