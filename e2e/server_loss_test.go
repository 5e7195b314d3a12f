package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// How soon, after a whole server is lost, the operator must fail its units
// over, and events must flow again on the spares. With the chart's polls
// (every 1s, each timing out after 750ms) a unit fails over once two polls
// in a row went unanswered for builderUnreachableAfter (1s), and a builder
// that falls silent is polled again at once: at worst the server dies just
// after a poll it answered, the next poll starts 1s later and times out at
// 1.75s, the one that confirms it at 2.5s. The decision must come within
// 4s (issue 34: at most 3s by design, asserted at 4s); it was 5s by design
// with 2s polls, 5.04s measured once.
const (
	detectionBound  = 4 * time.Second
	serverLossBound = 30 * time.Second
)

// A whole server is lost with both live units of a run and every CoreDNS
// replica: its kind node container is killed. No live peer survives to
// report the units lost, so the operator's own polls find them
// unreachable and fail them over to the spares on the other worker, long
// before the node turns NotReady; the spares connect by pod IP, so the
// lost cluster DNS stops nothing. Started again, the server's endpoints
// become warm spares again. Each step prints its time.
func TestLosingAServerWithItsDNS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const (
		namespaceName = "e2e-server-loss"
		fabricName    = "e2e-server-loss"
		runName       = "server-loss"
	)
	victim, survivor := victimAndSurvivor(ctx, t)
	key := client.ObjectKey{Namespace: namespaceName, Name: runName}
	placeCoreDNS(ctx, t, map[string]string{corev1.LabelHostname: victim})
	defer placeCoreDNS(context.Background(), t, nil)
	run := runOnTwoServers(ctx, t, key, fabricName, victim, survivor)
	before := run.DeepCopy()
	var position int64 // where the set was in the event stream, as last reported
	for _, u := range before.Status.Units {
		position = max(position, u.NextEvent)
	}

	stopped := time.Now()
	// Killed, not stopped: a server that loses power shuts nothing down
	// (docker stop would first let its kubelet and containers exit, 1-2 s
	// counted as the loss).
	docker(t, "kill", victim)
	t.Logf("killed server %s (both live units, CoreDNS) at %s", victim, stopped.Format(time.RFC3339Nano))
	var seen incompleteSeen
	fo := waitForMoveToSurvivor(ctx, t, run, before, survivor, serverLossBound, unreachableReason, &seen)
	building := waitForEveryUnitToBuild(ctx, t, run, run.DeepCopy(), "on the spares", &seen).Sub(stopped)
	t.Logf("server loss figures: failover observed %s after the stop, table published %s later; every live unit building on the spares %s after the stop (bound %s)",
		fo.ObservedTime.Sub(stopped).Round(time.Millisecond), fo.Duration.Duration, building.Round(time.Millisecond), serverLossBound)
	if detected := fo.ObservedTime.Sub(stopped); detected > detectionBound {
		t.Errorf("the failover was decided %s after the server was lost, want under %s", detected.Round(time.Millisecond), detectionBound)
	}
	if building > serverLossBound {
		t.Errorf("events flowed again %s after the server was lost, want under %s", building.Round(time.Millisecond), serverLossBound)
	}
	// Every unit of the set was lost: the spares go on from the table's
	// resumeEvent, never from event 0 again.
	for _, u := range run.Status.Units {
		if u.NextEvent < position {
			t.Errorf("rank %d on the spares at event %d, before %d where the lost set was: event ids built twice", u.Rank, u.NextEvent, position)
		}
	}

	// Back: once its node was marked NotReady (a server gone for good, as
	// far as the cluster knows), it is started again. Its endpoints
	// become warm spares again.
	waitFor(ctx, t, "the victim's node NotReady", 3*time.Minute, func() (bool, string) {
		ready, why := nodeReady(ctx, victim)
		return !ready, why
	})
	restarted := time.Now()
	// Its routes and forwarding went with the node's network namespace:
	// the cluster's pod network (flannel, cluster/podnet.yaml) restores them,
	// or the spares could never stand by.
	docker(t, "start", victim)
	waitFor(ctx, t, "the victim's endpoints warm spares again", 4*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		return run.Status.SparesLeft == 2 && standingSpares(run, victim) == 2, describeFailover(run)
	})
	t.Logf("server back: its endpoints stand by as spares %s after it was started: %s", time.Since(restarted).Round(time.Millisecond), describeFailover(run))
	if run.Status.Phase != ebv1alpha1.PhaseRunning {
		t.Errorf("phase %s after the server came back, want Running: %s", run.Status.Phase, describeFailover(run))
	}
	removeRunAndFabric(ctx, t, key, fabricName)
}

// unreachableReason is the failure reason of a unit whose builder
// stopped answering the operator's polls (runplan.ReasonUnreachable).
const unreachableReason = "Unreachable"

// liveOn counts the run's live ranks on node.
func liveOn(run *ebv1alpha1.EventBuilderRun, node string) int {
	n := 0
	for _, rk := range run.Status.Ranks {
		if rk.Role == ebv1alpha1.RoleLive && rk.Node == node {
			n++
		}
	}
	return n
}

// standingSpares counts the run's spare ranks on node whose builder stands by.
func standingSpares(run *ebv1alpha1.EventBuilderRun, node string) int {
	n := 0
	for _, rk := range run.Status.Ranks {
		if rk.Role == ebv1alpha1.RoleSpare && rk.Node == node && rk.State == "RUNNING" {
			n++
		}
	}
	return n
}

// leaderNode is the node the leading operator's pod runs on.
func leaderNode(ctx context.Context, t *testing.T) string {
	t.Helper()
	var pod *corev1.Pod
	waitFor(ctx, t, "an operator pod leading", 2*time.Minute, func() (bool, string) {
		var err error
		if pod, err = leaderPod(ctx); err != nil {
			return false, err.Error()
		}
		return pod != nil, "no leader"
	})
	return pod.Spec.NodeName
}

// nodeReady says whether node's Ready condition is True, and what it is.
func nodeReady(ctx context.Context, name string) (bool, string) {
	var node corev1.Node
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
		return false, err.Error()
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, fmt.Sprintf("Ready=%s (%s)", c.Status, c.Reason)
		}
	}
	return false, "no Ready condition"
}

// placeCoreDNS puts every CoreDNS replica on the nodes selector picks (nil:
// anywhere again) and waits for the rollout.
func placeCoreDNS(ctx context.Context, t *testing.T, selector map[string]string) {
	t.Helper()
	var dns appsv1.Deployment
	key := client.ObjectKey{Namespace: "kube-system", Name: "coredns"}
	if err := k8sClient.Get(ctx, key, &dns); err != nil {
		t.Fatalf("CoreDNS: %v", err)
	}
	patch := client.MergeFrom(dns.DeepCopy())
	dns.Spec.Template.Spec.NodeSelector = selector
	if err := k8sClient.Patch(ctx, &dns, patch); err != nil {
		t.Fatalf("place CoreDNS on %v: %v", selector, err)
	}
	waitFor(ctx, t, fmt.Sprintf("CoreDNS rolled out on %v", selector), 3*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, &dns); err != nil {
			return false, err.Error()
		}
		st := dns.Status
		want := *dns.Spec.Replicas
		return st.ObservedGeneration == dns.Generation && st.UpdatedReplicas == want && st.AvailableReplicas == want && st.Replicas == want,
			fmt.Sprintf("replicas %d updated %d available %d", st.Replicas, st.UpdatedReplicas, st.AvailableReplicas)
	})
}

// docker runs a docker command on a kind node's container; start brings a
// stopped or killed node back as a server reboots (startNode).
func docker(t *testing.T, verb, node string) {
	t.Helper()
	if verb == "start" {
		startNode(t, node)
		return
	}
	dockerRun(t, verb, node)
}

func dockerRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// startNode starts a stopped kind node with its data NIC as cluster/up.sh
// gave it: connected once kind's entrypoint is past. The entrypoint takes the
// node's address from the first of its hostname's lines in /etc/hosts and,
// when that differs from the last boot's, rewrites the kubelet's and the
// kubeconfigs' addresses to it. Docker lists a container's networks in no
// fixed order on a start: with the data network connected, the soak's
// restarted worker took its data address and never registered again.
//
// The entrypoint is past once it has exec'd init: PID 1 is systemd. (Its
// last line, "INFO: starting init", went missing from docker logs once in
// CI, and the node was left without its data NIC.) The NIC is connected
// whatever happens, so that one failed start does not take the next
// test's pod network too.
func startNode(t *testing.T, node string) {
	t.Helper()
	dataNetwork := clusterName + "-data"
	dockerRun(t, "network", "disconnect", dataNetwork, node)
	defer func() {
		if out, err := exec.Command("docker", "network", "connect", dataNetwork, node).CombinedOutput(); err != nil {
			t.Errorf("docker network connect %s %s: %v\n%s", dataNetwork, node, err, out)
		}
	}()
	dockerRun(t, "start", node)
	deadline := time.Now().Add(2 * time.Minute)
	pid1 := ""
	for time.Now().Before(deadline) {
		out, err := exec.Command("docker", "exec", node, "cat", "/proc/1/comm").CombinedOutput()
		if pid1 = strings.TrimSpace(string(out)); err == nil && pid1 == "systemd" {
			return
		}
		time.Sleep(200 * time.Millisecond) // between two looks at PID 1
	}
	logs, _ := exec.Command("docker", "logs", "--tail", "40", node).CombinedOutput()
	t.Fatalf("node %s: kind's entrypoint did not exec init within 2m of docker start (PID 1 is %q); its last lines:\n%s", node, pid1, logs)
}

// victimAndSurvivor are the two kind workers, the victim one the leading
// operator does not run on (the standby may; losing the leader with the
// server is TestLosingTheLeadingOperatorsServer).
func victimAndSurvivor(ctx context.Context, t *testing.T) (victim, survivor string) {
	t.Helper()
	workers := workerNodes(ctx, t)
	if len(workers) < 2 {
		t.Fatalf("need 2 worker nodes, found %v", workers)
	}
	victim, survivor = workers[0], workers[1]
	if leaderNode(ctx, t) == victim {
		victim, survivor = survivor, victim
	}
	return victim, survivor
}

// runOnTwoServers creates, afresh, a Fabric of the two workers and a run
// of 2 units with 2 spares on it, and waits until it builds with both
// live units on the victim and both spares standing by on the survivor.
func runOnTwoServers(ctx context.Context, t *testing.T, key client.ObjectKey, fabricName, victim, survivor string) *ebv1alpha1.EventBuilderRun {
	t.Helper()
	ensureNamespace(ctx, t, key.Namespace)
	removeRunAndFabric(ctx, t, key, fabricName)
	// The victim's NUMA halves on ports 0 and 1, where the planner puts
	// the live units; the survivor's on 2 and 3, the spares.
	if err := k8sClient.Create(ctx, workerFabric(fabricName, []string{victim, survivor})); err != nil {
		t.Fatalf("create fabric: %v", err)
	}
	run := &ebv1alpha1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace},
		Spec: ebv1alpha1.EventBuilderRunSpec{
			FabricRef: &ebv1alpha1.FabricReference{Name: fabricName}, Units: 2, Spares: 2,
			Builder: ebv1alpha1.BuilderSpec{Image: env.builderImage, ImagePullPolicy: corev1.PullIfNotPresent},
		},
	}
	if err := k8sClient.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	waitFor(ctx, t, "Running on the victim with 2 spares standing by on the survivor", 6*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		return run.Status.Phase == ebv1alpha1.PhaseRunning && run.Status.EventsBuilt > 0 && standingSpares(run, survivor) == 2 &&
			liveOn(run, victim) == 2, describeFailover(run)
	})
	return run
}

// waitForMoveToSurvivor waits, up to bound, for a failover past before's
// epoch that put both live units on the survivor's spares, and checks that
// each move went to a spare for reason.
func waitForMoveToSurvivor(ctx context.Context, t *testing.T, run, before *ebv1alpha1.EventBuilderRun, survivor string,
	bound time.Duration, reason string, seen *incompleteSeen) *ebv1alpha1.FailoverStatus {
	t.Helper()
	key := client.ObjectKeyFromObject(run)
	waitFor(ctx, t, "both units moved to the survivor's spares, reason "+reason, bound, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		seen.note(run)
		fo := run.Status.LastFailover
		return fo != nil && run.Status.Epoch > before.Status.Epoch && len(fo.Moves) > 0 && liveOn(run, survivor) == 2, describeFailover(run)
	})
	fo := run.Status.LastFailover
	for _, m := range fo.Moves {
		if m.SpareRank == nil || m.Reason != reason {
			t.Errorf("move %+v: want a spare, reason %s", m, reason)
		}
	}
	return fo
}
