package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// leaderPod is the operator pod that holds the leader lease
// (ebv1alpha1.LeaderLease), running and not being deleted, or nil while
// there is none: only the leader reconciles; the other replica stands by.
func leaderPod(ctx context.Context) (*corev1.Pod, error) {
	var lease coordinationv1.Lease
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: ebv1alpha1.LeaderLease}, &lease); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return nil, nil
	}
	name, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_") // pod name _ random suffix
	var pod corev1.Pod
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: name}, &pod); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !pod.DeletionTimestamp.IsZero() || pod.Status.Phase != corev1.PodRunning {
		return nil, nil
	}
	return &pod, nil
}

// epochWatch samples a run's status epoch every 100 ms until stopped and
// remembers any step back.
type epochWatch struct {
	*sampler
	seen []int64 // each new value, in order
	back string  // the first step back, if any
}

func watchEpochs(ctx context.Context, key client.ObjectKey) *epochWatch {
	w := &epochWatch{}
	w.sampler = startSampling(ctx, func(ctx context.Context) {
		var run ebv1alpha1.EventBuilderRun
		if err := k8sClient.Get(ctx, key, &run); err != nil {
			return
		}
		if n := len(w.seen); n == 0 || w.seen[n-1] != run.Status.Epoch {
			if n > 0 && run.Status.Epoch < w.seen[n-1] && w.back == "" {
				w.back = fmt.Sprintf("%d after %d", run.Status.Epoch, w.seen[n-1])
			}
			w.seen = append(w.seen, run.Status.Epoch)
		}
	})
	return w
}

// stop ends the sampling and returns the epochs seen and any step back.
func (w *epochWatch) stop() ([]int64, string) {
	w.halt()
	return w.seen, w.back
}

// The leading operator's pod is killed (deleted at once, no grace) right
// after a cordon starts a planned move of both live units: the standby,
// once it holds the leader lease, completes the move from what the first
// one published (or plans it afresh); the epoch never steps back and no
// unit is ever live on two ranks.
func TestOperatorKilledInTheMiddleOfAFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	const (
		namespaceName = "e2e-operator-killed"
		fabricName    = "e2e-operator-killed"
		runName       = "operator-killed"
	)
	victim, survivor := victimAndSurvivor(ctx, t)
	defer uncordon(t, victim)
	key := client.ObjectKey{Namespace: namespaceName, Name: runName}
	run := runOnTwoServers(ctx, t, key, fabricName, victim, survivor)
	before := run.DeepCopy()
	first, err := leaderPod(ctx)
	if err != nil || first == nil {
		t.Fatalf("the leading operator's pod: %v", err)
	}
	epochs := watchEpochs(ctx, key)
	duplicates := watchDuplicateUnits(ctx, key)

	if out, err := exec.Command(env.kubectl, "--kubeconfig", env.kubeconfig, "cordon", victim).CombinedOutput(); err != nil {
		t.Fatalf("kubectl cordon %s: %v\n%s", victim, err, out)
	}
	if err := k8sClient.Delete(ctx, first, client.GracePeriodSeconds(0)); err != nil {
		t.Fatalf("delete the operator's pod %s: %v", first.Name, err)
	}
	killed := time.Now()
	if err := k8sClient.Get(ctx, key, run); err == nil {
		t.Logf("operator pod %s killed; the run then showed: %s", first.Name, describeFailover(run))
	}

	var next *corev1.Pod
	waitFor(ctx, t, "another operator pod leading", 3*time.Minute, func() (bool, string) {
		p, err := leaderPod(ctx)
		if err != nil {
			return false, err.Error()
		}
		next = p
		return p != nil && p.UID != first.UID, "no other operator pod leads yet"
	})
	operatorBack := time.Since(killed)
	var seen incompleteSeen
	waitForMoveToSurvivor(ctx, t, run, before, survivor, 3*time.Minute, ebv1alpha1.EndpointNodeCordoned, &seen)
	building := waitForEveryUnitToBuild(ctx, t, run, run.DeepCopy(), "on the spares after the operator was killed", &seen).Sub(killed)
	seenEpochs, back := epochs.stop()
	twice := duplicates.stop()
	if back != "" {
		t.Errorf("the run's epoch stepped back: %s (epochs seen %v)", back, seenEpochs)
	}
	if twice != "" {
		t.Errorf("a unit was live twice: %s", twice)
	}
	t.Logf("operator killed in a failover: next operator %s leading %s later; every unit building on the spares %s after the kill; epochs seen %v",
		next.Name, operatorBack.Round(time.Millisecond), building.Round(time.Millisecond), seenEpochs)
	removeRunAndFabric(ctx, t, key, fabricName)
}

// duplicateWatch samples a run's status every 100 ms and remembers a unit
// seen live on two ranks at once (its events built twice, or its sources
// read twice).
type duplicateWatch struct {
	*sampler
	twice string
}

func watchDuplicateUnits(ctx context.Context, key client.ObjectKey) *duplicateWatch {
	w := &duplicateWatch{}
	w.sampler = startSampling(ctx, func(ctx context.Context) {
		var run ebv1alpha1.EventBuilderRun
		if err := k8sClient.Get(ctx, key, &run); err != nil {
			return
		}
		if unit := unitLiveTwice(&run); unit != "" && w.twice == "" {
			w.twice = unit
		}
	})
	return w
}

// unitLiveTwice names a unit live on two ranks of the run at once (its
// events built twice, or its sources read twice), or "".
func unitLiveTwice(run *ebv1alpha1.EventBuilderRun) string {
	ranks := map[int32][]string{}
	for _, rk := range run.Status.Ranks {
		if rk.Role == ebv1alpha1.RoleLive && rk.Unit != nil {
			ranks[*rk.Unit] = append(ranks[*rk.Unit], fmt.Sprint(rk.Rank))
		}
	}
	for unit, on := range ranks {
		if len(on) > 1 {
			return fmt.Sprintf("unit %d live on ranks %s at epoch %d", unit, strings.Join(on, ", "), run.Status.Epoch)
		}
	}
	return ""
}

func (w *duplicateWatch) stop() string {
	w.halt()
	return w.twice
}

// The API server is restarted under a running run: the builders never
// notice (their data plane needs no API server), the operator finds the
// API again and writes the run's status again, and nothing fails over.
func TestAPIServerRestartedDuringARun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	key := client.ObjectKey{Namespace: "e2e-apiserver-restart", Name: "apiserver-restart"}
	run := runningRun(ctx, t, key, 2)
	before := run.DeepCopy()
	var pods []*corev1.Pod
	for _, u := range run.Status.Units {
		pods = append(pods, builderPod(ctx, t, key.Namespace, u.Pod))
	}
	controlPlane := controlPlaneNode(ctx, t)

	operatorBefore, err := leaderPod(ctx)
	if err != nil || operatorBefore == nil {
		t.Fatalf("the leading operator's pod: %v", err)
	}
	// Killed (a crash); the kubelet starts the static pod's container again.
	// Its process id tells the restart, however quick: a failed request
	// may never be seen between two polls.
	apiserverPID := func() string {
		out, _ := exec.Command("docker", "exec", controlPlane, "pgrep", "-x", "kube-apiserver").Output()
		return strings.TrimSpace(string(out))
	}
	pidBefore := apiserverPID()
	if pidBefore == "" {
		t.Fatalf("no kube-apiserver process on %s", controlPlane)
	}
	killed := time.Now()
	if out, err := exec.Command("docker", "exec", controlPlane, "pkill", "-KILL", "-x", "kube-apiserver").CombinedOutput(); err != nil {
		t.Fatalf("killing the API server on %s: %v\n%s", controlPlane, err, out)
	}
	waitFor(ctx, t, "the API server process gone", time.Minute, func() (bool, string) {
		pid := apiserverPID()
		return pid != pidBefore, "process " + pid + " still runs"
	})
	var answered time.Duration
	waitFor(ctx, t, "the API server answering again", 3*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		answered = time.Since(killed)
		return true, ""
	})
	back := killed.Add(answered)
	waitFor(ctx, t, "the run's status written again after the restart, more events built", 3*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		st := run.Status
		return st.LastSampleTime != nil && st.LastSampleTime.After(back) &&
			st.EventsBuilt > before.Status.EventsBuilt && st.Phase == ebv1alpha1.PhaseRunning, describeFailover(run)
	})
	operatorAfter, _ := leaderPod(ctx)
	operatorRestarts := "no operator pod leading"
	if operatorAfter != nil {
		operatorRestarts = fmt.Sprintf("leading operator pod %s (was %s), %d restarts", operatorAfter.Name, operatorBefore.Name,
			operatorAfter.Status.ContainerStatuses[0].RestartCount)
	}
	t.Logf("API server killed: it answered again %s later; the run's status was written again %s after that (%s): %s",
		answered.Round(time.Millisecond), time.Since(back).Round(time.Millisecond), operatorRestarts, describe(run))
	if run.Status.Epoch != before.Status.Epoch || run.Status.EventsIncomplete != before.Status.EventsIncomplete {
		t.Errorf("epoch %d -> %d, incomplete %d -> %d: the run must not notice the API server's restart",
			before.Status.Epoch, run.Status.Epoch, before.Status.EventsIncomplete, run.Status.EventsIncomplete)
	}
	for _, p := range pods {
		assertNotRestarted(ctx, t, "builder", p)
	}
	deleteRun(ctx, t, key)
}

// controlPlaneNode is the kind control-plane node (its container's name).
func controlPlaneNode(ctx context.Context, t *testing.T) string {
	t.Helper()
	var nodes corev1.NodeList
	if err := k8sClient.List(ctx, &nodes, client.HasLabels{"node-role.kubernetes.io/control-plane"}); err != nil || len(nodes.Items) != 1 {
		t.Fatalf("the control-plane node: %v (%d found)", err, len(nodes.Items))
	}
	return nodes.Items[0].Name
}
