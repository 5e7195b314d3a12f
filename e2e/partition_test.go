package e2e

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// A partition of the data network: one unit's pod is cut off from the other
// units' pods (iptables on every worker drops what passes between them)
// while everything else, the operator's polls included, still flows. The
// run goes Degraded naming the cut-off rank; healed, the rank rejoins at a
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
	waitDegradedNaming(ctx, t, run, []int32{cut})
	t.Logf("Degraded %s after the cut: %s", time.Since(cutAt).Round(time.Millisecond), readyCondition(run).Message)
	// The condition names the cut-off unit's node and what its state points to.
	var cutNode string
	for _, u := range before.Status.Units {
		if u.Rank == cut {
			cutNode = builderPod(ctx, t, key.Namespace, u.Pod).Spec.NodeName
		}
	}
	if msg := readyCondition(run).Message; !strings.Contains(msg, "node "+cutNode) || !strings.Contains(msg, "partition") {
		t.Errorf("the Degraded message does not name rank %d's node %s and a partition: %s", cut, cutNode, msg)
	}
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(5 * time.Second): // the partition lasts on, not a wait for a condition
	}

	healAt := time.Now()
	iptables("-D")
	healed = true
	var seen incompleteSeen
	waitForNewEpoch(ctx, t, run, before, 4, ebv1alpha1.PhaseRunning, "the cut-off unit to rejoin", &seen)
	rejoined := time.Since(healAt)
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
