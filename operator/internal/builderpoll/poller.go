// Package builderpoll polls the builders of every run in the background,
// off the reconcile path: one goroutine per run asks each of its builder
// pods for GET /status (all at once, a bounded number in flight) every
// interval the reconciler asks for, keeps the latest poll and the rows of
// polls left unanswered, and hands each poll to a callback (the reconciler
// wakes the run with it). A builder that does not answer costs its own
// run's goroutine a poll timeout, never a reconcile worker.
package builderpoll

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"

	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderstatus"
)

// maxInFlight bounds the status requests of one run in flight at once.
const maxInFlight = 64

// Target is one builder pod to poll.
type Target struct {
	Rank  int32
	Pod   string // the pod's UID: a report is the pod's, not the rank's
	URL   string // base URL of its HTTP API
	Ready bool   // the kubelet finds the pod Ready: its builder has answered (builderstatus.Silences)
}

// Get asks the builder at base URL for its status.
type Get func(ctx context.Context, url string) (builderapi.Report, error)

// Poller polls the runs it tracks. Its zero value is not usable: use New.
type Poller struct {
	get    Get
	polled func(run types.NamespacedName, p *builderstatus.Poll)
	ctx    context.Context
	stop   context.CancelFunc

	mu   sync.Mutex
	runs map[types.NamespacedName]*tracked
}

type tracked struct {
	targets  []Target
	interval time.Duration
	kick     chan struct{}
	cancel   context.CancelFunc

	latest   *builderstatus.Poll
	taken    bool      // latest was handed out as fresh
	changed  time.Time // commands were sent then: earlier polls are stale
	silences builderstatus.Silences
}

// New returns a poller that asks builders with get and calls polled after
// each poll of a run (from that run's goroutine). Its goroutines end when
// Start's context ends.
func New(get Get, polled func(types.NamespacedName, *builderstatus.Poll)) *Poller {
	ctx, stop := context.WithCancel(context.Background())
	return &Poller{get: get, polled: polled, ctx: ctx, stop: stop, runs: map[types.NamespacedName]*tracked{}}
}

// Start runs until ctx ends, then stops every run's polling (a manager
// Runnable).
func (p *Poller) Start(ctx context.Context) error {
	<-ctx.Done()
	p.stop()
	return nil
}

// Track polls run's targets every interval from now on (again at once
// when a builder that answered before falls silent, then every half
// interval while it stays silent: a lost server, maybe),
// starting its polling if it was not tracked. A change of targets (a pod
// replaced, started or gone), or a shorter interval, is polled at once.
func (p *Poller) Track(run types.NamespacedName, targets []Target, interval time.Duration) {
	slices.SortFunc(targets, func(a, b Target) int { return int(a.Rank - b.Rank) })
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.runs[run]
	if !ok {
		ctx, cancel := context.WithCancel(p.ctx)
		t = &tracked{kick: make(chan struct{}, 1), cancel: cancel}
		p.runs[run] = t
		go p.loop(ctx, run, t)
	}
	changed := !slices.Equal(t.targets, targets) || interval < t.interval
	t.targets, t.interval = targets, interval
	if changed || !ok {
		kick(t)
	}
}

// Kick polls run at once (after a command, to see what it did).
func (p *Poller) Kick(run types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.runs[run]; ok {
		kick(t)
	}
}

// Changed says that run's builders were just sent commands: a poll that
// began before now shows them as they were, so it is fresh for no one, and
// a new one starts at once.
func (p *Poller) Changed(run types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.runs[run]; ok {
		t.changed, t.taken = time.Now(), true
		kick(t)
	}
}

func kick(t *tracked) {
	select {
	case t.kick <- struct{}{}:
	default: // one is pending already
	}
}

// Fresh returns run's latest poll if no earlier call returned it, else nil:
// a reconcile folds each poll into the status once.
func (p *Poller) Fresh(run types.NamespacedName) *builderstatus.Poll {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.runs[run]
	if !ok || t.latest == nil || t.taken {
		return nil
	}
	t.taken = true
	return clone(t.latest)
}

// Latest returns run's latest poll, whether or not a reconcile used it;
// nil before the first one, and while the latest began before commands
// were sent (Changed): it shows the builders as they were.
func (p *Poller) Latest(run types.NamespacedName) *builderstatus.Poll {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.runs[run]; ok && t.latest != nil && !t.latest.Time.Before(t.changed) {
		return clone(t.latest)
	}
	return nil
}

// Silences returns the rows of polls run's builders left unanswered, by rank.
func (p *Poller) Silences(run types.NamespacedName) map[int32]builderstatus.Silence {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.runs[run]; ok {
		return maps.Clone(t.silences.Rows)
	}
	return nil
}

// Forget stops polling run (it is gone) and drops what was kept of it.
func (p *Poller) Forget(run types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.runs[run]; ok {
		t.cancel()
		delete(p.runs, run)
	}
}

// loop polls one run until ctx ends: at once when kicked, else every interval.
func (p *Poller) loop(ctx context.Context, run types.NamespacedName, t *tracked) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.kick:
		case <-timer.C:
		}
		p.mu.Lock()
		targets, interval := t.targets, t.interval
		p.mu.Unlock()
		poll := p.pollOnce(ctx, targets)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		t.latest, t.taken = poll, poll.Time.Before(t.changed)
		t.silences = t.silences.After(poll, readyPods(targets))
		switch {
		case fellSilent(t.silences):
			// Confirmed at once: a lost server fails over after two
			// poll timeouts, not a poll interval later.
			interval = 0
		case len(t.silences.Rows) > 0:
			interval /= 2
		}
		p.mu.Unlock()
		p.polled(run, clone(poll))
		timer.Reset(interval)
	}
}

// pollOnce asks every target for its status in parallel. A builder that
// does not answer is missing from the reports.
func (p *Poller) pollOnce(ctx context.Context, targets []Target) *builderstatus.Poll {
	poll := &builderstatus.Poll{Time: time.Now(), Pods: make(map[int32]string, len(targets)),
		Reports: make(map[int32]builderapi.Report, len(targets))}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(maxInFlight)
	for _, target := range targets {
		poll.Pods[target.Rank] = target.Pod
		g.Go(func() error {
			rep, err := p.get(ctx, target.URL)
			if err != nil {
				return nil // not answering: no report
			}
			mu.Lock()
			poll.Reports[target.Rank] = rep
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait() // the goroutines never fail
	return poll
}

// fellSilent: a builder left its first poll unanswered in this one.
func fellSilent(s builderstatus.Silences) bool {
	for _, row := range s.Rows {
		if row.Polls == 1 {
			return true
		}
	}
	return false
}

// readyPods are the pods of targets the kubelet finds Ready.
func readyPods(targets []Target) map[string]bool {
	ready := map[string]bool{}
	for _, target := range targets {
		if target.Ready {
			ready[target.Pod] = true
		}
	}
	return ready
}

// clone copies a poll's maps (reports are values), so that a reconcile
// may merge control answers into its copy.
func clone(p *builderstatus.Poll) *builderstatus.Poll {
	return &builderstatus.Poll{Time: p.Time, Pods: maps.Clone(p.Pods), Reports: maps.Clone(p.Reports)}
}
