package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// leaderLossBound: every unit builds on the spares within this of losing
// the server that held both live units and the leading operator. The
// standby leads once the lease runs out (the chart's leaseDuration, 4s),
// finds the units' builders silent by its own polls (their pods were Ready:
// they had answered) and fails them over (issue 32 asks for 20s).
const leaderLossBound = 20 * time.Second

// The server holding both live units and the leading operator is killed:
// the standby operator, on the other worker, takes the lease over and
// fails the units over to the spares there, with one lease holder at
// every sample (the old leader, then the standby), epochs never stepping
// back, and every unit building within leaderLossBound. Started again, the
// server's endpoints become warm spares again and the operator has its two
// replicas back.
func TestLosingTheLeadingOperatorsServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const (
		namespaceName = "e2e-leader-loss"
		fabricName    = "e2e-leader-loss"
		runName       = "leader-loss"
	)
	leader := spreadOperators(ctx, t)
	victim, survivor := leader.Spec.NodeName, ""
	for _, w := range workerNodes(ctx, t) {
		if w != victim {
			survivor = w
		}
	}
	if survivor == "" || !slices.Contains(workerNodes(ctx, t), victim) {
		t.Fatalf("the leader %s runs on %s: want it on one of the workers %v (the chart spreads the operator over them)",
			leader.Name, victim, workerNodes(ctx, t))
	}
	key := client.ObjectKey{Namespace: namespaceName, Name: runName}
	run := runOnTwoServers(ctx, t, key, fabricName, victim, survivor)
	before := run.DeepCopy()
	epochs := watchEpochs(ctx, key)
	holders := watchLeaseHolders(ctx)

	killed := time.Now()
	docker(t, "kill", victim)
	t.Logf("killed server %s (both live units, the leading operator %s)", victim, leader.Name)
	var seen incompleteSeen
	fo := waitForMoveToSurvivor(ctx, t, run, before, survivor, 3*time.Minute, unreachableReason, &seen)
	building := waitForEveryUnitToBuild(ctx, t, run, run.DeepCopy(), "on the spares", &seen).Sub(killed)
	seenEpochs, back := epochs.stop()
	seenHolders, gaps := holders.stop()
	newLeader, _ := leaderPod(ctx)
	took := "no leader now"
	if newLeader != nil {
		took = newLeader.Name + " on " + newLeader.Spec.NodeName
	}
	t.Logf("leader loss figures: failover observed %s after the kill (table published %s later); every unit building on the spares %s after the kill (bound %s); lease holders %v, now %s; epochs %v",
		fo.ObservedTime.Sub(killed).Round(time.Millisecond), fo.Duration.Duration, building.Round(time.Millisecond), leaderLossBound,
		seenHolders, took, seenEpochs)
	if building > leaderLossBound {
		t.Errorf("every unit building %s after the leader's server was lost, want under %s", building.Round(time.Millisecond), leaderLossBound)
	}
	if back != "" {
		t.Errorf("the run's epoch stepped back: %s (epochs seen %v)", back, seenEpochs)
	}
	if gaps > 0 {
		t.Errorf("the lease named no holder at %d samples (holders %v)", gaps, seenHolders)
	}
	if len(seenHolders) != 2 || !strings.HasPrefix(seenHolders[0], leader.Name+"_") || newLeader == nil ||
		newLeader.Spec.NodeName != survivor || !strings.HasPrefix(seenHolders[1], newLeader.Name+"_") {
		t.Errorf("lease holders %v, now %s: want the old leader %s, then the standby on %s, once each", seenHolders, took, leader.Name, survivor)
	}

	waitFor(ctx, t, "the victim's node NotReady", 3*time.Minute, func() (bool, string) {
		ready, why := nodeReady(ctx, victim)
		return !ready, why
	})
	docker(t, "start", victim)
	waitFor(ctx, t, "the victim's endpoints warm spares again", 4*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		return run.Status.SparesLeft == 2 && standingSpares(run, victim) == 2, describeFailover(run)
	})
	waitFor(ctx, t, "the operator's two replicas available again", 4*time.Minute, func() (bool, string) {
		var d appsv1.Deployment
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorRelease}, &d); err != nil {
			return false, err.Error()
		}
		st := d.Status
		return d.Spec.Replicas != nil && st.AvailableReplicas == *d.Spec.Replicas && st.UpdatedReplicas == *d.Spec.Replicas,
			fmt.Sprintf("replicas %d updated %d available %d", st.Replicas, st.UpdatedReplicas, st.AvailableReplicas)
	})
	removeRunAndFabric(ctx, t, key, fabricName)
}

// spreadOperators returns the leading operator pod once the standby runs
// on another node. An earlier test's drain or lost worker may have left
// both on one node (a replacement goes where it may, and nothing moves it
// back): the standby is then deleted, and its replacement goes to the
// other worker (the chart's topology spread).
func spreadOperators(ctx context.Context, t *testing.T) *corev1.Pod {
	t.Helper()
	var leader *corev1.Pod
	deleted := false
	waitFor(ctx, t, "the leading and the standby operator on two nodes", 4*time.Minute, func() (bool, string) {
		var err error
		if leader, err = leaderPod(ctx); err != nil || leader == nil {
			return false, fmt.Sprintf("no leader: %v", err)
		}
		var pods corev1.PodList
		if err := k8sClient.List(ctx, &pods, client.InNamespace(operatorNamespace),
			client.MatchingLabels{"app.kubernetes.io/name": "eventbuilder-operator"}); err != nil {
			return false, err.Error()
		}
		var standby *corev1.Pod
		for i := range pods.Items {
			if p := &pods.Items[i]; p.UID != leader.UID && p.DeletionTimestamp.IsZero() && podIsReady(p) {
				standby = p
			}
		}
		switch {
		case standby == nil:
			return false, "no ready standby"
		case standby.Spec.NodeName != leader.Spec.NodeName:
			return true, ""
		case !deleted:
			if err := k8sClient.Delete(ctx, standby); err != nil {
				return false, err.Error()
			}
			deleted = true
		}
		return false, fmt.Sprintf("leader %s and standby %s both on %s", leader.Name, standby.Name, leader.Spec.NodeName)
	})
	return leader
}

// leaseWatch samples the leader lease every 100 ms until stopped: each new
// holder in order, and how many samples found none.
type leaseWatch struct {
	*sampler
	holders []string
	gaps    int
}

func watchLeaseHolders(ctx context.Context) *leaseWatch {
	w := &leaseWatch{}
	w.sampler = startSampling(ctx, func(ctx context.Context) {
		var lease coordinationv1.Lease
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: ebv1alpha1.LeaderLease}, &lease); err != nil {
			return
		}
		switch holder := lease.Spec.HolderIdentity; {
		case holder == nil || *holder == "":
			w.gaps++
		case len(w.holders) == 0 || w.holders[len(w.holders)-1] != *holder:
			w.holders = append(w.holders, *holder)
		}
	})
	return w
}

func (w *leaseWatch) stop() ([]string, int) {
	w.halt()
	return w.holders, w.gaps
}

// podIsReady: the pod's Ready condition is True.
func podIsReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
