package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// drainBound is how long a drain of a server with two live units may take:
// the cordon moves them to the spares, and the drain waits on the run's
// PodDisruptionBudget meanwhile.
const drainBound = 60 * time.Second

// kubectl drain of the server running both live units of a run: the cordon
// moves them to the spares on the other worker by planned moves (reason
// NodeCordoned), one at a time so that the set's place in the event stream
// goes on (each a clean switch at a cycle boundary, the old pod building
// until then); the run's PodDisruptionBudget keeps the drain from evicting
// a builder meanwhile, and the drain completes once the operator has
// removed the run's pods there itself. Uncordoned, the server's
// endpoints stand by as spares again. Each step prints its time.
func TestDrainingAServerMovesItsUnitsFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	const (
		namespaceName = "e2e-drain"
		fabricName    = "e2e-drain"
		runName       = "drain"
	)
	victim, survivor := victimAndSurvivor(ctx, t)
	defer uncordon(t, victim)
	key := client.ObjectKey{Namespace: namespaceName, Name: runName}
	run := runOnTwoServers(ctx, t, key, fabricName, victim, survivor)
	before := run.DeepCopy()
	// The run's PodDisruptionBudget refuses to evict any of its builders:
	// a drain can only wait for the operator to move them.
	for _, rk := range run.Status.Ranks {
		if rk.Pod == "" {
			continue
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespaceName, Name: rk.Pod}}
		err := k8sClient.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{})
		if !apierrors.IsTooManyRequests(err) {
			t.Fatalf("evicting builder pod %s: %v, want 429 (refused by the run's PodDisruptionBudget)", rk.Pod, err)
		}
	}

	// Where the set is in the event stream before the drain.
	var position int64
	for _, u := range run.Status.Units {
		position = max(position, u.NextEvent)
	}
	started := time.Now()
	drain := exec.CommandContext(ctx, env.kubectl, "--kubeconfig", env.kubeconfig, "drain", victim,
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout", drainBound.String())
	drained := make(chan error, 1)
	var drainOut []byte
	go func() {
		var err error
		drainOut, err = drain.CombinedOutput()
		drained <- err
	}()
	var seen incompleteSeen
	fo := waitForMoveToSurvivor(ctx, t, run, before, survivor, drainBound, ebv1alpha1.EndpointNodeCordoned, &seen)
	if err := <-drained; err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", victim, err, drainOut)
	}
	drainTook := time.Since(started)
	t.Logf("kubectl drain said:\n%s", strings.TrimSpace(string(drainOut)))
	waitForEveryUnitToBuild(ctx, t, run, run.DeepCopy(), "on the spares after the drain", &seen)
	// Clean switches: one unit at a time, so the units that stayed carried
	// the set's place in the event stream to the spares, which went on from
	// there instead of building events 0, 1, ... again.
	if run.Status.Epoch != before.Status.Epoch+2 {
		t.Errorf("epoch %d after the drain, want %d: each unit moved by a table of its own", run.Status.Epoch, before.Status.Epoch+2)
	}
	for _, u := range run.Status.Units {
		if u.NextEvent < position || u.EventsDropped != 0 {
			t.Errorf("rank %d after the drain: next event %d, %d dropped; want at least %d (where the set was before), none dropped",
				u.Rank, u.NextEvent, u.EventsDropped, position)
		}
	}
	var pods corev1.PodList
	if err := k8sClient.List(ctx, &pods, client.InNamespace(namespaceName)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == victim && p.DeletionTimestamp.IsZero() {
			t.Errorf("pod %s still on the drained %s", p.Name, victim)
		}
	}
	t.Logf("drain figures: move observed %s after the drain began, table published %s later; kubectl drain done after %s (bound %s); building on the spares %s after the drain began",
		fo.ObservedTime.Sub(started).Round(time.Millisecond), fo.Duration.Duration, drainTook.Round(time.Millisecond), drainBound,
		time.Since(started).Round(time.Millisecond))

	uncordoned := time.Now()
	uncordon(t, victim)
	waitFor(ctx, t, "the drained server's endpoints warm spares again", 3*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		return run.Status.SparesLeft == 2 && standingSpares(run, victim) == 2, describeFailover(run)
	})
	t.Logf("uncordoned: its endpoints stand by as spares %s later: %s", time.Since(uncordoned).Round(time.Millisecond), describeFailover(run))
	removeRunAndFabric(ctx, t, key, fabricName)
}

// uncordon makes a node schedulable again.
func uncordon(t *testing.T, node string) {
	t.Helper()
	if out, err := exec.Command(env.kubectl, "--kubeconfig", env.kubeconfig, "uncordon", node).CombinedOutput(); err != nil {
		t.Errorf("kubectl uncordon %s: %v\n%s", node, err, out)
	}
}
