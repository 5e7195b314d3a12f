package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// workerRestartBound: a restarted worker's units build again within 20s
// of its start (issue 34), plus timingMargin. Most of it is the kind
// node's boot, its kubelet and the pods' new sandboxes (5-9s); then the
// pod network's routes to the other nodes (flanneld, podnet.yaml), the
// operator's next poll, the rejoin epoch and the set's switch: 9.9s,
// 14.0s and 18.8s measured (the last with 10s between the rejoin epoch
// configured and the set switched to it, not yet explained). It was 29.7s
// (issue 14) while flanneld waited out the kubelet's crash back-off.
const workerRestartBound = 20*time.Second + timingMargin

// A worker is lost under a run without a Fabric (no spare to move its
// units to): the run turns Degraded, its Ready condition naming the lost
// ranks. Then it comes back, and every unit builds again; each step
// prints its time.
//   - Stopped and started: the worker's pods come back with new IPs, the
//     pod network (flannel) restores the node's routes, and the operator
//     takes the units back at a new epoch with their new addresses.
//   - Paused and resumed (a hung node, shorter than the node controller's
//     grace): its builders wake up in their session, lost by their set,
//     having lost it in turn; the operator resets the builders its majority
//     rule finds lost and configures them back, and the set is whole again.
func TestWorkerLostUnderARunWithoutAFabric(t *testing.T) {
	for _, tc := range []struct {
		name, lose, back string
		pause            time.Duration // how long the worker stays lost after that
		newIPs           bool          // its pods come back at other IPs
	}{
		{name: "stopped and started", lose: "stop", back: "start", newIPs: true},
		{name: "paused and resumed", lose: "pause", back: "unpause", pause: 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			key := client.ObjectKey{Namespace: "e2e-worker-lost", Name: tc.lose}
			run := runningRun(ctx, t, key, 4)
			victim, lost := victimWorker(ctx, t, run)
			before := run.DeepCopy()
			ipsBefore := map[int32]string{}
			for _, u := range run.Status.Units {
				ipsBefore[u.Rank] = builderPod(ctx, t, key.Namespace, u.Pod).Status.PodIP
			}

			lostAt := time.Now()
			docker(t, tc.lose, victim)
			t.Logf("docker %s %s, with the units of ranks %v", tc.lose, victim, lost)
			waitDegradedNaming(ctx, t, run, lost)
			t.Logf("Degraded %s after docker %s: %s: %s", time.Since(lostAt).Round(time.Millisecond), tc.lose,
				readyCondition(run).Reason, readyCondition(run).Message)
			if tc.lose == "pause" {
				// The operator sees the silence first (its polls); the hang
				// is one once the set lost them (--peer-timeout-ms), not
				// after a set time: a shorter one the set rides out.
				waitPeersLost(ctx, t, run, lost)
				t.Logf("the set lost ranks %v %s after docker pause", lost, time.Since(lostAt).Round(time.Millisecond))
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(tc.pause): // the hang lasts on, not a wait for a condition
			}

			backAt := time.Now()
			docker(t, tc.back, victim)
			var seen incompleteSeen
			if tc.newIPs {
				// Its pods' new IPs must reach every builder: a new epoch.
				waitForNewEpoch(ctx, t, run, before, 4, ebv1alpha1.PhaseRunning, "the worker's units to rejoin", &seen)
				t.Logf("every unit on a new epoch %s after docker %s", time.Since(backAt).Round(time.Millisecond), tc.back)
				if fo := run.Status.LastFailover; fo == nil || fo.Outcome != ebv1alpha1.OutcomeRejoined {
					t.Errorf("lastFailover %+v, want the victim's units Rejoined", fo)
				}
			}
			// Woken builders still run their session: the set is whole again
			// once the operator reset what the set lost and configured it back,
			// at a new epoch or (the halves having lost each other) at its own.
			waitFor(ctx, t, "every unit building at the run's epoch", 3*time.Minute, func() (bool, string) {
				if err := k8sClient.Get(ctx, key, run); err != nil {
					return false, err.Error()
				}
				why := whyNotBuilding(run)
				return why == "", why
			})
			building := time.Since(backAt)
			t.Logf("worker back: every unit building %s after docker %s (bound %s): %s", building.Round(time.Millisecond), tc.back,
				workerRestartBound, describeFailover(run))
			if tc.newIPs {
				logComeback(ctx, t, victim, run, lost, backAt)
			}
			if tc.newIPs && building > workerRestartBound {
				t.Errorf("every unit built again %s after docker %s, want under %s", building.Round(time.Millisecond), tc.back, workerRestartBound)
				logRunEvents(ctx, t, run, lostAt)
			}
			// And events flow: the counters (written every
			// --status-counters-interval) grow on every unit.
			waitForEveryUnitToBuild(ctx, t, run, run.DeepCopy(), "after the worker came back", &seen)
			for _, u := range run.Status.Units {
				if len(u.LostPeers) > 0 {
					t.Errorf("rank %d still reports %v lost: %s", u.Rank, u.LostPeers, describeFailover(run))
				}
			}
			// After a restart, the case the operator must handle: the
			// victim's pods came back at other IPs (their sandboxes were
			// recreated), which the builders configured before cannot know.
			for _, u := range run.Status.Units {
				pod := builderPod(ctx, t, key.Namespace, u.Pod)
				if moved := pod.Status.PodIP != ipsBefore[u.Rank]; slices.Contains(lost, u.Rank) && moved != tc.newIPs {
					t.Errorf("rank %d's pod %s: IP %s -> %s, want a new IP: %t", u.Rank, pod.Name, ipsBefore[u.Rank], pod.Status.PodIP, tc.newIPs)
				}
			}
			deleteRun(ctx, t, key)
		})
	}
}

// victimWorker picks a worker that holds units of the run and not the
// leading operator (losing the leader with its node is another case), and
// the ranks of the units on it.
func victimWorker(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun) (string, []int32) {
	t.Helper()
	onNode := map[string][]int32{}
	for _, u := range run.Status.Units {
		node := builderPod(ctx, t, run.Namespace, u.Pod).Spec.NodeName
		onNode[node] = append(onNode[node], u.Rank)
	}
	operator := leaderNode(ctx, t)
	for _, w := range workerNodes(ctx, t) {
		if w != operator && len(onNode[w]) > 0 {
			return w, onNode[w]
		}
	}
	t.Fatalf("no worker holds units without the leading operator (%s): units by node %v", operator, onNode)
	return "", nil
}

// waitDegradedNaming waits until the run is Degraded with a Ready message
// that names every one of the ranks.
func waitDegradedNaming(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun, ranks []int32) {
	t.Helper()
	key := client.ObjectKeyFromObject(run)
	waitFor(ctx, t, "the run Degraded, naming the lost ranks", 3*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		ready := readyCondition(run)
		if run.Status.Phase != ebv1alpha1.PhaseDegraded || ready == nil {
			return false, describe(run)
		}
		for _, rank := range ranks {
			if !strings.Contains(ready.Message, fmt.Sprintf("rank %d", rank)) && !strings.Contains(ready.Message, fmt.Sprintf("ranks %d", rank)) {
				return false, "Ready message does not name rank " + fmt.Sprint(rank) + ": " + ready.Message
			}
		}
		return true, ready.Reason + ": " + ready.Message
	})
}

// waitPeersLost waits until every live unit not in ranks reports each of
// ranks lost (status.units[].lostPeers, from its builder).
func waitPeersLost(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun, ranks []int32) {
	t.Helper()
	key := client.ObjectKeyFromObject(run)
	waitFor(ctx, t, fmt.Sprintf("the other units to report ranks %v lost", ranks), time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		for _, u := range run.Status.Units {
			if slices.Contains(ranks, u.Rank) {
				continue
			}
			for _, r := range ranks {
				if !slices.Contains(u.LostPeers, r) {
					return false, fmt.Sprintf("rank %d reports lost %v: %s", u.Rank, u.LostPeers, describeFailover(run))
				}
			}
		}
		return true, ""
	})
}

func readyCondition(run *ebv1alpha1.EventBuilderRun) *metav1.Condition {
	for i := range run.Status.Conditions {
		if run.Status.Conditions[i].Type == ebv1alpha1.ConditionReady {
			return &run.Status.Conditions[i]
		}
	}
	return nil
}

// logComeback prints, from the objects' own timestamps (whole seconds),
// when after backAt the worker's node turned Ready and each of its units'
// pods got its sandbox, started its builder and turned Ready: where a
// restart's time goes.
func logComeback(ctx context.Context, t *testing.T, node string, run *ebv1alpha1.EventBuilderRun, ranks []int32, backAt time.Time) {
	t.Helper()
	since := func(at time.Time) string {
		if at.IsZero() {
			return "-"
		}
		return at.Sub(backAt).Round(100 * time.Millisecond).String()
	}
	var n corev1.Node
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		t.Logf("comeback: node %s: %v", node, err)
		return
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			t.Logf("comeback: node %s Ready at +%s", node, since(c.LastTransitionTime.Time))
		}
	}
	if fo := run.Status.LastFailover; fo != nil {
		configured := time.Time{}
		if fo.ConfiguredTime != nil {
			configured = fo.ConfiguredTime.Time
		}
		t.Logf("comeback: epoch %d (%s) observed +%s, configured on every builder +%s", fo.Epoch, fo.Outcome,
			since(fo.ObservedTime.Time), since(configured))
	}
	for _, u := range run.Status.Units {
		if !slices.Contains(ranks, u.Rank) {
			continue
		}
		pod := builderPod(ctx, t, run.Namespace, u.Pod)
		at := map[corev1.PodConditionType]time.Time{}
		for _, c := range pod.Status.Conditions {
			at[c.Type] = c.LastTransitionTime.Time
		}
		var started time.Time
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == "builder" && cs.State.Running != nil {
				started = cs.State.Running.StartedAt.Time
			}
		}
		t.Logf("comeback: rank %d pod %s: sandbox ready +%s, builder started +%s, pod Ready +%s", u.Rank, pod.Name,
			since(at[corev1.PodReadyToStartContainers]), since(started), since(at[corev1.PodReady]))
	}
}

// logRunEvents prints the run's Events since since, oldest first, with
// their times from it: which epochs the operator published, which rejoins
// failed or waited, for a failure whose own line cannot say.
func logRunEvents(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun, since time.Time) {
	t.Helper()
	var events corev1.EventList
	if err := k8sClient.List(ctx, &events, client.InNamespace(run.Namespace), client.MatchingFields{"involvedObject.name": run.Name}); err != nil {
		t.Logf("events of %s/%s: %v", run.Namespace, run.Name, err)
		return
	}
	slices.SortFunc(events.Items, func(a, b corev1.Event) int { return eventAt(a).Compare(eventAt(b)) })
	for _, e := range events.Items {
		if when := eventAt(e); !when.Before(since.Truncate(time.Second)) {
			t.Logf("event +%s %s %s: %s", when.Sub(since).Round(100*time.Millisecond), e.Type, e.Reason, e.Message)
		}
	}
}

// eventAt is when an Event was emitted: its eventTime (events.k8s.io, as
// the operator records them), else its lastTimestamp.
func eventAt(e corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.LastTimestamp.Time
}
