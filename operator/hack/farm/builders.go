package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"daq.io/eventbuilder/operator/hack/accepted"
	"daq.io/eventbuilder/operator/internal/builderemu"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/ranktable"
)

// lostAnnotation marks a pod whose server was lost: KWOK's delete stage
// leaves it Terminating, as no kubelet is there to confirm.
const lostAnnotation = "eventbuilder.daq.io/farm-node-lost"

// builders plays, beside KWOK, what the simulated servers run in each
// builder pod: once KWOK has started a pod (Running, with an IP of its
// server's pod CIDR), an emulated builder (internal/builderemu, which the
// contract suite ties to eb-builder) serves the control API at the pod's
// own IP and port, reading its token as the pod mounts it; the pod turns
// Ready when its builder is configured (the readiness probe's /readyz).
// A lost server's builders go silent: their peers mark them lost, and
// their addresses take connections and answer nothing.
type builders struct {
	ctx  context.Context
	cs   kubernetes.Interface
	ns   string
	farm *builderemu.Farm

	mu        sync.Mutex
	pods      map[string]*servedPod // by UID
	accepted  *accepted.Log
	created   map[string]time.Time // pod name -> when it was first seen
	starting  map[string]bool      // UIDs whose builder is started or queued
	work      chan *corev1.Pod
	scheduled map[string]time.Time                    // pod name -> when it was first seen bound
	deleting  map[string]time.Time                    // pod name -> when it was first seen being deleted
	tables    map[string]map[int64]ranktable.Document // run -> epoch -> its rank table
	changed   chan struct{}
	failure   error
}

type servedPod struct {
	pod      *corev1.Pod
	listener net.Listener
	silent   bool
	ready    bool
}

func newBuilders(ctx context.Context, cs kubernetes.Interface, ns string) (*builders, error) {
	b := &builders{ctx: ctx, cs: cs, ns: ns, farm: builderemu.NewFarm(), pods: map[string]*servedPod{},
		accepted: accepted.New(), created: map[string]time.Time{}, starting: map[string]bool{}, work: make(chan *corev1.Pod, 8192), scheduled: map[string]time.Time{}, deleting: map[string]time.Time{},
		tables: map[string]map[int64]ranktable.Document{}, changed: make(chan struct{}, 1)}
	b.farm.OnAccept(b.onAccept)
	for range 16 {
		go b.worker()
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	pods := factory.Core().V1().Pods().Informer()
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.seen(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { b.seen(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				b.gone(pod)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	tables := factory.Core().V1().ConfigMaps().Informer()
	_, err = tables.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.table(obj.(*corev1.ConfigMap)) },
		UpdateFunc: func(_, obj any) { b.table(obj.(*corev1.ConfigMap)) },
	})
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("pod informer %v did not sync", typ)
		}
	}
	return b, nil
}

func (b *builders) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failure == nil && b.ctx.Err() == nil {
		b.failure = err
	}
}

func (b *builders) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failure
}

func (b *builders) notify() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// table records each rank table the operator publishes.
func (b *builders) table(cm *corev1.ConfigMap) {
	run, ok := strings.CutSuffix(cm.Name, ranktable.ConfigMapName(""))
	doc, err := ranktable.Parse(cm.Data[ranktable.Key])
	if !ok || err != nil {
		return
	}
	b.mu.Lock()
	if b.tables[run] == nil {
		b.tables[run] = map[int64]ranktable.Document{}
	}
	b.tables[run][doc.Epoch] = doc
	b.mu.Unlock()
	b.notify()
}

// seen starts the builder of a pod KWOK has started, and notes when a pod
// was first seen bound, and being deleted.
func (b *builders) seen(pod *corev1.Pod) {
	b.mu.Lock()
	if _, ok := b.created[pod.Name]; !ok {
		b.created[pod.Name] = time.Now()
	}
	if _, ok := b.scheduled[pod.Name]; !ok && pod.Spec.NodeName != "" {
		b.scheduled[pod.Name] = time.Now()
		defer b.notify()
	}
	if _, ok := b.deleting[pod.Name]; !ok && pod.DeletionTimestamp != nil {
		b.deleting[pod.Name] = time.Now()
		defer b.notify()
	}
	startable := pod.Status.PodIP != "" && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil
	if startable && !b.starting[string(pod.UID)] {
		b.starting[string(pod.UID)] = true
		b.work <- pod.DeepCopy() // started by a worker: the informer's handler must not wait
	}
	b.mu.Unlock()
}

// worker starts the builders of started pods.
func (b *builders) worker() {
	for {
		select {
		case <-b.ctx.Done():
			return
		case pod := <-b.work:
			if err := b.start(pod); err != nil {
				b.fail(fmt.Errorf("starting the builder of pod %s: %w", pod.Name, err))
			}
		}
	}
}

func (b *builders) start(pod *corev1.Pod) error {
	uid := string(pod.UID)
	secret, err := b.cs.CoreV1().Secrets(b.ns).Get(b.ctx, builderpod.ControlSecretName(pod.Labels[builderpod.LabelRun]), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // its run is being deleted: a kubelet could not mount the token either, and the pod goes
	} else if err != nil {
		return err
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(builderpod.HTTPPort)))
	if err != nil {
		return fmt.Errorf("pod IP %s (its server's pod CIDR must be on the loopback device): %w", pod.Status.PodIP, err)
	}
	if _, err := b.farm.StartPod(uid, pod, secret, builderpod.LabelRun); err != nil {
		_ = listener.Close()
		return err
	}
	b.mu.Lock()
	b.pods[uid] = &servedPod{pod: pod, listener: listener}
	b.mu.Unlock()
	inner := b.farm.Handler(uid)
	go func() {
		_ = http.Serve(listener, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if b.silent(uid) {
				// A server that is gone answers nothing; the caller's
				// timeout ends the request.
				select {
				case <-r.Context().Done():
				case <-b.ctx.Done():
				}
				return
			}
			inner.ServeHTTP(w, r)
		}))
	}()
	return nil
}

func (b *builders) silent(uid string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pods[uid]
	return p != nil && p.silent
}

// gone ends the builder of a deleted pod: its process is gone, its address
// refuses connections.
func (b *builders) gone(pod *corev1.Pod) {
	uid := string(pod.UID)
	b.mu.Lock()
	p := b.pods[uid]
	delete(b.pods, uid)
	b.mu.Unlock()
	if p != nil {
		b.farm.Kill(uid)
		_ = p.listener.Close()
	}
	b.notify()
}

// onAccept records when each builder accepted an epoch by configure, and
// makes a pod Ready when its builder is first configured.
func (b *builders) onAccept(eb *builderemu.Builder, cmd string, epoch int64) {
	if cmd != "configure" {
		return
	}
	b.accepted.Record(epoch, eb.Rank())
	b.mu.Lock()
	p := b.pods[eb.Key()]
	first := p != nil && !p.ready
	if first {
		p.ready = true
	}
	b.mu.Unlock()
	b.notify()
	if first {
		go func() {
			if err := b.markReady(p.pod); err != nil {
				b.fail(fmt.Errorf("marking pod %s Ready: %w", p.pod.Name, err))
			}
		}()
	}
}

// markReady sets the pod's Ready condition, as the kubelet does once its
// readiness probe passes.
func (b *builders) markReady(p *corev1.Pod) error {
	const attempts = 20 // each a conflict with another writer of the pod's status
	for range attempts {
		pod, err := b.cs.CoreV1().Pods(b.ns).Get(b.ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && pod.UID != p.UID) {
			return nil
		} else if err != nil {
			return err
		}
		now := metav1.Now()
		for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
			setPodCondition(pod, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		for i := range pod.Status.ContainerStatuses {
			pod.Status.ContainerStatuses[i].Ready = true
		}
		_, err = b.cs.CoreV1().Pods(b.ns).UpdateStatus(b.ctx, pod, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("its status changed under %d updates in a row", attempts)
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// silence makes every builder on the nodes go silent at once, as their
// servers' loss would: their peers mark them lost, their addresses answer
// nothing. The pods are annotated so that KWOK leaves them Terminating
// when deleted.
func (b *builders) silence(nodes map[string]bool) {
	b.mu.Lock()
	var lost []*servedPod
	for uid, p := range b.pods {
		if nodes[p.pod.Spec.NodeName] {
			p.silent = true
			lost = append(lost, p)
			b.farm.Kill(uid)
		}
	}
	b.mu.Unlock()
	for _, p := range lost {
		patch := []byte(`{"metadata":{"annotations":{"` + lostAnnotation + `":"true"}}}`)
		if _, err := b.cs.CoreV1().Pods(b.ns).Patch(b.ctx, p.pod.Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			b.fail(fmt.Errorf("annotating pod %s of a lost server: %w", p.pod.Name, err))
		}
	}
}

// scheduledPods is how many pods of the run have been seen bound, and
// when the last of them was.
func (b *builders) scheduledPods(run string) (int, time.Time) { return b.lastOf(b.scheduled, run) }

// createdPods is how many pods of the run have been seen, and when the
// last of them was.
func (b *builders) createdPods(run string) (int, time.Time) { return b.lastOf(b.created, run) }

func (b *builders) lastOf(times map[string]time.Time, run string) (int, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, last := 0, time.Time{}
	for name, at := range times {
		if strings.HasPrefix(name, run+"-") {
			n++
			if at.After(last) {
				last = at
			}
		}
	}
	return n, last
}

// tableWhere waits for a rank table of the run, at an epoch above after,
// for which ok holds, and returns it.
func (b *builders) tableWhere(run string, after int64, timeout time.Duration, ok func(ranktable.Document) bool) (ranktable.Document, error) {
	deadline := time.After(timeout)
	for {
		b.mu.Lock()
		var found *ranktable.Document
		for epoch, doc := range b.tables[run] {
			if epoch > after && ok(doc) && (found == nil || epoch < found.Epoch) {
				found = &doc
			}
		}
		failure := b.failure
		b.mu.Unlock()
		if failure != nil {
			return ranktable.Document{}, failure
		}
		if found != nil {
			return *found, nil
		}
		select {
		case <-b.changed:
		case <-deadline:
			return ranktable.Document{}, fmt.Errorf("run %s: no rank table after epoch %d as expected within %v", run, after, timeout)
		}
	}
}

// latestTable is the run's table of the highest epoch seen.
func (b *builders) latestTable(run string) (ranktable.Document, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var latest ranktable.Document
	for epoch, doc := range b.tables[run] {
		if epoch > latest.Epoch {
			latest = doc
		}
	}
	return latest, latest.Epoch > 0
}

// firstDeletion is when the first of the named pods was seen being deleted
// (zero if none was).
func (b *builders) firstDeletion(names []string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	var first time.Time
	for _, name := range names {
		if at, ok := b.deleting[name]; ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// podsLeft is how many builder pods are still served.
func (b *builders) podsLeft() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pods)
}

// configured waits until every live rank of doc's table has accepted its
// epoch by configure, and returns when the last one did.
func (b *builders) configured(doc ranktable.Document, timeout time.Duration) (time.Time, error) {
	return b.accepted.Configured(doc, timeout, b.err)
}

// running is how many builders of the run are RUNNING.
func (b *builders) running() int {
	b.mu.Lock()
	keys := make([]string, 0, len(b.pods))
	for uid, p := range b.pods {
		if !p.silent {
			keys = append(keys, uid)
		}
	}
	b.mu.Unlock()
	n := 0
	for _, k := range keys {
		if eb := b.farm.Builder(k); eb != nil && eb.State() == builderemu.Running {
			n++
		}
	}
	return n
}

func (b *builders) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.pods {
		_ = p.listener.Close()
	}
	b.farm.Close()
}
