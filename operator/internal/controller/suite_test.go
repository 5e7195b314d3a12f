package controller

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderclient"
	"daq.io/eventbuilder/operator/internal/builderemu"
	"daq.io/eventbuilder/operator/internal/opmetrics"
	"daq.io/eventbuilder/operator/internal/runplan"
	"daq.io/eventbuilder/operator/internal/testenv"
)

// The envtest suite runs the reconciler in a manager against a real
// kube-apiserver and etcd. There is no kubelet: tests play it by writing pod
// status (startPod), which starts an emulated builder (internal/builderemu:
// the control API's state machine, tokens and epochs, no data) from the
// pod's command line and mounted token, and the kubelet's readiness probe
// (GET /readyz) keeps the pod's Ready condition.

const (
	pollInterval  = 200 * time.Millisecond
	notReadyGrace = time.Second
	// unreachableAfter: builders that stop answering fail over after this.
	unreachableAfter = time.Second
	// A running unit whose event stream stands still this long is not building.
	stallAfter = time.Second
)

// rejoinBackoff is short enough for a test to wait out two backoffs.
var rejoinBackoff = runplan.RejoinBackoff{First: 2 * time.Second, Max: 4 * time.Second}

var (
	k8s        client.Client // direct, uncached: what tests read is what the API server has
	apiConfig  *rest.Config  // the API server's, for what client.Client does not ask (tables)
	skipReason string        // why the envtest suite cannot run, if it cannot
	// reconciler is the suite's: a test may make it forget what it heard.
	reconciler *EventBuilderRunReconciler
	// farm runs the emulated builders, one per started pod (by UID).
	farm    *builderemu.Farm
	prober  = &readinessProber{pods: map[types.UID]client.ObjectKey{}, ready: map[types.UID]bool{}}
	control = builderclient.New(builderclient.Timeouts{Poll: time.Second, Control: time.Second})
)

// repoRoot is the repository root, relative to this package.
var repoRoot = filepath.Join("..", "..", "..")

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = testenv.MadeAssets(repoRoot)
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			skipReason = fmt.Sprintf("no %s in %s (KUBEBUILDER_ASSETS): build the envtest binaries first", bin, assets)
			fmt.Fprintln(os.Stderr, "envtest tests will SKIP:", skipReason)
			return m.Run()
		}
	}

	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	farm = builderemu.NewFarm()
	defer farm.Close()
	// With the emulated NetworkAttachmentDefinition API (testenv/npwg).
	env, err := testenv.Start(assets, filepath.Join(repoRoot, "config", "crd", "bases"), filepath.Join("..", "testenv", "npwg"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stopEnv := sync.OnceValue(env.Stop)
	defer func() {
		if err := stopEnv(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	// go test's -timeout panics without running deferred calls, which
	// would leave the API server and etcd running: stop them just before,
	// with every goroutine's stack first (the tests that hang), as the
	// panic would have printed them.
	flag.Parse()
	if d := flag.Lookup("test.timeout").Value.(flag.Getter).Get().(time.Duration); d > time.Minute {
		alarm := time.AfterFunc(d-30*time.Second, func() {
			fmt.Fprintln(os.Stderr, "go test's -timeout is 30 s away: the goroutines, then envtest's API server and etcd stopped")
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
			_ = stopEnv()
		})
		defer alarm.Stop()
	}
	apiConfig = env.Config
	if k8s, err = client.New(env.Config, client.Options{Scheme: env.Scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	mgr, err := env.NewManager(CacheOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	reconciler = &EventBuilderRunReconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Recorder:          mgr.GetEventRecorder("eventbuilderrun-controller"),
		Builders:          builderclient.New(builderclient.Timeouts{Poll: time.Second, Control: time.Second}),
		Control:           opmetrics.CountControl(control),
		StatusURL:         builderURL,
		PollInterval:      pollInterval,
		NodeNotReadyGrace: notReadyGrace,
		UnreachableAfter:  unreachableAfter,
		StallAfter:        stallAfter,
		MaxConcurrent:     4, // as deployed: -race sees runs reconciled side by side
		RejoinBackoff:     rejoinBackoff,
		ControlClients:    &testControlClients, // as the chart deploys it
	}
	err = errors.Join(reconciler.SetupWithManager(mgr), (&FabricReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("fabric-controller"),
	}).SetupWithManager(mgr))
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	go prober.run(ctx)
	code := m.Run()
	cancel()
	if err := awaitShutdown(done, 20*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		code = 1
	}
	return code
}

// madeAssets is where make builds kube-apiserver and etcd
// (bin/k8s-VERSION-etcd-VERSION-KEY): the newest such build, so that a
// plain go test runs the envtests after make has built them once.
// awaitShutdown waits for the manager to return; if it is still stopping
// after slow (a reconcile that ignores its cancelled context), it prints
// every goroutine's stack first, so that the culprit is named.
func awaitShutdown(done <-chan error, slow time.Duration) error {
	select {
	case err := <-done:
		return err
	case <-time.After(slow):
		fmt.Fprintf(os.Stderr, "manager still stopping after %s; goroutines:\n", slow)
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		return <-done
	}
}

// requireEnvtest skips a test, saying why, when the suite could not start
// (under make test it fails instead: testenv.Unavailable).
func requireEnvtest(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		testenv.Unavailable(t, skipReason)
	}
}

// builderURL is where the emulated builder of a pod answers (nothing
// answers until startPod starts it).
func builderURL(pod *corev1.Pod) string { return farm.URL(string(pod.UID)) }

// readinessProber plays the kubelet's readiness probe of started pods:
// GET /readyz, and the pod's Ready condition follows.
type readinessProber struct {
	mu    sync.Mutex
	pods  map[types.UID]client.ObjectKey
	ready map[types.UID]bool
}

func (p *readinessProber) add(pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pods[pod.UID] = client.ObjectKeyFromObject(pod)
	p.ready[pod.UID] = false
}

// lose stops probing a pod: its kubelet is lost with its server, so the
// pod's Ready condition stays as it was.
func (p *readinessProber) lose(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pods, uid)
}

func (p *readinessProber) run(ctx context.Context) {
	hc := &http.Client{Timeout: time.Second}
	for ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		p.mu.Lock()
		pods := maps.Clone(p.pods)
		p.mu.Unlock()
		// Each pod on its own, as kubelets probe: a hung builder costs
		// its own pod a timeout, not every other pod's readiness.
		var wg sync.WaitGroup
		for uid, key := range pods {
			wg.Go(func() { p.probe(ctx, hc, uid, key) })
		}
		wg.Wait()
	}
}

// probe asks the pod's builder GET /readyz and records a change in the
// pod's Ready condition.
func (p *readinessProber) probe(ctx context.Context, hc *http.Client, uid types.UID, key client.ObjectKey) {
	ready := false
	if resp, err := hc.Get(farm.URL(string(uid)) + "/readyz"); err == nil {
		ready = resp.StatusCode == http.StatusOK
		resp.Body.Close()
	}
	p.mu.Lock()
	_, probed := p.pods[uid] // not lost meanwhile
	changed := probed && p.ready[uid] != ready
	p.mu.Unlock()
	if !changed {
		return
	}
	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, key, pod); err != nil || pod.UID != uid {
		p.mu.Lock()
		delete(p.pods, uid) // gone
		p.mu.Unlock()
		return
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(ctx, pod); err == nil {
		p.mu.Lock()
		p.ready[uid] = ready
		p.mu.Unlock()
	}
}

// waitPodReady waits for the prober to mark pod Ready, as a kubelet
// would once its builder answers /readyz.
func waitPodReady(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	eventually(t, "pod "+pod.Name+" Ready", func() error {
		var now corev1.Pod
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), &now); err != nil || runplan.PodReady(&now) {
			return err
		}
		return fmt.Errorf("conditions %+v", now.Status.Conditions)
	})
}

// newNamespace gives each test its own namespace. Its runs are deleted when
// the test ends (envtest has no namespace controller to do it): the
// operator stops polling and reconciling them, so a late test does not
// share the operator with every run of the tests before it.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ebtest-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := k8s.DeleteAllOf(context.Background(), &ebv1.EventBuilderRun{}, client.InNamespace(ns.Name)); err != nil {
			t.Errorf("deleting the runs of namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// eventually retries check until it returns nil, failing the test with the
// last error after a timeout.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, check)
}
