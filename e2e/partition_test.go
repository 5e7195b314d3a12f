package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// partitionDetectionBound: a partition is seen from the peers' reports
// (the run Degraded naming the cut-off rank), within their --peer-timeout-ms (1 s), a poll (1 s)
// and a status write, not from the stall check's 10 s (issue 34).
const partitionDetectionBound = 4 * time.Second

// partitionRejoinBound: healed, the cut-off unit is back in the set (every
// unit on the rejoin epoch) within 5 s (issue 34): its builder reaches the
// peers it lost within a second (Lost_peer_probe), then a poll, its reset
// and the rejoin epoch's switch.
const partitionRejoinBound = 5 * time.Second

// A partition of the data network: one unit's pod is cut off from the other
// units' pods (iptables on every worker drops what passes between them)
// while everything else, the operator's polls included, still flows. The
// run goes Degraded, its peers reporting the cut-off rank lost; healed, the rank rejoins at a
// new epoch (reset first: it is still in its session) and every unit builds
// again. Each step prints its time.
func TestDataNetworkPartitionedThenHealed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	key := client.ObjectKey{Namespace: "e2e-partition", Name: "partition"}
	run := runningRun(ctx, t, key, 4)
	before := run.DeepCopy()
	ips := map[int32]string{}
	for _, u := range run.Status.Units {
		ips[u.Rank] = builderPod(ctx, t, key.Namespace, u.Pod).Status.PodIP
	}
	const cut = int32(1)
	var rules [][]string
	for rank, ip := range ips {
		if rank != cut {
			rules = append(rules, []string{"-s", ips[cut], "-d", ip, "-j", "DROP"}, []string{"-s", ip, "-d", ips[cut], "-j", "DROP"})
		}
	}
	workers := workerNodes(ctx, t)
	iptables := func(op string) {
		for _, node := range workers {
			for _, rule := range rules {
				args := append([]string{"exec", node, "iptables", op, "FORWARD"}, rule...)
				if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
					t.Fatalf("docker %v: %v\n%s", args, err, out)
				}
			}
		}
	}
	healed := false
	defer func() {
		if !healed {
			iptables("-D")
		}
	}()

	epochs := watchEpochs(ctx, key)
	cutAt := time.Now()
	iptables("-I")
	t.Logf("rank %d (%s) cut off from the other units' pods on %v", cut, ips[cut], workers)
	// Seen from the peers' reports (the stall check would take 10 s): the
	// run goes Degraded naming the rank.
	waitDegradedNaming(ctx, t, run, []int32{cut})
	detected := time.Since(cutAt)
	t.Logf("Degraded %s after the cut: %s: %s", detected.Round(time.Millisecond), readyCondition(run).Reason, readyCondition(run).Message)
	if detected > partitionDetectionBound+timingMargin {
		t.Errorf("Degraded %s after the cut, want within %s (+%s): the peers report the unit lost after --peer-timeout-ms",
			detected.Round(time.Millisecond), partitionDetectionBound, timingMargin)
	}
	// Still in its session, alone, it is not taken back while the cut
	// lasts; the condition names it first (the one all its peers lost),
	// with its node, and a partition.
	var cutNode string
	for _, u := range before.Status.Units {
		if u.Rank == cut {
			cutNode = builderPod(ctx, t, key.Namespace, u.Pod).Spec.NodeName
		}
	}
	named := fmt.Sprintf("ranks %d (node %s, lost by ", cut, cutNode)
	waitFor(ctx, t, "the run Degraded, its peers reporting the cut-off unit lost", 3*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		ready := readyCondition(run)
		return run.Status.Phase == ebv1alpha1.PhaseDegraded && ready != nil && ready.Reason == ebv1alpha1.ReasonUnitsLostByPeers &&
			strings.HasPrefix(ready.Message, named) && strings.Contains(ready.Message, "partition"), describe(run)
	})
	t.Logf("%s %s after the cut: %s", ebv1alpha1.ReasonUnitsLostByPeers, time.Since(cutAt).Round(time.Millisecond), readyCondition(run).Message)
	// The cut lasts longer than the first rejoin back-off (10 s): a rejoin
	// tried while it lasts fails, and the next would wait that long after
	// the heal. None is tried: the cut-off unit's builder dials the peers it
	// lost (lost_peers_reachable) and reaches none of them.
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(15 * time.Second): // the partition lasts on, not a wait for a condition
	}
	if err := k8sClient.Get(ctx, key, run); err != nil {
		t.Fatal(err)
	}
	if run.Status.Epoch != before.Status.Epoch {
		t.Errorf("epoch %d while the cut lasted, was %d: a rejoin was tried into a set the unit could not reach: %s",
			run.Status.Epoch, before.Status.Epoch, describeFailover(run))
	}

	healAt := time.Now()
	iptables("-D")
	healed = true
	var seen incompleteSeen
	waitForNewEpoch(ctx, t, run, before, 4, ebv1alpha1.PhaseRunning, "the cut-off unit to rejoin", &seen)
	rejoined := time.Since(healAt)
	if rejoined > partitionRejoinBound+timingMargin {
		t.Errorf("every unit on a new epoch %s after the heal, want within %s (+%s): the cut-off unit reaches its peers "+
			"within a second, the operator's next poll sees it", rejoined.Round(time.Millisecond), partitionRejoinBound, timingMargin)
	}
	waitForEveryUnitToBuild(ctx, t, run, run.DeepCopy(), "after the partition healed", &seen)
	seenEpochs, back := epochs.stop()
	t.Logf("partition healed: every unit on a new epoch %s later, every unit building %s later; epochs seen %v: %s",
		rejoined.Round(time.Millisecond), time.Since(healAt).Round(time.Millisecond), seenEpochs, describeFailover(run))
	if back != "" {
		t.Errorf("the run's epoch stepped back: %s", back)
	}
	if fo := run.Status.LastFailover; fo == nil || fo.Outcome != ebv1alpha1.OutcomeRejoined ||
		!slices.ContainsFunc(fo.Moves, func(m ebv1alpha1.UnitMove) bool { return m.FailedRank == cut }) {
		t.Errorf("lastFailover %+v, want rank %d Rejoined", fo, cut)
	}
	deleteRun(ctx, t, key)
}
