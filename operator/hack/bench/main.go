// Command bench is the operator's scale benchmark: the reconcilers in a
// manager against a real kube-apiserver and etcd (envtest), on the LHCb
// event-builder fabric with simulated nodes (Node objects with no kubelet
// behind them, named sim-ebNNN and labelled eventbuilder.daq.io/simulated).
// It prints BENCH lines on standard output; logs go to standard error.
//
// The fabric: 18 leaves, 10 spines, 20 server ports per leaf, 2 links per
// leaf-spine pair; the 163 LHCb servers plus 4 warm spare servers (on
// leaves 11-14), two NUMA endpoints each: 334 endpoints on the 360 ports.
// The run: 326 units and 8 spare endpoints (the 4 spare servers' worth),
// one pod each (spares run standby builders). There is no scheduler in
// envtest: the benchmark binds each pod to the node its affinity names
// (make bench-farm runs the real kube-scheduler). It also plays the
// kubelets: it marks each pod running as soon as it is created and starts
// an emulated builder for it (internal/builderemu: the control API's
// state machine, tokens and epochs, no data), reading the token from the
// run's Secret as the pod mounts it; a pod turns Ready once its builder
// is configured (the readiness probe's /readyz).
//
// Figures:
//   - pods_created_bound: from creating the run to all 334 pods created,
//     bound (target < 10 s);
//   - running: from creating the run to phase Running: every builder
//     configured with the table and started, every live pod Ready;
//   - failover_server (median and max over 4 server failures): from a
//     node's Ready=Unknown being written to the API server (its builders
//     die at the same moment) to the new rank table's epoch accepted by
//     configure on every live builder, survivors and spares that took
//     units over, none of them restarted (target < 2 s);
//   - failover_recorded: the operator's own status.lastFailover:
//     configuredDuration (observing the failure to every live builder
//     configured) and duration (to the table published).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/hack/accepted"
	"daq.io/eventbuilder/operator/hack/lhcb"
	"daq.io/eventbuilder/operator/internal/builderclient"
	"daq.io/eventbuilder/operator/internal/builderemu"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/controller"
	"daq.io/eventbuilder/operator/internal/ranktable"
	"daq.io/eventbuilder/operator/internal/runplan"
	"daq.io/eventbuilder/operator/internal/testenv"
)

const (
	units     = 326
	spares    = 8
	failovers = 4
	namespace = "bench"
	runName   = "lhcb"
	// statusWindow is how long the steady run's status writes are counted.
	statusWindow = 30 * time.Second
	fabricName   = "lhcb"
)

// statusCounters is the reconciler's StatusCountersInterval (the
// manager's default; 0 writes every poll, as before it existed).
var statusCounters = flag.Duration("status-counters-interval", 10*time.Second,
	"how often the steady run's counters are written to its status (the manager's --status-counters-interval)")

func main() {
	crds := flag.String("crds", filepath.Join("..", "config", "crd", "bases"), "directory of the CRDs")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the whole benchmark (operator, API server client and emulated builders) here")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := bench(*crds); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func bench(crds string) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	env, err := testenv.Start("", crds)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	// As ctrl.GetConfig does for the real manager: no client-side rate
	// limit, the API server's priority and fairness decides.
	env.Config.QPS, env.Config.Burst = -1, -1

	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	mgr, err := env.NewManager(controller.CacheOptions())
	if err != nil {
		return err
	}
	farm := builderemu.NewFarm()
	defer farm.Close()
	builders := builderclient.New(builderclient.Timeouts{Poll: time.Second, Control: 2 * time.Second})
	err = errors.Join((&controller.EventBuilderRunReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("eventbuilderrun-controller"),
		Builders: builders, Control: builders,
		StatusURL:    func(pod *corev1.Pod) string { return farm.URL(string(pod.UID)) },
		PollInterval: 2 * time.Second, NodeNotReadyGrace: 10 * time.Second, RejoinBackoff: runplan.DefaultRejoinBackoff,
		StatusCountersInterval: *statusCounters,
	}).SetupWithManager(mgr), (&controller.FabricReconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("fabric-controller"),
	}).SetupWithManager(mgr))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()

	fabric, nodes := lhcb.Farm.Fabric(fabricName)
	if err := setup(ctx, c, fabric, nodes); err != nil {
		return err
	}
	w, err := watchRun(ctx, c)
	if err != nil {
		return err
	}
	k := newKubelet(ctx, c, farm)

	run := &ebv1.EventBuilderRun{
		ObjectMeta: metav1.ObjectMeta{Name: runName, Namespace: namespace},
		Spec: ebv1.EventBuilderRunSpec{
			Units: units, Spares: spares, FabricRef: &ebv1.FabricReference{Name: fabricName},
			Builder: ebv1.BuilderSpec{Image: "eventbuilder/builder:bench"},
		},
	}
	start := time.Now()
	if err := c.Create(ctx, run); err != nil {
		return err
	}
	created, err := w.pods(units+spares, 2*time.Minute)
	if err != nil {
		var pods corev1.PodList
		_ = c.List(ctx, &pods, client.InNamespace(namespace))
		_ = c.Get(ctx, client.ObjectKeyFromObject(run), run)
		return fmt.Errorf("%w: %d pods exist; run phase %s, conditions %v", err, len(pods.Items), run.Status.Phase, run.Status.Conditions)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return err
	}
	for _, p := range pods.Items {
		if builderpod.Node(&p) == "" {
			return fmt.Errorf("pod %s was created without its endpoint's node affinity", p.Name)
		}
	}
	fmt.Printf("BENCH name=operator_run_%d_units_pods_created value=%.3f unit=s\n", units, created.Sub(start).Seconds())
	running, err := waitRunning(ctx, c, 2*time.Minute)
	if err != nil {
		return err
	}
	fmt.Printf("BENCH name=operator_run_%d_units_running value=%.3f unit=s\n", units, running.Sub(start).Seconds())
	if err := k.err(); err != nil {
		return err
	}
	writes, largest, err := steadyStatus(ctx, c, statusWindow)
	if err != nil {
		return err
	}
	fmt.Printf("BENCH name=operator_run_%d_units_status_writes value=%.1f unit=1/min\n", units, float64(writes)/statusWindow.Minutes())
	fmt.Printf("BENCH name=operator_run_%d_units_status_size value=%.1f unit=KiB\n", units, float64(largest)/1024)

	// Fail a server hosting live units, one at a time, each once the
	// previous failover is done and the run is Running again.
	var took, recorded, published []time.Duration
	for i := range failovers {
		doc, err := w.table(int64(i+1), time.Minute)
		if err != nil {
			return err
		}
		node := doc.Ranks[liveRankOnLeaf(doc, i)].Node
		failedAt, err := setNotReady(ctx, c, node)
		if err != nil {
			return err
		}
		k.killNode(node)
		next, err := w.table(int64(i+2), time.Minute)
		if err != nil {
			return err
		}
		done, err := k.accepted.Configured(next, time.Minute, nil)
		if err != nil {
			return err
		}
		took = append(took, done.Sub(failedAt))
		fo, err := lastFailover(ctx, c, int64(i+2))
		if err != nil {
			return err
		}
		recorded = append(recorded, fo.ConfiguredDuration.Duration)
		published = append(published, fo.Duration.Duration)
		fmt.Fprintf(os.Stderr, "failover %d: node %s, %s, epoch %d on every live builder %v after the failure (operator: table %v, configured %v)\n",
			i+1, node, fo.Outcome, next.Epoch, done.Sub(failedAt), fo.Duration.Duration, fo.ConfiguredDuration.Duration)
		if _, err := waitRunning(ctx, c, time.Minute); err != nil {
			return err
		}
	}
	fmt.Printf("BENCH name=operator_failover_server_median value=%.3f unit=s\n", median(took).Seconds())
	fmt.Printf("BENCH name=operator_failover_server_max value=%.3f unit=s\n", slices.Max(took).Seconds())
	fmt.Printf("BENCH name=operator_failover_recorded_median value=%.1f unit=ms\n", float64(median(recorded).Microseconds())/1000)
	fmt.Printf("BENCH name=operator_failover_table_published_median value=%.1f unit=ms\n", float64(median(published).Microseconds())/1000)
	return k.err()
}

// steadyStatus counts the writes of the run's object over window while it
// builds (no failure, no edit: every write is the operator's status) and
// returns them with the largest status seen, in bytes of JSON.
func steadyStatus(ctx context.Context, c client.WithWatch, window time.Duration) (int, int, error) {
	ctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	w, err := c.Watch(ctx, &ebv1.EventBuilderRunList{}, client.InNamespace(namespace))
	if err != nil {
		return 0, 0, err
	}
	defer w.Stop()
	writes, largest := 0, 0
	for ev := range w.ResultChan() {
		run, ok := ev.Object.(*ebv1.EventBuilderRun)
		if !ok || ev.Type != watch.Modified {
			continue
		}
		writes++
		if b, err := json.Marshal(run.Status); err == nil {
			largest = max(largest, len(b))
		}
	}
	return writes, largest, nil
}

// waitRunning waits for the run's phase Running (or Degraded: units
// lost with no spare) and returns when the benchmark saw it.
func waitRunning(ctx context.Context, c client.Client, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	run := &ebv1.EventBuilderRun{}
	for time.Now().Before(deadline) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: runName}, run); err != nil {
			return time.Time{}, err
		}
		if p := run.Status.Phase; (p == ebv1.PhaseRunning || p == ebv1.PhaseDegraded) && run.Status.ObservedGeneration == run.Generation &&
			meta.IsStatusConditionTrue(run.Status.Conditions, ebv1.ConditionConfigured) {
			return time.Now(), nil
		}
		time.Sleep(20 * time.Millisecond) // polling the API server, not synchronising with the operator
	}
	return time.Time{}, fmt.Errorf("run not Running after %v: phase %s, conditions %v", timeout, run.Status.Phase, run.Status.Conditions)
}

// kubelet plays the kubelets of the simulated nodes: it starts each
// builder pod (status Running with an IP, and an emulated builder reading
// the run's token as the pod mounts it), makes it Ready once its builder
// is configured, and kills the builders of a node that fails.
type kubelet struct {
	ctx  context.Context
	c    client.Client
	farm *builderemu.Farm
	work chan string // pod names to start or make Ready

	mu       sync.Mutex
	pods     map[string]*corev1.Pod // started, by UID
	ready    map[string]bool
	accepted *accepted.Log
	failure  error
}

func newKubelet(ctx context.Context, c client.Client, farm *builderemu.Farm) *kubelet {
	k := &kubelet{ctx: ctx, c: c, farm: farm, work: make(chan string, 4096), pods: map[string]*corev1.Pod{},
		ready: map[string]bool{}, accepted: accepted.New()}
	farm.OnAccept(func(b *builderemu.Builder, cmd string, epoch int64) {
		if cmd != "configure" {
			return
		}
		k.accepted.Record(epoch, b.Rank())
		k.mu.Lock()
		first := !k.ready[b.Key()]
		k.ready[b.Key()] = true
		k.mu.Unlock()
		if first {
			k.work <- "ready/" + b.Key()
		}
	})
	for range 16 {
		go k.worker()
	}
	go k.watch()
	return k
}

func (k *kubelet) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.failure == nil {
		k.failure = err
	}
}

func (k *kubelet) err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.failure
}

// watch queues every builder pod created.
func (k *kubelet) watch() {
	cw, ok := k.c.(client.WithWatch)
	if !ok {
		k.fail(errors.New("kubelet: client cannot watch"))
		return
	}
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	seen := map[string]bool{}
	if err := follow(k.ctx, cw, pods, func(ev watch.Event) {
		if m, ok := ev.Object.(*metav1.PartialObjectMetadata); ok && ev.Type == watch.Added && !seen[m.Name] {
			seen[m.Name] = true
			k.work <- "start/" + m.Name
		}
	}); err != nil {
		k.fail(err)
	}
}

func (k *kubelet) worker() {
	for {
		var item string
		select {
		case <-k.ctx.Done():
			return
		case item = <-k.work:
		}
		what, arg, _ := strings.Cut(item, "/")
		var err error
		if what == "start" {
			err = k.start(arg)
		} else {
			err = k.markReady(arg)
		}
		if err != nil && k.ctx.Err() == nil {
			k.fail(fmt.Errorf("kubelet: %s %s: %w", what, arg, err))
		}
	}
}

// start reports a pod running and starts its builder.
func (k *kubelet) start(name string) error {
	pod := &corev1.Pod{}
	if err := k.c.Get(k.ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	secret := &corev1.Secret{}
	if err := k.c.Get(k.ctx, client.ObjectKey{Namespace: namespace, Name: builderpod.ControlSecretName(runName)}, secret); err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		// The scheduler's part: bind the pod to the node its affinity names.
		binding := &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: builderpod.Node(pod)}}
		if err := k.c.SubResource("binding").Create(k.ctx, pod, binding); err != nil {
			return client.IgnoreNotFound(err)
		}
		if err := k.c.Get(k.ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	k.mu.Lock()
	k.pods[string(pod.UID)] = pod
	k.mu.Unlock()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}}
	if _, err := k.farm.StartPod(string(pod.UID), pod, secret, builderpod.LabelRun); err != nil {
		return err
	}
	return k.c.Status().Update(k.ctx, pod)
}

// markReady sets a started pod's Ready condition: its builder is configured.
func (k *kubelet) markReady(uid string) error {
	k.mu.Lock()
	p := k.pods[uid]
	k.mu.Unlock()
	if p == nil {
		return nil
	}
	for {
		pod := &corev1.Pod{}
		if err := k.c.Get(k.ctx, client.ObjectKeyFromObject(p), pod); err != nil || string(pod.UID) != uid {
			return client.IgnoreNotFound(err)
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		err := k.c.Status().Update(k.ctx, pod)
		if !apierrors.IsConflict(err) {
			return client.IgnoreNotFound(err)
		}
	}
}

// killNode ends the builders of the pods on a node, as its failure would.
func (k *kubelet) killNode(node string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for uid, p := range k.pods {
		if p.Spec.NodeName == node {
			k.farm.Kill(uid)
		}
	}
}

// setup creates the namespace, the simulated nodes (Ready) and the fabric.
func setup(ctx context.Context, c client.Client, fabric *ebv1.Fabric, nodes []string) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(16)
	for _, name := range nodes {
		g.Go(func() error {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"eventbuilder.daq.io/simulated": "true"}}}
			if err := c.Create(ctx, node); err != nil {
				return err
			}
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
			return c.Status().Update(ctx, node)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return c.Create(ctx, fabric)
}

// setNotReady marks a node NotReady, as the node lifecycle controller
// does when its kubelet stops reporting, and returns when the API server
// has it.
func setNotReady(ctx context.Context, c client.Client, name string) (time.Time, error) {
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return time.Time{}, err
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	err := c.Status().Update(ctx, node)
	return time.Now(), err
}

// liveRankOnLeaf is a live rank on the i-th leaf in use.
func liveRankOnLeaf(doc ranktable.Document, i int) int {
	for _, r := range doc.Ranks {
		if r.State == ranktable.Live && r.Leaf != nil && *r.Leaf == i {
			return r.Rank
		}
	}
	return 0
}

func lastFailover(ctx context.Context, c client.Client, epoch int64) (*ebv1.FailoverStatus, error) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		run := &ebv1.EventBuilderRun{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: runName}, run); err != nil {
			return nil, err
		}
		if fo := run.Status.LastFailover; fo != nil && fo.Epoch == epoch && fo.ConfiguredDuration != nil {
			return fo, nil
		}
		time.Sleep(50 * time.Millisecond) // polling the API server, not synchronising with the operator
	}
	return nil, fmt.Errorf("no lastFailover at epoch %d, configured, in the run's status", epoch)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// watcher timestamps pod creations and rank-table epochs as the API
// server announces them.
type watcher struct {
	created chan time.Time
	mu      sync.Mutex
	epochs  map[int64]ranktable.Document
	epoch   chan struct{}
}

func watchRun(ctx context.Context, c client.WithWatch) (*watcher, error) {
	w := &watcher{created: make(chan time.Time, 1024), epochs: map[int64]ranktable.Document{}, epoch: make(chan struct{}, 1)}
	// Pods carry every peer's address: watch their metadata only, or the
	// API server drops the benchmark as a slow watcher while the operator
	// creates hundreds of them. Placement is checked once at the end.
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	seen := map[string]bool{}
	err := follow(ctx, c, pods, func(ev watch.Event) {
		if m, ok := ev.Object.(*metav1.PartialObjectMetadata); ok && ev.Type == watch.Added && !seen[m.Name] {
			seen[m.Name] = true
			w.created <- time.Now()
		}
	})
	if err != nil {
		return nil, err
	}
	err = follow(ctx, c, &corev1.ConfigMapList{}, func(ev watch.Event) {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok || cm.Name != ranktable.ConfigMapName(runName) {
			return
		}
		if doc, err := ranktable.Parse(cm.Data[ranktable.Key]); err == nil {
			w.mu.Lock()
			w.epochs[doc.Epoch] = doc
			w.mu.Unlock()
			select {
			case w.epoch <- struct{}{}:
			default:
			}
		}
	})
	return w, err
}

// follow watches list's kind in the namespace until ctx ends, resuming
// from the last resource version seen when the server closes the watch.
func follow(ctx context.Context, c client.WithWatch, list client.ObjectList, handle func(watch.Event)) error {
	open := func(rv string) (watch.Interface, error) {
		return c.Watch(ctx, list, client.InNamespace(namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	}
	wi, err := open("")
	if err != nil {
		return err
	}
	go func() {
		rv := ""
		for {
			for ev := range wi.ResultChan() {
				if o, ok := ev.Object.(client.Object); ok && ev.Type != watch.Error {
					rv = o.GetResourceVersion()
					handle(ev)
				}
			}
			if ctx.Err() != nil {
				return
			}
			var rerr error
			if wi, rerr = open(rv); rerr != nil {
				fmt.Fprintln(os.Stderr, "bench: rewatch:", rerr)
				return
			}
		}
	}()
	return nil
}

// pods waits for n more pods to be created and returns when the last one was.
func (w *watcher) pods(n int, timeout time.Duration) (time.Time, error) {
	var last time.Time
	deadline := time.After(timeout)
	for range n {
		select {
		case last = <-w.created:
		case <-deadline:
			return time.Time{}, fmt.Errorf("timed out waiting for %d pods", n)
		}
	}
	return last, nil
}

// table waits for the rank table of an epoch.
func (w *watcher) table(epoch int64, timeout time.Duration) (ranktable.Document, error) {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		doc, ok := w.epochs[epoch]
		w.mu.Unlock()
		if ok {
			return doc, nil
		}
		select {
		case <-w.epoch:
		case <-deadline:
			return ranktable.Document{}, fmt.Errorf("timed out waiting for rank table epoch %d", epoch)
		}
	}
}
