// Command bench is the operator's scale benchmark: the reconcilers in a
// manager against a real kube-apiserver and etcd (envtest), on the LHCb
// event-builder fabric with simulated nodes (Node objects with no kubelet
// behind them, named sim-ebNNN and labelled eventbuilder.daq.io/simulated).
// It prints BENCH lines on standard output; logs go to standard error.
//
// The fabric: 18 leaves, 10 spines, 20 server ports per leaf, 2 links per
// leaf-spine pair; the 163 LHCb servers plus 4 warm spare servers (on
// leaves 11-14), two NUMA endpoints each: 334 endpoints on the 360 ports.
// The run: 326 units and 8 spare endpoints (the 4 spare servers' worth).
// Pods are bound by the operator itself: it sets spec.nodeName when it
// creates them (there is no scheduler in envtest, and none is needed).
//
// Figures:
//   - run_create: from creating the run to all 326 pods created, bound;
//   - failover_server (median and max over 4 server failures): from a
//     node's Ready=False being written to the API server to the new rank
//     table published and both replacement pods created;
//   - failover_recorded: the operator's own status.lastFailover.duration,
//     from its observing the failure to the replacement pods created.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/buildercontrol"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/controller"
	"daq.io/eventbuilder/operator/internal/ranktable"
)

const (
	units      = 326
	spares     = 8
	failovers  = 4
	namespace  = "bench"
	runName    = "lhcb"
	fabricName = "lhcb"
)

// serversPerLeaf: the LHCb cabling (163 servers) with one spare server
// added on each of leaves 11-14.
var serversPerLeaf = []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 9, 9, 9, 9, 7, 7, 7}

func main() {
	crds := flag.String("crds", filepath.Join("..", "config", "crd", "bases"), "directory of the CRDs")
	flag.Parse()
	if err := bench(*crds); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func bench(crds string) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	env := &envtest.Environment{CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("envtest (KUBEBUILDER_ASSETS=%s): %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	defer func() { _ = env.Stop() }()
	// As ctrl.GetConfig does for the real manager: no client-side rate
	// limit, the API server's priority and fairness decides.
	cfg.QPS, cfg.Burst = -1, -1

	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), ebv1.AddToScheme(scheme)); err != nil {
		return err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Cache: controller.CacheOptions(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	err = errors.Join((&controller.EventBuilderRunReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("eventbuilderrun-controller"),
		Builders: builderstatus.NewClient(time.Second), Control: buildercontrol.Unavailable{},
		StatusURL: builderpod.StatusURL, PollInterval: 2 * time.Second, NodeNotReadyGrace: 10 * time.Second,
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

	fabric, nodes := lhcb()
	if err := setup(ctx, c, fabric, nodes); err != nil {
		return err
	}
	w, err := watchRun(ctx, c)
	if err != nil {
		return err
	}

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
	created, err := w.pods(units, 2*time.Minute)
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
		if p.Spec.NodeName == "" {
			return fmt.Errorf("pod %s was created unbound", p.Name)
		}
	}
	fmt.Printf("BENCH name=operator_run_%d_units_pods_created_bound value=%.3f unit=s\n", units, created.Sub(start).Seconds())

	// Fail a server hosting live units, one at a time, each once the
	// previous failover is done.
	var took, recorded []time.Duration
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
		if _, err := w.table(int64(i+2), time.Minute); err != nil {
			return err
		}
		done, err := w.pods(2, time.Minute)
		if err != nil {
			return err
		}
		took = append(took, done.Sub(failedAt))
		fo, err := lastFailover(ctx, c, int64(i+2))
		if err != nil {
			return err
		}
		recorded = append(recorded, fo.Duration.Duration)
		fmt.Fprintf(os.Stderr, "failover %d: node %s, %s, %v after the failure (operator: %v)\n", i+1, node, fo.Outcome, done.Sub(failedAt), fo.Duration.Duration)
	}
	fmt.Printf("BENCH name=operator_failover_server_median value=%.3f unit=s\n", median(took).Seconds())
	fmt.Printf("BENCH name=operator_failover_server_max value=%.3f unit=s\n", slices.Max(took).Seconds())
	fmt.Printf("BENCH name=operator_failover_recorded_median value=%.1f unit=ms\n", float64(median(recorded).Microseconds())/1000)
	return nil
}

// lhcb is the benchmark's fabric and its simulated nodes.
func lhcb() (*ebv1.Fabric, []string) {
	f := &ebv1.Fabric{
		ObjectMeta: metav1.ObjectMeta{Name: fabricName},
		Spec:       ebv1.FabricSpec{Leaves: 18, Spines: 10, PortsPerLeaf: 20, LinksPerPair: 2},
	}
	var nodes []string
	for leaf, n := range serversPerLeaf {
		for slot := range n {
			node := fmt.Sprintf("sim-eb%03d", len(nodes))
			nodes = append(nodes, node)
			for numa := range 2 {
				name := fmt.Sprintf("%s-numa%d", node, numa)
				f.Spec.Endpoints = append(f.Spec.Endpoints, ebv1.FabricEndpoint{
					Name: name, Node: node, NUMA: int32(numa), RDMADevice: fmt.Sprintf("mlx5_%d", numa), Netdev: fmt.Sprintf("ib%d", numa),
					Leaf: int32(leaf), Port: int32(2*slot + numa),
					Streams: []string{name + "-mfp0", name + "-mfp1", name + "-mfp2"},
				})
			}
		}
	}
	return f, nodes
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
		if fo := run.Status.LastFailover; fo != nil && fo.Epoch == epoch {
			return fo, nil
		}
		time.Sleep(50 * time.Millisecond) // polling the API server, not synchronising with the operator
	}
	return nil, fmt.Errorf("no lastFailover at epoch %d in the run's status", epoch)
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
	// creates hundreds of them. Binding is checked once at the end.
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
