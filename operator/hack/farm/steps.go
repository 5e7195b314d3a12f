package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/ranktable"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// serverResources is what a simulated event-builder server offers: two
// sockets of 64 cores (128 CPUs), 512 GiB, 1 GiB huge pages, each NUMA
// node's HCA through the RDMA shared device plugin and its readout card's
// streams through the readout device plugin.
func serverResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("128"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		"hugepages-1Gi": resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110"),
		"rdma/hca_numa0": resource.MustParse("1000"), "rdma/hca_numa1": resource.MustParse("1000"),
		"daq.io/tell40-numa0": resource.MustParse("3"), "daq.io/tell40-numa1": resource.MustParse("3"),
	}
}

// podCIDR is server i's pod CIDR: 127.20.0.0/24 onwards, all of it
// answered by the loopback device.
func podCIDR(i int) string { return fmt.Sprintf("127.%d.%d.0/24", 20+i/256, i%256) }

// setUp creates the namespace, the servers' Nodes (KWOK makes them
// Ready) and the Fabric, and waits for every node to be Ready.
func (f *farmBench) setUp() error {
	ctx := f.ctx
	if err := f.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	f.fabric, f.nodes = f.shape.Fabric(fabricName)
	for _, ep := range f.fabric.Spec.Endpoints {
		f.leafOf[ep.Node] = int(ep.Leaf)
	}
	for i, name := range f.nodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{simulatedLabel: "true", corev1.LabelHostname: name}},
			Spec:       corev1.NodeSpec{PodCIDR: podCIDR(i), PodCIDRs: []string{podCIDR(i)}},
			// A kubelet registers its node with its capacity, as here.
			Status: corev1.NodeStatus{Capacity: serverResources(), Allocatable: serverResources()},
		}
		if err := f.c.Create(ctx, node); err != nil {
			return err
		}
	}
	if err := f.c.Create(ctx, f.fabric); err != nil {
		return err
	}
	return f.waitFor("every node Ready and untainted", time.Minute, func() (bool, error) { return f.nodesReady(f.nodes) })
}

// nodesReady: every named node is Ready, schedulable and untainted.
func (f *farmBench) nodesReady(names []string) (bool, error) {
	var nodes corev1.NodeList
	if err := f.c.List(f.ctx, &nodes); err != nil {
		return false, err
	}
	ready := map[string]bool{}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			// Untainted too: the node lifecycle controller takes a new
			// node's not-ready taint off a few seconds after it is Ready.
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !n.Spec.Unschedulable && len(n.Spec.Taints) == 0 {
				ready[n.Name] = true
			}
		}
	}
	for _, name := range names {
		if !ready[name] {
			return false, nil
		}
	}
	return true, nil
}

// waitFor polls check (the API server or the emulation, every 20 ms) until
// it holds, an error, a component exits, or timeout.
func (f *farmBench) waitFor(what string, timeout time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := check()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if err := f.healthy(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond) // polling, not synchronising
	}
}

// healthy is an error once a component has exited or the builders failed.
func (f *farmBench) healthy() error {
	if err := f.cp.check(); err != nil {
		return err
	}
	if f.op != nil {
		if err := f.op.check(); err != nil {
			return err
		}
	}
	if f.b != nil {
		return f.b.err()
	}
	return nil
}

// newRun is a production-like run: every endpoint of the fabric, verbs,
// pinned Guaranteed units with huge pages, the NUMA node's HCA and
// readout card.
func (f *farmBench) newRun(name string) *ebv1.EventBuilderRun {
	memory, hugepages := resource.MustParse("32Gi"), resource.MustParse("16Gi")
	return &ebv1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: ebv1.EventBuilderRunSpec{
			Units: f.units, Spares: f.spares, FabricRef: &ebv1.FabricReference{Name: fabricName},
			// Incomplete events flagged, not dropped: a failover leaves a
			// lost server's readout streams unread, and what the
			// benchmark counts as dropped is then only what a move lost.
			Builder: ebv1.BuilderSpec{Image: "eventbuilder/builder:farm", Transport: ebv1.TransportVerbs,
				IncompleteEvents: ebv1.IncompleteFlag},
			Resources: ebv1.UnitResources{
				CPUs: 16, Memory: &memory, Hugepages: &ebv1.Hugepages{PageSize: "1Gi", Size: hugepages},
				RDMA: "rdma/hca_numa{numa}", Readout: &ebv1.ReadoutResource{Resource: "daq.io/tell40-numa{numa}"},
			},
		},
	}
}

// apply creates a run and measures it to every pod scheduled (by
// kube-scheduler) and to phase Running with every live builder started.
func (f *farmBench) apply(name string) error {
	pods := int(f.units + f.spares)
	start := time.Now()
	if err := f.c.Create(f.ctx, f.newRun(name)); err != nil {
		return err
	}
	if err := f.waitFor(fmt.Sprintf("%d pods of %s scheduled", pods, name), deadlineRunning, func() (bool, error) {
		n, _ := f.b.scheduledPods(name)
		return n >= pods, nil
	}); err != nil {
		return fmt.Errorf("%w; %s", err, f.describe(name))
	}
	_, scheduled := f.b.scheduledPods(name)
	_, created := f.b.createdPods(name)
	if err := f.checkPlacement(name); err != nil {
		return err
	}
	if err := f.waitFor(name+" Running with every live builder started", deadlineRunning, func() (bool, error) {
		ok, err := f.settled(name)
		return ok && f.b.running() >= int(f.units), err
	}); err != nil {
		return fmt.Errorf("%w; %s", err, f.describe(name))
	}
	running := time.Now()
	if failed, first := f.schedulingFailures(name); failed > 0 {
		logf("%s: kube-scheduler reported %d FailedScheduling events, the first: %s", name, failed, first)
	}
	f.appliedScheduled = append(f.appliedScheduled, scheduled.Sub(start))
	f.appliedRunning = append(f.appliedRunning, running.Sub(start))
	benchLine("apply_to_created_"+name, created.Sub(start).Seconds(), "s")
	benchLine("apply_to_scheduled_"+name, scheduled.Sub(start).Seconds(), "s")
	benchLine("apply_to_running_"+name, running.Sub(start).Seconds(), "s")
	logf("%s: %d pods created by the operator in %v, scheduled by kube-scheduler in %v, Running in %v", name, pods,
		created.Sub(start).Round(time.Millisecond), scheduled.Sub(start).Round(time.Millisecond), running.Sub(start).Round(time.Millisecond))
	return nil
}

// describe says where a run stands, for an error: its phase and
// conditions, its pods by phase, and the recent Warning events.
func (f *farmBench) describe(name string) string {
	var out []string
	run := &ebv1.EventBuilderRun{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: namespace, Name: name}, run); err == nil {
		out = append(out, fmt.Sprintf("run phase %q", run.Status.Phase))
		for _, c := range run.Status.Conditions {
			out = append(out, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	var pods corev1.PodList
	if err := f.c.List(f.ctx, &pods, client.InNamespace(namespace)); err == nil {
		phases := map[string]int{}
		for _, p := range pods.Items {
			key := string(p.Status.Phase)
			if p.Spec.NodeName == "" {
				key += " unscheduled"
			}
			phases[key]++
		}
		out = append(out, fmt.Sprintf("pods %v", phases))
	}
	var events corev1.EventList
	if err := f.c.List(f.ctx, &events, client.InNamespace(namespace)); err == nil {
		seen := map[string]bool{}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && !seen[e.Reason] && len(seen) < 5 {
				seen[e.Reason] = true
				out = append(out, fmt.Sprintf("event %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message))
			}
		}
	}
	return strings.Join(out, "; ")
}

// schedulingFailures counts the FailedScheduling events of a run's pods
// and gives the first message.
func (f *farmBench) schedulingFailures(run string) (int, string) {
	var events corev1.EventList
	if err := f.c.List(f.ctx, &events, client.InNamespace(namespace)); err != nil {
		return 0, err.Error()
	}
	n, first := 0, ""
	for _, e := range events.Items {
		if e.Reason == "FailedScheduling" && strings.HasPrefix(e.InvolvedObject.Name, run+"-") {
			n += int(max(e.Count, 1))
			if first == "" {
				first = e.InvolvedObject.Name + ": " + e.Message
			}
		}
	}
	return n, first
}

// checkPlacement: kube-scheduler put every pod on the node its endpoint's
// affinity names.
func (f *farmBench) checkPlacement(run string) error {
	var pods corev1.PodList
	if err := f.c.List(f.ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{builderpod.LabelRun: run}); err != nil {
		return err
	}
	for _, p := range pods.Items {
		if want := builderpod.Node(&p); p.Spec.NodeName != want {
			return fmt.Errorf("pod %s scheduled on %q, its endpoint is on %q", p.Name, p.Spec.NodeName, want)
		}
	}
	return nil
}

// settled: the run is Running (or Degraded: units lost with no spare) at
// its generation, its builders configured.
func (f *farmBench) settled(name string) (bool, error) {
	run := &ebv1.EventBuilderRun{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: namespace, Name: name}, run); err != nil {
		return false, err
	}
	p := run.Status.Phase
	return (p == ebv1.PhaseRunning || p == ebv1.PhaseDegraded) && run.Status.ObservedGeneration == run.Generation &&
		meta.IsStatusConditionTrue(run.Status.Conditions, ebv1.ConditionConfigured), nil
}

// steady watches the running set for o.steady: the operator's API
// requests (every replica's rest_client_requests_total), the leader's CPU
// and memory, the run's status size and the objects in etcd.
func (f *farmBench) steady(name string) error {
	ctx := f.ctx
	leader, err := f.op.leader(ctx)
	if err != nil {
		return err
	}
	requests := func() (float64, error) {
		total := 0.0
		for _, r := range f.op.replicas {
			m, err := f.op.metrics(ctx, r, "rest_client_requests_total")
			if err != nil {
				return 0, err
			}
			total += m["rest_client_requests_total"]
		}
		return total, nil
	}
	before, err := requests()
	if err != nil {
		return err
	}
	cpuBefore, _, err := usage(leader.proc.cmd.Process.Pid)
	if err != nil {
		return err
	}
	start := time.Now()
	logf("%s: watching the steady state for %v", name, f.o.steady)
	time.Sleep(f.o.steady) // the measurement window itself
	after, err := requests()
	if err != nil {
		return err
	}
	cpuAfter, rss, err := usage(leader.proc.cmd.Process.Pid)
	if err != nil {
		return err
	}
	window := time.Since(start)
	run := &ebv1.EventBuilderRun{}
	if err := f.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, run); err != nil {
		return err
	}
	status, err := json.Marshal(run.Status)
	if err != nil {
		return err
	}
	raw, err := f.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return err
	}
	objects, err := sumSamples(strings.NewReader(string(raw)), "apiserver_resource_objects", "apiserver_resource_size_estimate_bytes")
	if err != nil {
		return err
	}
	f.target("operator_api_requests_per_s", (after-before)/window.Seconds(), targetRequestRate, "1/s")
	benchLine("operator_leader_cpu", (cpuAfter-cpuBefore).Seconds()/window.Seconds(), "cores")
	f.target("operator_leader_rss", float64(rss)/(1<<20), targetRSS/(1<<20), "MiB")
	f.target("run_status_size", float64(len(status))/1024, targetStatusBytes/1024, "KiB")
	benchLine("etcd_objects", objects["apiserver_resource_objects"], "objects")
	benchLine("etcd_objects_size", objects["apiserver_resource_size_estimate_bytes"]/(1<<20), "MiB")
	return nil
}

// lose makes servers lost at one instant: their builders go silent and
// KWOK is told to turn their Nodes NotReady. It returns that instant and,
// once KWOK has written it, the longest wait for NotReady.
func (f *farmBench) lose(nodes []string) (time.Time, time.Duration, error) {
	lost := map[string]bool{}
	for _, n := range nodes {
		lost[n] = true
	}
	at := time.Now()
	f.b.silence(lost)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+lostLabel+`":"true"}}}`))
	for _, n := range nodes {
		if err := f.c.Patch(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, patch); err != nil {
			return at, 0, err
		}
	}
	var lag time.Duration
	err := f.waitFor("KWOK to turn the lost servers NotReady", 30*time.Second, func() (bool, error) {
		for _, n := range nodes {
			node := &corev1.Node{}
			if err := f.c.Get(f.ctx, client.ObjectKey{Name: n}, node); err != nil {
				return false, err
			}
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return false, nil
				}
			}
		}
		lag = time.Since(at)
		return true, nil
	})
	return at, lag, err
}

// onNoneOf: no live rank of doc runs on these nodes.
func onNoneOf(nodes []string) func(ranktable.Document) bool {
	return func(doc ranktable.Document) bool {
		for _, r := range doc.Ranks {
			if r.State == ranktable.Live && slices.Contains(nodes, r.Node) {
				return false
			}
		}
		return true
	}
}

// failedOver waits for the run's first table after `after` in which no
// live rank is on nodes, and for every live builder to have accepted it.
func (f *farmBench) failedOver(run string, after int64, nodes []string) (ranktable.Document, time.Time, error) {
	doc, err := f.b.tableWhere(run, after, deadlineFailover, onNoneOf(nodes))
	if err != nil {
		return doc, time.Time{}, err
	}
	done, err := f.b.configured(doc, deadlineFailover)
	return doc, done, err
}

// loseServer loses a server running live units on the i-th leaf and
// measures from that instant to every live builder on the new epoch.
func (f *farmBench) loseServer(run string, i int) (time.Duration, error) {
	doc, ok := f.b.latestTable(run)
	if !ok {
		return 0, fmt.Errorf("%s: no rank table", run)
	}
	node := ""
	for _, r := range doc.Ranks {
		if r.State == ranktable.Live && r.Leaf != nil && *r.Leaf == i%len(f.shape.ServersPerLeaf) && r.Node != "" {
			node = r.Node
			break
		}
	}
	if node == "" {
		return 0, fmt.Errorf("%s: no live unit on leaf %d", run, i)
	}
	at, lag, err := f.lose([]string{node})
	if err != nil {
		return 0, err
	}
	next, done, err := f.failedOver(run, doc.Epoch, []string{node})
	if err != nil {
		return 0, err
	}
	logf("%s: server %s lost: epoch %d on every live builder %v after (KWOK NotReady after %v)", run, node, next.Epoch,
		done.Sub(at).Round(time.Millisecond), lag.Round(time.Millisecond))
	return done.Sub(at), f.waitFor(run+" settled after the loss", deadlineFailover, func() (bool, error) { return f.settled(run) })
}

// loseLeaf loses every server of the first leaf at once; spares must be
// taken on other leaves, and no phase's link may carry more flows than
// it has links.
func (f *farmBench) loseLeaf(run string) error {
	doc, ok := f.b.latestTable(run)
	if !ok {
		return fmt.Errorf("%s: no rank table", run)
	}
	const leaf = 0
	var nodes []string
	for _, n := range f.nodes {
		if f.leafOf[n] == leaf {
			nodes = append(nodes, n)
		}
	}
	at, lag, err := f.lose(nodes)
	if err != nil {
		return err
	}
	next, done, err := f.failedOver(run, doc.Epoch, nodes)
	if err != nil {
		return err
	}
	took := done.Sub(at)
	f.target("leaf_lost", took.Seconds(), targetLeafLost.Seconds(), "s")
	wasLive := map[string]bool{}
	for _, r := range doc.Ranks {
		if r.State == ranktable.Live {
			wasLive[r.Endpoint] = true
		}
	}
	moved := 0
	for _, r := range next.Ranks {
		if r.State != ranktable.Live || wasLive[r.Endpoint] {
			continue
		}
		moved++
		if r.Leaf == nil || *r.Leaf == leaf {
			return fmt.Errorf("leaf %d lost: spare %s taken on that leaf", leaf, r.Endpoint)
		}
	}
	violations, err := f.linkLoad(next)
	if err != nil {
		return err
	}
	if len(violations) > 0 {
		return fmt.Errorf("leaf %d lost: the new table overloads links: %v", leaf, violations)
	}
	benchLine("leaf_lost_units_moved", float64(moved), "units")
	logf("%s: leaf %d lost (%d servers): epoch %d on every live builder %v after (KWOK NotReady after %v); %d units on spares on other leaves, no link over capacity",
		run, leaf, len(nodes), next.Epoch, took.Round(time.Millisecond), lag.Round(time.Millisecond), moved)
	return f.waitFor(run+" settled after the leaf", deadlineFailover, func() (bool, error) { return f.settled(run) })
}

// linkLoad plays the table's schedule over the fabric's links.
func (f *farmBench) linkLoad(doc ranktable.Document) ([]planner.Violation, error) {
	t, err := doc.Table()
	if err != nil {
		return nil, err
	}
	all := runplan.Nodes{}
	for _, n := range f.nodes {
		all[n] = true
	}
	return planner.CheckLinkLoad(runplan.Fabric(&f.fabric.Spec, all), t)
}

// drain runs kubectl drain on a server with live units: the operator
// moves its units to spares and deletes their pods once the set has
// switched, while the run's PodDisruptionBudget refuses the evictions.
func (f *farmBench) drain(run string) error {
	doc, ok := f.b.latestTable(run)
	if !ok {
		return fmt.Errorf("%s: no rank table", run)
	}
	node := ""
	var pods []string
	for _, r := range doc.Ranks {
		if r.State == ranktable.Live && r.Leaf != nil && *r.Leaf == 1 && (node == "" || r.Node == node) {
			node = r.Node
			pods = append(pods, builderpod.PodName(run, int32(r.Rank)))
		}
	}
	before := &ebv1.EventBuilderRun{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: namespace, Name: run}, before); err != nil {
		return err
	}
	kubeconfig := filepath.Join(f.o.dir, "kubectl.kubeconfig")
	content, err := f.cp.env.KubeConfig("farm-admin", "system:masters")
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, content, 0o600); err != nil {
		return err
	}
	start := time.Now()
	cmd := exec.CommandContext(f.ctx, filepath.Join(f.o.assets, "kubectl"), "--kubeconfig", kubeconfig, "drain", node,
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout=2m")
	out, err := cmd.CombinedOutput()
	drained := time.Now()
	if err != nil {
		return fmt.Errorf("kubectl drain %s: %w\n%s", node, err, out)
	}
	next, done, err := f.failedOver(run, doc.Epoch, []string{node})
	if err != nil {
		return err
	}
	firstDeleted := f.b.firstDeletion(pods)
	if firstDeleted.IsZero() || firstDeleted.Before(done) {
		return fmt.Errorf("drain of %s: its pods were deleted (%v) before every live builder took epoch %d (%v)", node,
			firstDeleted.Sub(start), next.Epoch, done.Sub(start))
	}
	after := &ebv1.EventBuilderRun{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: namespace, Name: run}, after); err != nil {
		return err
	}
	benchLine("drain_units_moved", done.Sub(start).Seconds(), "s")
	benchLine("drain_completed", drained.Sub(start).Seconds(), "s")
	benchLine("drain_events_dropped", float64(after.Status.EventsDropped-before.Status.EventsDropped), "events")
	logf("%s: kubectl drain %s: its %d units on spares at epoch %d %v after the start, its pods deleted after that (%v), drain done in %v",
		run, node, len(pods), next.Epoch, done.Sub(start).Round(time.Millisecond), firstDeleted.Sub(start).Round(time.Millisecond),
		drained.Sub(start).Round(time.Millisecond))
	return f.waitFor(run+" settled after the drain", deadlineFailover, func() (bool, error) { return f.settled(run) })
}

// stopAndDelete stops the run (spec.state Stopped), deletes it, and brings
// the farm back: lost servers repaired (their Terminating pods removed,
// as an administrator does), drained ones uncordoned.
func (f *farmBench) stopAndDelete(name string) error {
	run := &ebv1.EventBuilderRun{}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	if err := f.c.Get(f.ctx, key, run); err != nil {
		return err
	}
	start := time.Now()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"state":"Stopped"}}`))
	if err := f.c.Patch(f.ctx, run, patch); err != nil {
		return err
	}
	if err := f.waitFor(name+" Stopped", deadlineRunning, func() (bool, error) {
		if err := f.c.Get(f.ctx, key, run); err != nil {
			return false, err
		}
		return run.Status.Phase == ebv1.PhaseStopped && run.Status.ObservedGeneration == run.Generation, nil
	}); err != nil {
		return err
	}
	stopped := time.Now()
	if err := f.c.Delete(f.ctx, run); err != nil {
		return err
	}
	if err := f.waitFor(name+" and its pods gone", deadlineCleanupRun, func() (bool, error) {
		err := f.c.Get(f.ctx, key, &ebv1.EventBuilderRun{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		var pods corev1.PodList
		if err := f.c.List(f.ctx, &pods, client.InNamespace(namespace)); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Annotations[lostAnnotation] == "" {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	deleted := time.Now()
	benchLine("stop_"+name, stopped.Sub(start).Seconds(), "s")
	benchLine("delete_"+name, deleted.Sub(stopped).Seconds(), "s")
	logf("%s: Stopped in %v, deleted with its pods in %v", name, stopped.Sub(start).Round(time.Millisecond), deleted.Sub(stopped).Round(time.Millisecond))
	return f.repair()
}

// repair force-deletes the pods left on lost servers, brings the servers
// back (KWOK makes them Ready) and uncordons drained ones.
func (f *farmBench) repair() error {
	var pods corev1.PodList
	if err := f.c.List(f.ctx, &pods, client.InNamespace(namespace)); err != nil {
		return err
	}
	for _, p := range pods.Items {
		if err := f.c.Delete(f.ctx, &p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	var nodes corev1.NodeList
	if err := f.c.List(f.ctx, &nodes); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		if n.Labels[lostLabel] == "" && !n.Spec.Unschedulable {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+lostLabel+`":null}},"spec":{"unschedulable":null}}`))
		if err := f.c.Patch(f.ctx, &n, patch); err != nil {
			return err
		}
	}
	return f.waitFor("the farm repaired (every node Ready, no pod left)", time.Minute, func() (bool, error) {
		ready, err := f.nodesReady(f.nodes)
		return ready && f.b.podsLeft() == 0, err
	})
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
