package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// The production data flow on the kind workers' Fabric: each unit's pod
// runs a readout driver (eb-readout-emulator, standing in for the cards'
// driver) that writes MFPs into a shared-memory ring, the builder that
// reads it and writes MEPs into another, and a consumer container
// (eb-consumer, standing in for the HLT) that checks every event byte for
// byte and publishes its counts, which reach the run's status. The
// readout-card device plugin (the chart's, with emulated cards:
// readout/chart-values.yaml) advertises each NUMA node's streams, and each
// driver is allocated exactly its endpoint's. A unit is lost and moves to a
// warm spare with fibres of its own, whose driver and consumer follow the
// new epoch. Readout is physical: the lost server's streams are read by no
// one from then on, and every MEP says so (its stream map): under
// incompleteEvents Flag each consumer counts, per stream, the events after
// the failover as lacking the victim's streams and holding the spare's,
// and flags them. At the end every event built was consumed: complete
// before the failover, flagged after it.
func TestProductionRunReadsADriverAndFeedsAConsumer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	const (
		namespaceName = "e2e-production"
		fabricName    = "e2e-production"
		runName       = "production"
	)
	run, fabric, _ := startProductionRun(ctx, t, namespaceName, fabricName, runName, []int{0, 1}, func(r *ebv1alpha1.EventBuilderRun) {
		r.Spec.Builder.IncompleteEvents = ebv1alpha1.IncompleteFlag
	})
	key := client.ObjectKeyFromObject(run)
	get := func() error { return k8sClient.Get(ctx, key, run) }
	// Every pod, live or spare, runs the three containers, and its driver
	// was allocated exactly its endpoint's streams.
	for _, rk := range run.Status.Ranks {
		if rk.Pod == "" {
			continue
		}
		pod := builderPod(ctx, t, namespaceName, rk.Pod)
		if len(pod.Spec.InitContainers) != 1 || len(pod.Spec.Containers) != 2 {
			t.Fatalf("pod %s has %d init and %d containers, want the driver sidecar, the builder and the consumer",
				pod.Name, len(pod.Spec.InitContainers), len(pod.Spec.Containers))
		}
		i := slices.IndexFunc(fabric.Spec.Endpoints, func(ep ebv1alpha1.FabricEndpoint) bool { return ep.Name == rk.Endpoint })
		want := strings.Join(fabric.Spec.Endpoints[i].Streams, ",")
		got := podExec(ctx, t, namespaceName, rk.Pod, "readout-driver", "printenv", "EB_READOUT_STREAMS")
		emulated := podExec(ctx, t, namespaceName, rk.Pod, "readout-driver", "printenv", "EB_READOUT_EMULATED")
		if got != want || emulated != "true" {
			t.Errorf("rank %d on %s: its driver was allocated streams %q (emulated %q), want its endpoint's %q", rk.Rank, rk.Endpoint, got, emulated, want)
		}
		if env := podExec(ctx, t, namespaceName, rk.Pod, "builder", "sh", "-c", "echo ${EB_READOUT_STREAMS:-none}"); env != "none" {
			t.Errorf("rank %d: the builder container was given streams %q too", rk.Rank, env)
		}
	}

	// Lose the lowest live unit: its rank moves to a spare, whose ring the
	// driver has been filling since the start and whose consumer has never
	// seen a MEP.
	before := run.DeepCopy()
	var victim *ebv1alpha1.RankStatus
	for i, rk := range before.Status.Ranks {
		if rk.Role == ebv1alpha1.RoleLive && victim == nil {
			victim = &before.Status.Ranks[i]
		}
	}
	t.Logf("failing rank %d: deleting pod %s", victim.Rank, victim.Pod)
	deleteBuilderPod(ctx, t, builderPod(ctx, t, namespaceName, victim.Pod))
	var seen incompleteSeen
	// Readout is physical: the victim's streams are fibres into its
	// server's cards, unread once its unit is on the spare, which reads its
	// own. The run builds on, Degraded, naming them.
	waitForNewEpoch(ctx, t, run, before, 2, ebv1alpha1.PhaseDegraded, "a failover to a spare", &seen)
	spare := *run.Status.LastFailover.Moves[0].SpareRank
	ready := meta.FindStatusCondition(run.Status.Conditions, ebv1alpha1.ConditionReady)
	victimStreams := endpointStreams(fabric, victim.Endpoint)
	if ready == nil || ready.Reason != ebv1alpha1.ReasonStreamsUnread || !strings.Contains(ready.Message, "streams "+strings.Join(victimStreams, ",")) {
		t.Errorf("after the failover, Ready %+v: want reason StreamsUnread naming the victim's streams %v", ready, victimStreams)
	}
	t.Logf("after the failover: %s: %s", ready.Reason, ready.Message)
	if doc := readRankTable(ctx, t, namespaceName, runName); !slices.Equal(doc.UnreadStreams, victimStreams) {
		t.Errorf("the rank table's unreadStreams %v, want the victim's %v", doc.UnreadStreams, victimStreams)
	}
	spareStreams := endpointStreams(fabric, run.Status.Ranks[spare].Endpoint)
	if len(spareStreams) == 0 {
		t.Fatalf("spare rank %d (%s) has no streams in the Fabric: this test needs a spare with fibres", spare, run.Status.Ranks[spare].Endpoint)
	}

	// Every live unit's consumer, the spare's included, counts events that
	// lack the victim's streams and hold the spare's: flagged, none rejected.
	var live []ebv1alpha1.RankStatus
	for _, rk := range run.Status.Ranks {
		if rk.Role == ebv1alpha1.RoleLive {
			live = append(live, rk)
		}
	}
	for _, rk := range live {
		waitFor(ctx, t, fmt.Sprintf("rank %d's consumer counting events without %v and with %v", rk.Rank, victimStreams, spareStreams),
			3*time.Minute, func() (bool, string) {
				counts := consumerStreamCounts(ctx, t, namespaceName, rk)
				for _, s := range victimStreams {
					if counts[s].lacked == 0 {
						return false, fmt.Sprintf("per stream %v", counts)
					}
				}
				for _, s := range spareStreams {
					if counts[s].held == 0 {
						return false, fmt.Sprintf("per stream %v", counts)
					}
				}
				return true, fmt.Sprintf("per stream %v", counts)
			})
		t.Logf("rank %d's consumer, events per stream {held lacked}: %v", rk.Rank, consumerStreamCounts(ctx, t, namespaceName, rk))
	}

	// Stopped, the counts are final once each consumer has emptied its ring.
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
	if c := run.Status.Consumed; c.Rejected != 0 || c.EventsIncomplete == 0 || c.EventsComplete == 0 {
		t.Errorf("consumed %d complete and %d incomplete events, rejected %d: want complete ones before the failover, "+
			"flagged ones after it, none rejected: %s", c.EventsComplete, c.EventsIncomplete, c.Rejected, describeProduction(run))
	}
	for _, u := range run.Status.Units {
		if c := u.Consumer; c == nil || c.EventsComplete != u.EventsBuilt || c.MEPs*1000 != c.EventsComplete+c.EventsIncomplete {
			t.Errorf("rank %d built %d events, its consumer %+v: want every one consumed", u.Rank, u.EventsBuilt, u.Consumer)
		}
	}
}

// endpointStreams are the readout streams the Fabric lists on an endpoint.
func endpointStreams(fabric *ebv1alpha1.Fabric, endpoint string) []string {
	i := slices.IndexFunc(fabric.Spec.Endpoints, func(ep ebv1alpha1.FabricEndpoint) bool { return ep.Name == endpoint })
	if i < 0 {
		return nil
	}
	return fabric.Spec.Endpoints[i].Streams
}

// streamCount is what a consumer found of one readout stream: events that
// held its fragment intact, and events that lacked it.
type streamCount struct{ held, lacked uint64 }

// consumerStreamCounts reads the per-stream counts the consumer of a rank's
// pod publishes beside its MEP ring, EB_MEP_RING (builder/docs/formats.md,
// -mep-consumer-streams): empty until it has published some.
func consumerStreamCounts(ctx context.Context, t *testing.T, namespace string, rk ebv1alpha1.RankStatus) map[string]streamCount {
	t.Helper()
	text := podExec(ctx, t, namespace, rk.Pod, "consumer", "sh", "-c",
		`cat "/dev/shm${EB_MEP_RING}-consumer-streams" 2>/dev/null || true`)
	counts := map[string]streamCount{}
	for _, line := range strings.Split(text, "\n") {
		var name string
		var c streamCount
		if n, _ := fmt.Sscanf(line, "%s held %d lacked %d", &name, &c.held, &c.lacked); n == 3 {
			counts[name] = c
		}
	}
	return counts
}

// startProductionRun creates, on the first two workers, a Fabric whose
// servers at indexes `reading` have fibres (readoutFabric) and the
// production run on it (productionRun, changed by edit if given), both
// removed when the test ends, and waits until the run is Running. It
// returns them and the workers.
func startProductionRun(ctx context.Context, t *testing.T, namespace, fabricName, runName string, reading []int,
	edit func(*ebv1alpha1.EventBuilderRun)) (*ebv1alpha1.EventBuilderRun, *ebv1alpha1.Fabric, []string) {
	t.Helper()
	workers := workerNodes(ctx, t)
	if len(workers) < 2 {
		t.Fatalf("need 2 worker nodes for a Fabric of two servers, found %v", workers)
	}
	ensureNamespace(ctx, t, namespace)
	key := client.ObjectKey{Namespace: namespace, Name: runName}
	removeRunAndFabric(ctx, t, key, fabricName)
	fabric := readoutFabric(fabricName, workers[:2], reading...)
	waitForReadoutCards(ctx, t, workers[:2])
	if err := k8sClient.Create(ctx, fabric); err != nil {
		t.Fatalf("create fabric: %v", err)
	}
	run := productionRun(namespace, runName, fabricName)
	if edit != nil {
		edit(run)
	}
	if err := k8sClient.Create(ctx, run); err != nil {
		t.Fatalf("create run: %v", err)
	}
	removeAfter(t, key, fabricName)
	waitForProductionRunning(ctx, t, run)
	return run, fabric, workers
}

// readoutFabric is workerFabric with readout streams on the endpoints of
// the workers at indexes `reading`, cabled as readout/chart-values.yaml
// says the emulated cards are: w<i+1>-velo0,1 on NUMA 0, -ut0,1 on NUMA 1.
// The other workers' endpoints have no fibres (a farm's spare servers).
func readoutFabric(name string, workers []string, reading ...int) *ebv1alpha1.Fabric {
	fabric := workerFabric(name, workers)
	streams := map[int32][]string{0: {"velo0", "velo1"}, 1: {"ut0", "ut1"}}
	for i := range fabric.Spec.Endpoints {
		ep := &fabric.Spec.Endpoints[i]
		if !slices.Contains(reading, i/2) {
			continue
		}
		for _, s := range streams[ep.NUMA] {
			ep.Streams = append(ep.Streams, fmt.Sprintf("w%d-%s", i/2+1, s))
		}
	}
	return fabric
}

// waitForReadoutCards waits until the readout device plugin offers 2
// streams per NUMA node on each of the workers.
func waitForReadoutCards(ctx context.Context, t *testing.T, workers []string) {
	t.Helper()
	waitFor(ctx, t, "the readout device plugin to offer 2 streams per NUMA node on the workers", 2*time.Minute, func() (bool, string) {
		var offered []string
		for _, w := range workers {
			var node corev1.Node
			if err := k8sClient.Get(ctx, client.ObjectKey{Name: w}, &node); err != nil {
				return false, err.Error()
			}
			for _, numa := range []string{"0", "1"} {
				q := node.Status.Allocatable[corev1.ResourceName("daq.io/tell40-numa"+numa)]
				offered = append(offered, fmt.Sprintf("%s/numa%s=%s", w, numa, q.String()))
				if q.Value() != 2 {
					return false, strings.Join(offered, " ")
				}
			}
		}
		return true, strings.Join(offered, " ")
	})
}

// productionRun is a run of 2 units and 2 spares on the Fabric with the
// production data flow: a readout driver and a consumer beside every
// builder, each unit's driver given its endpoint's emulated cards.
func productionRun(namespace, name, fabric string) *ebv1alpha1.EventBuilderRun {
	side := func(tool string, memory string) ebv1alpha1.SideContainer {
		return ebv1alpha1.SideContainer{
			Image: env.builderImage, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{tool}, Args: []string{"--fragment-size", "128"},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}},
		}
	}
	return &ebv1alpha1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: ebv1alpha1.EventBuilderRunSpec{
			FabricRef:     &ebv1alpha1.FabricReference{Name: fabric},
			Units:         2,
			Spares:        2,
			FailurePolicy: ebv1alpha1.FailureRunDegraded,
			Builder: ebv1alpha1.BuilderSpec{
				Image:           env.builderImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				PackingFactor:   1000,
				Source:          &ebv1alpha1.SourceSpec{Shm: &ebv1alpha1.ShmSource{RingMiB: 8, Driver: side("eb-readout-emulator", "64Mi")}},
				Output:          &ebv1alpha1.OutputSpec{Shm: &ebv1alpha1.ShmOutput{RingMiB: 8, Consumer: side("eb-consumer", "32Mi")}},
			},
			Resources: ebv1alpha1.UnitResources{Readout: &ebv1alpha1.ReadoutResource{Resource: "daq.io/tell40-numa{numa}", Count: 1}},
		},
	}
}

// waitForProductionRunning waits until the run is Running with 2 spares
// standing by and every live unit's consumer checking events.
func waitForProductionRunning(ctx context.Context, t *testing.T, run *ebv1alpha1.EventBuilderRun) {
	t.Helper()
	key := client.ObjectKeyFromObject(run)
	waitFor(ctx, t, "phase Running, 2 spares standing by, every live unit's consumer checking events", 6*time.Minute, func() (bool, string) {
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		standing := 0
		for _, rk := range run.Status.Ranks {
			if rk.Role == ebv1alpha1.RoleSpare && rk.State == "RUNNING" {
				standing++
			}
		}
		consuming := 0
		for _, u := range run.Status.Units {
			if u.Consumer != nil && u.Consumer.EventsComplete > 0 {
				consuming++
			}
		}
		return run.Status.Phase == ebv1alpha1.PhaseRunning && standing == 2 && consuming == 2, describeProduction(run)
	})
	t.Logf("running: %s", describeProduction(run))
}

// podExec runs a command in a container of a pod and returns its output, trimmed.
func podExec(ctx context.Context, t *testing.T, namespace, pod, container string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, env.kubectl, append([]string{"--kubeconfig", env.kubeconfig, "-n", namespace, "exec", pod,
		"-c", container, "--"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("exec %v in %s/%s: %v: %s", args, pod, container, err, out)
	}
	return strings.TrimSpace(string(out))
}

func describeProduction(run *ebv1alpha1.EventBuilderRun) string {
	var units []string
	for _, u := range run.Status.Units {
		consumer := "none"
		if c := u.Consumer; c != nil {
			consumer = fmt.Sprintf("%d MEPs %d/%d/%d", c.MEPs, c.EventsComplete, c.EventsIncomplete, c.Rejected)
		}
		units = append(units, fmt.Sprintf("rank %d %s epoch %d built %d consumer %s", u.Rank, u.State, u.Epoch, u.EventsBuilt, consumer))
	}
	consumed := "none"
	if c := run.Status.Consumed; c != nil {
		consumed = fmt.Sprintf("%d complete, %d incomplete, %d rejected", c.EventsComplete, c.EventsIncomplete, c.Rejected)
	}
	return fmt.Sprintf("phase %s epoch %d built %d incomplete %d consumed %s; units [%s]; %s", run.Status.Phase, run.Status.Epoch,
		run.Status.EventsBuilt, run.Status.EventsIncomplete, consumed, strings.Join(units, "; "), describeFailover(run))
}
