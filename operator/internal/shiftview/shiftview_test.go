package shiftview

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files from the output")

var now = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func microAgo(d time.Duration) *metav1.MicroTime {
	t := metav1.NewMicroTime(now.Add(-d))
	return &t
}

// A run on a fabric of two leaves after one failover: four units, rank 2's
// unit moved to the spare on rank 5, a dummy rank, one builder misplaced.
func degradedRun() (*ebv1.EventBuilderRun, *ebv1.Fabric) {
	run := &ebv1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: "physics", Namespace: "daq", UID: "run-uid"},
		Spec:       ebv1.EventBuilderRunSpec{Units: 4, State: ebv1.StateRunning},
		Status: ebv1.EventBuilderRunStatus{
			Phase: ebv1.PhaseRunning, RunNumber: ptr.To(int64(255003)), Partition: "LHCb",
			Epoch: 3, RankCount: 6, LiveUnits: 4, ReadyUnits: 4, SparesLeft: 0,
			EventsBuilt: 1234567890, EventsIncomplete: 2000, EventsDropped: 0, EventRate: 30123456,
			ThroughputGbps: "412.7", LastSampleTime: microAgo(3 * time.Second),
			Consumed: &ebv1.ConsumerCounts{MEPs: 1234567, EventsComplete: 1234565890, EventsIncomplete: 2000},
			Conditions: []metav1.Condition{
				{Type: ebv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "AllUnitsBuilding",
					Message: "4 of 4 units build events", LastTransitionTime: ago(42 * time.Second)},
				{Type: ebv1.ConditionConfigured, Status: metav1.ConditionTrue, Reason: ebv1.ReasonEpochConfigured,
					Message: "every live builder took epoch 3", LastTransitionTime: ago(44 * time.Second)},
				{Type: "NUMAAligned", Status: metav1.ConditionFalse, Reason: "Misplaced",
					Message: "rank 3: memory on node 1", LastTransitionTime: ago(2 * time.Hour)},
			},
			Ranks: []ebv1.RankStatus{
				{Rank: 0, Role: ebv1.RoleLive, Unit: ptr.To(int32(0)), Endpoint: "srv-a-0", Node: "srv-a", Pod: "physics-eb-0",
					State: "RUNNING", NUMA: &ebv1.RankNUMA{Node: ptr.To(int32(0)), Aligned: true}},
				{Rank: 1, Role: ebv1.RoleLive, Unit: ptr.To(int32(1)), Endpoint: "srv-a-1", Node: "srv-a", Pod: "physics-eb-1",
					State: "RUNNING", NUMA: &ebv1.RankNUMA{Node: ptr.To(int32(1)), Aligned: true}},
				{Rank: 2, Role: ebv1.RoleDummy},
				{Rank: 3, Role: ebv1.RoleLive, Unit: ptr.To(int32(3)), Endpoint: "srv-b-1", Node: "srv-b", Pod: "physics-eb-3",
					State: "RUNNING", NUMA: &ebv1.RankNUMA{Node: ptr.To(int32(1)), Misplaced: "memory on node 0"}},
				{Rank: 5, Role: ebv1.RoleLive, Unit: ptr.To(int32(2)), Endpoint: "srv-c-0", Node: "srv-c", Pod: "physics-eb-5",
					State: "RUNNING", NUMA: &ebv1.RankNUMA{Node: ptr.To(int32(0)), Aligned: true}},
				{Rank: 4, Role: ebv1.RoleLive, Unit: ptr.To(int32(4)), Endpoint: "srv-b-0", Node: "srv-b", Pod: "physics-eb-4"},
			},
			LastFailover: &ebv1.FailoverStatus{
				ObservedTime: *microAgo(44 * time.Second), CompletedTime: *microAgo(43 * time.Second),
				Duration: metav1.Duration{Duration: 1200 * time.Millisecond}, Epoch: 3, Outcome: ebv1.OutcomeMovedToSpare,
				Moves: []ebv1.UnitMove{{Unit: 2, FailedRank: 2, FailedEndpoint: "srv-d-0", Reason: "NodeNotReady",
					SpareRank: ptr.To(int32(5)), SpareEndpoint: "srv-c-0"}},
			},
		},
	}
	run.Spec.FabricRef = &ebv1.FabricReference{Name: "farm"}
	fabric := &ebv1.Fabric{ObjectMeta: metav1.ObjectMeta{Name: "farm"}, Spec: ebv1.FabricSpec{Leaves: 2, Spines: 1, PortsPerLeaf: 4,
		Endpoints: []ebv1.FabricEndpoint{
			{Name: "srv-a-0", Node: "srv-a", NUMA: 0, Leaf: 0, Port: 0, Streams: []string{"VELO-0", "VELO-1"}},
			{Name: "srv-a-1", Node: "srv-a", NUMA: 1, Leaf: 0, Port: 1, Streams: []string{"SCIFI-0"}},
			{Name: "srv-b-0", Node: "srv-b", NUMA: 0, Leaf: 1, Port: 0},
			{Name: "srv-b-1", Node: "srv-b", NUMA: 1, Leaf: 1, Port: 1, Streams: []string{"UT-0"}},
			{Name: "srv-c-0", Node: "srv-c", NUMA: 0, Leaf: 1, Port: 2},
			{Name: "srv-d-0", Node: "srv-d", NUMA: 0, Leaf: 1, Port: 3},
		}}, Status: ebv1.FabricStatus{Endpoints: 6, SchedulableEndpoints: 5,
		Unschedulable: []ebv1.UnschedulableEndpoint{{Name: "srv-d-0", Node: "srv-d", Reason: "NodeNotReady"}}}}
	return run, fabric
}

func event(uid, reason, eventType, note string, age time.Duration) eventsv1.Event {
	return eventsv1.Event{Regarding: corev1.ObjectReference{UID: types.UID(uid)}, Action: failoverAction, Reason: reason,
		Type: eventType, Note: note, EventTime: *microAgo(age)}
}

func TestGolden(t *testing.T) {
	run, fabric := degradedRun()
	events := []eventsv1.Event{
		event("run-uid", "FailoverConfigured", "Normal", "epoch 3 configured on every live builder 1.1s after the failure was observed", 43*time.Second),
		event("run-uid", "Failover", "Warning", "epoch 3, MovedToSpare in 1.2s: unit 2 (NodeNotReady) rank 2 -> 5", 44*time.Second),
		event("other-uid", "Failover", "Warning", "another run's", 10*time.Second),
		{Regarding: corev1.ObjectReference{UID: "run-uid"}, Action: "Plan", Reason: "RankTablePublished", EventTime: *microAgo(time.Minute)},
	}
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "physics-eb-4"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				Message: "0/167 nodes are available: 167 Insufficient rdma/hca_numa1."}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "physics-eb-0"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		{ObjectMeta: metav1.ObjectMeta{Name: "physics-eb-3"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "builder", State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image \"eb-builder:typo\""}}}}}},
	}
	healthy := run.DeepCopy()
	healthy.Status.Conditions = healthy.Status.Conditions[:2]
	fresh := &ebv1.EventBuilderRun{ObjectMeta: metav1.ObjectMeta{Name: "sample", Namespace: "default"},
		Spec: ebv1.EventBuilderRunSpec{Units: 2}}
	for name, got := range map[string]string{
		"status-degraded.txt": Status(run, now),
		"ranks-degraded.txt":  Ranks(run, fabric),
		"ranks-no-fabric.txt": Ranks(run, nil),
		"status-fresh.txt":    Status(fresh, now),
		"failovers.txt":       Failovers(run, events, now),
		"failovers-none.txt":  Failovers(fresh, nil, now),
		"why-degraded.txt":    Why(run, pods),
		"why-healthy.txt":     Why(healthy, pods[1:2]),
		"why-fresh.txt":       Why(fresh, nil),
		"fabric.txt":          Fabric(fabric, []ebv1.EventBuilderRun{*run, *fresh}),
	} {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./internal/shiftview -update writes it)", err)
		}
		if got != string(want) {
			t.Errorf("%s differs; got:\n%s\nwant:\n%s", name, got, want)
		}
	}
}

func TestGroupedAndSince(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1 000", -1234567: "-1 234 567", 30123456: "30 123 456"} {
		if got := grouped(n); got != want {
			t.Errorf("grouped(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{-time.Second: "0s", 1500 * time.Millisecond: "2s", 3*time.Hour + 20*time.Second: "3h0m0s"} {
		if got := since(now.Add(-d), now); got != want {
			t.Errorf("since(%v) = %q, want %q", d, got, want)
		}
	}
}
