package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/ranktable"
)

// Readout is physical (issue 12 item 3): servers srv0 and srv1 read a
// stream per endpoint; srv2 and srv3 have no fibres. 5 units and 2 spares
// (a sixth unit's move would overload this fabric's single links): the
// spares are srv3, and the fifth unit, on srv2, runs its BU alone. A
// failed unit's streams stay on its endpoint, unread: the run is Degraded,
// naming them, while the spare runs the unit's BU alone, the table marking
// its source unread (every MEP keeps the slot, as missing) and listing the
// streams in unreadStreams. Once the Fabric
// shows the fibres re-cabled to the spare's cards, the next table reads
// them there (RU and BU) and the run is Running again.
func TestReadoutIsPhysical(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	fab := smallFabric(t, "rdo", 0, 1)
	run := fabricRun(ns, "rdo", "rdo", 5, 2)
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	started := map[string]bool{}
	startNew := func() error { // plays the kubelet: every new pod's builder starts
		pods, err := livePods(ctx, ns, "rdo")
		if err != nil {
			return err
		}
		for _, pod := range pods {
			if uid := string(pod.UID); !started[uid] {
				started[uid] = true
				startPod(t, &pod)
			}
		}
		return nil
	}
	waitPods(t, ns, "rdo", "rdo-eb-0", "rdo-eb-1", "rdo-eb-2", "rdo-eb-3", "rdo-eb-4", "rdo-eb-6", "rdo-eb-7")
	if err := startNew(); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)
	readout := func() *metav1.Condition {
		return meta.FindStatusCondition(getRun(t, key).Status.Conditions, ebv1.ConditionReadoutComplete)
	}
	if c := readout(); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "all 4 readout streams") {
		t.Errorf("ReadoutComplete %+v, want True, all 4 streams read", c)
	}
	var spares []string
	for _, r := range getRun(t, key).Status.Ranks {
		if r.Role == ebv1.RoleSpare {
			spares = append(spares, r.Endpoint)
		}
	}
	if !slices.Equal(spares, []string{"rdo-srv3-numa0", "rdo-srv3-numa1"}) {
		t.Errorf("spares %v, want the server without fibres, rdo-srv3", spares)
	}
	first, err := rankTable(ctx, ns, "rdo")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range first.Ranks {
		fibres := strings.HasPrefix(r.Endpoint, "rdo-srv0-") || strings.HasPrefix(r.Endpoint, "rdo-srv1-")
		if want := map[bool]string{true: "RU+BU", false: "BU"}[fibres]; r.State == "live" && r.Function != want {
			t.Errorf("rank %d on %s runs %s, want %s", r.Rank, r.Endpoint, r.Function, want)
		}
		if r.SourceUnread {
			t.Errorf("rank %d on %s: planned where no fibres are, it has no source to miss", r.Rank, r.Endpoint)
		}
	}

	// The kubelet refuses unit 0's pod (rank 0, rdo-srv0-numa0): a spare
	// takes the unit, not the fibres.
	failPod(t, ns, "rdo-eb-0", "TopologyAffinityError")
	fo := waitFailover(t, key, 2)
	if len(fo.Moves) != 1 || fo.Moves[0].SpareRank == nil {
		t.Fatalf("lastFailover %+v (%s), want unit 0 moved to a spare", fo, moves(fo))
	}
	spare := *fo.Moves[0].SpareRank
	c := waitPhase(t, key, ebv1.PhaseDegraded, ebv1.ReasonStreamsUnread)
	t.Logf("Degraded, %s: %s", c.Reason, c.Message)
	const named = "endpoint rdo-srv0-numa0 (node rdo-srv0, streams rdo-srv0-numa0-mfp0): no rank runs it"
	if !strings.Contains(c.Message, named) || !strings.Contains(c.Message, "re-cable the fibres") ||
		!strings.Contains(c.Message, fmt.Sprintf("every event lacks streams rdo-srv0-numa0-mfp0 (the rank table's unreadStreams) and every MEP misses the source of rank %d (unit 0), so every event is dropped", spare)) {
		t.Errorf("Degraded %q, want it to name %q, the source missing from the MEPs (rank %d) and the fix", c.Message, named, spare)
	}
	if c := readout(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ebv1.ReasonStreamsUnread || !strings.Contains(c.Message, "1 of 4") {
		t.Errorf("ReadoutComplete %+v, want False, 1 of 4 unread", c)
	}
	expectEvent(t, ns, "rdo", ebv1.ReasonStreamsUnread)
	doc, err := rankTable(ctx, ns, "rdo")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(doc.UnreadStreams, []string{"rdo-srv0-numa0-mfp0"}) {
		t.Errorf("unreadStreams %v, want the failed endpoint's stream, rdo-srv0-numa0-mfp0", doc.UnreadStreams)
	}
	if r := doc.Ranks[spare]; *r.Unit != 0 || r.Function != "BU" || len(r.Sources) != 0 || !strings.HasPrefix(r.Endpoint, "rdo-srv3-") ||
		!r.SourceUnread {
		t.Errorf("rank %d %+v, want unit 0's BU alone on a spare of rdo-srv3 (no fibres), reading nothing, its source unread", spare, r)
	}
	if st := getRun(t, key).Status; st.LiveUnits != 5 {
		t.Errorf("%d live units, want 5: the unit builds on, its BU alone", st.LiveUnits)
	}

	// The fibres are re-cabled to the spare's cards, and the Fabric says so.
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(fab), fab); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(fab.DeepCopy())
	for i := range fab.Spec.Endpoints {
		switch fab.Spec.Endpoints[i].Name {
		case "rdo-srv0-numa0":
			fab.Spec.Endpoints[i].Streams = nil
		case doc.Ranks[spare].Endpoint:
			fab.Spec.Endpoints[i].Streams = []string{"rdo-srv0-numa0-mfp0"}
		}
	}
	if err := k8s.Patch(ctx, fab, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a replan reading every stream, Running again", func() error {
		if err := startNew(); err != nil {
			return err
		}
		run := getRun(t, key)
		rc := meta.FindStatusCondition(run.Status.Conditions, ebv1.ConditionReadoutComplete)
		ready := meta.FindStatusCondition(run.Status.Conditions, ebv1.ConditionReady)
		if run.Status.Epoch < 3 || run.Status.Phase != ebv1.PhaseRunning || rc == nil || rc.Status != metav1.ConditionTrue {
			return fmt.Errorf("epoch %d phase %s Ready %+v ReadoutComplete %+v", run.Status.Epoch, run.Status.Phase, ready, rc)
		}
		return nil
	})
	doc, err = rankTable(ctx, ns, "rdo")
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.UnreadStreams) != 0 {
		t.Errorf("unreadStreams %v after the replan, want none", doc.UnreadStreams)
	}
	for _, r := range doc.Ranks {
		if r.Endpoint == "rdo-srv0-numa0" && r.State == "live" {
			t.Errorf("rank %d: the endpoint without its fibres runs a unit: %+v", r.Rank, r)
		}
		if slices.Contains(r.Sources, "rdo-srv0-numa0-mfp0") && (r.State != "live" || r.Function != "RU+BU") {
			t.Errorf("rank %d holds the re-cabled stream but is %s %s", r.Rank, r.State, r.Function)
		}
	}
}

// A failed server that comes back is offered as a spare again, its fibres
// no more read than before: the rank table keeps listing its streams
// (unreadStreams; the table alone could not tell its endpoints from spares
// planned on fibres), and the run stays Degraded, naming them. srv0 and
// srv1 read a stream per endpoint; srv3 holds the spares (no fibres).
func TestFailedServerBackAsSpareKeepsItsStreamsUnread(t *testing.T) {
	requireEnvtest(t)
	ctx := context.Background()
	ns := newNamespace(t)
	smallFabric(t, "back", 0, 1)
	run := fabricRun(ns, "back", "back", 5, 2)
	if err := k8s.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(run)
	// startNew plays the kubelet: every new pod's builder starts (by pod
	// name, the UID whose builder runs).
	started := map[string]string{}
	startNew := func() error {
		pods, err := livePods(ctx, ns, "back")
		if err != nil {
			return err
		}
		for name, pod := range pods {
			if uid := string(pod.UID); started[name] != uid {
				if started[name] != "" {
					farm.Kill(started[name]) // the old builder went with its pod
				}
				started[name] = uid
				startPod(t, &pod)
			}
		}
		return nil
	}
	waitPods(t, ns, "back", "back-eb-0", "back-eb-1", "back-eb-2", "back-eb-3", "back-eb-4", "back-eb-6", "back-eb-7")
	if err := startNew(); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, key, ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning)

	// srv0 goes NotReady: its units move to srv3's spares, running their
	// BUs alone; srv0's streams are unread since a failure.
	setNodeReady(t, "back-srv0", corev1.ConditionFalse)
	fo := waitFailover(t, key, 2)
	if len(fo.Moves) != 2 || fo.Moves[0].SpareRank == nil || fo.Moves[1].SpareRank == nil {
		t.Fatalf("lastFailover %+v (%s), want srv0's two units moved to spares", fo, moves(fo))
	}
	lost := []string{"back-srv0-numa0-mfp0", "back-srv0-numa1-mfp0"}
	if doc, err := rankTable(ctx, ns, "back"); err != nil || !slices.Equal(doc.UnreadStreams, lost) {
		t.Errorf("epoch 2 unreadStreams %v (%v), want %v", doc.UnreadStreams, err, lost)
	}
	waitPhase(t, key, ebv1.PhaseDegraded, ebv1.ReasonStreamsUnread)

	// srv0 comes back: its endpoints are spares again (epoch 3), their
	// streams unread still.
	setNodeReady(t, "back-srv0", corev1.ConditionTrue, fo.ObservedTime.Truncate(time.Second).Add(time.Second))
	var doc ranktable.Document
	eventually(t, "srv0's endpoints spares again at epoch 3", func() (err error) {
		if doc, err = rankTable(ctx, ns, "back"); err == nil && (doc.Epoch != 3 || !doc.Ranks[0].Spare || !doc.Ranks[1].Spare) {
			err = fmt.Errorf("epoch %d ranks 0 and 1 %+v %+v", doc.Epoch, doc.Ranks[0], doc.Ranks[1])
		}
		return err
	})
	if !slices.Equal(doc.UnreadStreams, lost) {
		t.Errorf("epoch 3 unreadStreams %v, want %v: srv0's spares read nothing", doc.UnreadStreams, lost)
	}
	eventually(t, "Degraded at epoch 3, naming srv0's streams", func() error {
		if err := startNew(); err != nil {
			return err
		}
		run := getRun(t, key)
		c := meta.FindStatusCondition(run.Status.Conditions, ebv1.ConditionReady)
		if run.Status.Epoch != 3 || run.Status.Phase != ebv1.PhaseDegraded || c == nil || c.Reason != ebv1.ReasonStreamsUnread ||
			!strings.Contains(c.Message, "endpoint back-srv0-numa0 (node back-srv0, streams back-srv0-numa0-mfp0): held as a warm spare") ||
			!strings.Contains(c.Message, "every event lacks streams back-srv0-numa0-mfp0, back-srv0-numa1-mfp0 (the rank table's unreadStreams)") {
			return fmt.Errorf("epoch %d phase %s Ready %+v", run.Status.Epoch, run.Status.Phase, c)
		}
		return nil
	})
}
