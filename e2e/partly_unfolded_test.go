package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// Readout is physical, on kind: only the first worker's cards have fibres
// (the emulated cards of readout/chart-values.yaml, listed in the Fabric);
// the second worker is the spare server, cabled to the network only. The
// two units run on the first worker's NUMA halves, the spares on the
// second, without readout drivers. A unit is lost: its spare has no fibres, so it runs the unit's
// BU alone (a partly unfolded unit) and the rank table marks its source
// unread. Under incompleteEvents Flag every MEP after the switch keeps the
// lost source's slot as missing fragments: both consumers (the spare's and
// the surviving unit's) count those events incomplete and reject nothing,
// the spare's builder sends no data, and the run is Degraded naming the
// unread streams. At the stop every event built was consumed, complete or
// flagged.
func TestAUnitWithoutItsFibresBuildsItsShareFlaggingTheMissingSource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	const (
		namespaceName = "e2e-partly-unfolded"
		fabricName    = "e2e-partly-unfolded"
		runName       = "partly"
	)
	run, fabric, workers := startProductionRun(ctx, t, namespaceName, fabricName, runName, []int{0}, func(r *ebv1alpha1.EventBuilderRun) {
		r.Spec.Builder.IncompleteEvents = ebv1alpha1.IncompleteFlag
	})
	key := client.ObjectKeyFromObject(run)
	get := func() error { return k8sClient.Get(ctx, key, run) }
	for _, rk := range run.Status.Ranks {
		onFirst := strings.HasPrefix(rk.Endpoint, workers[0]+"-")
		if (rk.Role == ebv1alpha1.RoleLive) != onFirst {
			t.Errorf("rank %d (%s) is %s: want the units on %s (fibres), the spares on %s", rk.Rank, rk.Endpoint, rk.Role, workers[0], workers[1])
		}
		// A unit there would run its BU alone: no driver, no card asked
		// for (a spare server may have none).
		if pod := builderPod(ctx, t, namespaceName, rk.Pod); rk.Pod != "" && (len(pod.Spec.InitContainers) != 0) == !onFirst {
			t.Errorf("rank %d (%s): pod %s has %d init containers; want a readout driver exactly where the fibres are",
				rk.Rank, rk.Endpoint, rk.Pod, len(pod.Spec.InitContainers))
		}
	}

	before := run.DeepCopy()
	victim := before.Status.Ranks[slices.IndexFunc(before.Status.Ranks, func(rk ebv1alpha1.RankStatus) bool { return rk.Role == ebv1alpha1.RoleLive })]
	t.Logf("failing rank %d: deleting pod %s", victim.Rank, victim.Pod)
	deleteBuilderPod(ctx, t, builderPod(ctx, t, namespaceName, victim.Pod))
	var seen incompleteSeen
	waitForNewEpoch(ctx, t, run, before, 2, ebv1alpha1.PhaseDegraded, "a failover to a spare without fibres", &seen)
	failover := run.Status.LastFailover
	if failover == nil || len(failover.Moves) == 0 || failover.Moves[0].SpareRank == nil {
		raw, _ := json.Marshal(failover) // plain API types: cannot fail
		t.Fatalf("epoch %d is no failover to a spare: lastFailover %s; %s", run.Status.Epoch, raw, describe(run))
	}
	spare := *failover.Moves[0].SpareRank
	ready := meta.FindStatusCondition(run.Status.Conditions, ebv1alpha1.ConditionReady)
	if ready == nil || ready.Reason != ebv1alpha1.ReasonStreamsUnread || !strings.Contains(ready.Message, victim.Endpoint) {
		t.Errorf("after the failover, Ready %+v: want reason StreamsUnread naming %s", ready, victim.Endpoint)
	}
	doc := readRankTable(ctx, t, namespaceName, runName)
	if r := doc.Ranks[spare]; r.State != "live" || r.Function != "BU" || !r.SourceUnread || len(r.Sources) != 0 {
		t.Errorf("spare rank %d in the rank table: %+v, want live, function BU, sourceUnread, reading nothing", spare, r)
	}
	if want := endpointStreams(fabric, victim.Endpoint); !slices.Equal(doc.UnreadStreams, want) {
		t.Errorf("the rank table's unreadStreams %v after the failover, want the victim's %v", doc.UnreadStreams, want)
	}

	// Both BUs deliver every MEP flagged: the lost source's slot is there,
	// as missing fragments, and no consumer rejects one.
	waitFor(ctx, t, "both consumers counting flagged events, rejecting none", 3*time.Minute, func() (bool, string) {
		if err := get(); err != nil {
			return false, err.Error()
		}
		flagged := 0
		for _, u := range run.Status.Units {
			if c := u.Consumer; c != nil && c.EventsIncomplete > 0 && c.Rejected == 0 {
				flagged++
			}
		}
		return flagged == 2, describeProduction(run)
	})
	t.Logf("flagged: %s", describeProduction(run))
	spareRank := run.Status.Ranks[spare]
	if sent := podExec(ctx, t, namespaceName, spareRank.Pod, "builder", "bash", "-c",
		getMetrics+" && grep '^eb_network_sent_bytes_total ' <&3"); sent != "eb_network_sent_bytes_total 0" {
		t.Errorf("the spare's builder, a BU alone, sent data: %q", sent)
	}

	patchRun(ctx, t, run, func(r *ebv1alpha1.EventBuilderRun) { r.Spec.State = ebv1alpha1.StateStopped })
	waitFor(ctx, t, "phase Stopped with every consumer caught up with its builder", 3*time.Minute, func() (bool, string) {
		if err := get(); err != nil {
			return false, err.Error()
		}
		c := run.Status.Consumed
		return run.Status.Phase == ebv1alpha1.PhaseStopped && c != nil && c.EventsComplete == run.Status.EventsBuilt &&
			c.EventsIncomplete == run.Status.EventsIncomplete, describeProduction(run)
	})
	t.Logf("stopped: %s", describeProduction(run))
	if c := run.Status.Consumed; c.Rejected != 0 || c.EventsIncomplete == 0 {
		t.Errorf("consumed %d incomplete events and rejected %d: want the flagged ones, none rejected: %s",
			c.EventsIncomplete, c.Rejected, describeProduction(run))
	}
}

// rankTableRank is what this suite reads of a rank of the published table
// (operator/docs/rank-table.md).
type rankTableRank struct {
	Rank         int      `json:"rank"`
	State        string   `json:"state"`
	Function     string   `json:"function"`
	SourceUnread bool     `json:"sourceUnread"`
	Sources      []string `json:"sources"`
	Endpoint     string   `json:"endpoint"`
	Home         string   `json:"home"`
}

// rankTableDocument is what this suite reads of a published rank table.
type rankTableDocument struct {
	Ranks         []rankTableRank `json:"ranks"`
	UnreadStreams []string        `json:"unreadStreams"`
}

// readRankTable reads the rank table the operator published for a run.
func readRankTable(ctx context.Context, t *testing.T, namespace, run string) rankTableDocument {
	t.Helper()
	doc, err := loadRankTable(ctx, namespace, run)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// loadRankTable is readRankTable for a caller that goes on after an error
// (the API server may be down).
func loadRankTable(ctx context.Context, namespace, run string) (rankTableDocument, error) {
	var cm corev1.ConfigMap
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: run + "-ranks"}, &cm); err != nil {
		return rankTableDocument{}, fmt.Errorf("rank table of %s: %w", run, err)
	}
	var doc rankTableDocument
	if err := json.Unmarshal([]byte(cm.Data["ranks.json"]), &doc); err != nil {
		return rankTableDocument{}, fmt.Errorf("rank table of %s: %w", run, err)
	}
	return doc, nil
}
