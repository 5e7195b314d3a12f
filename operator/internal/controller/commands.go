package controller

import (
	"context"
	"sync"
	"time"

	"daq.io/eventbuilder/operator/internal/builderapi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Control calls are sent as batches. Each run's command batch (configure
// and the commands spec.state asks for, a reset before a rejoin, the stop
// before a resize) runs in a goroutine of its own, one batch at a time per
// run, so a builder that does not answer costs its run's batch the control
// timeout, never a reconcile worker. A reconcile decides on a poll, hands
// the batch over and goes on; the batch's end marks the polls begun before
// it stale and polls at once (builderpoll.Changed), which wakes the run
// with what the commands did.
//
// A decision must rest on a poll begun after the run's last batch that sent
// commands had ended: one begun earlier shows the builders as they were, and
// deciding on it sends the same commands again (a configure twice, a reset
// twice). The commander checks that itself, under the lock that ends
// batches (submit's basis), since a reconcile cannot: a batch may end
// between its taking a poll and its handing a batch over.

// batchKind says what a batch was for.
type batchKind int

const (
	driveBatch  batchKind = iota // configure, then spec.state's commands
	resetBatch                   // reset lost builders still in their session
	resizeBatch                  // stop the set before it starts again on another size
)

// commandResult is what a batch did.
type commandResult struct {
	kind batchKind
	// epoch is the rank table a drive batch sent and drove to.
	epoch int64
	// configured: every live builder holds epoch; missing are those that
	// do not (drive batches).
	configured bool
	missing    []int32
	sent       bool // some command went out
	err        error
	done       time.Time
}

type commander struct {
	ctx   context.Context
	stop  context.CancelFunc
	ended func(types.NamespacedName, commandResult)

	mu      sync.Mutex
	running map[types.NamespacedName]bool
	queued  map[types.NamespacedName]func(context.Context) commandResult
	last    map[types.NamespacedName]commandResult
	// sentUntil is when run's last batch that sent commands ended: polls
	// begun before it are stale.
	sentUntil map[types.NamespacedName]time.Time
}

// newCommander calls ended (from the batch's goroutine) after each batch.
func newCommander(ended func(types.NamespacedName, commandResult)) *commander {
	ctx, stop := context.WithCancel(context.Background())
	return &commander{ctx: ctx, stop: stop, ended: ended, running: map[types.NamespacedName]bool{},
		queued: map[types.NamespacedName]func(context.Context) commandResult{}, last: map[types.NamespacedName]commandResult{},
		sentUntil: map[types.NamespacedName]time.Time{}}
}

// Start runs until ctx ends, then cancels the batches still running (a
// manager Runnable).
func (c *commander) Start(ctx context.Context) error {
	<-ctx.Done()
	c.stop()
	return nil
}

// submit starts batch for run, decided on a poll begun at basis, unless
// one of run's batches is running or basis is before the end of its last
// batch that sent commands; it says whether it started it.
func (c *commander) submit(run types.NamespacedName, basis time.Time, batch func(context.Context) commandResult) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.free(run, basis) {
		return false
	}
	c.running[run] = true
	go c.run(run, batch)
	return true
}

// queue starts batch for run now, or right after the batch running, in
// place of any queued before it: a new rank table must reach the builders
// without waiting for a poll (a failover), whatever was being sent. It
// rests on no poll (drive's blind mode: the answers to configure are its
// poll).
func (c *commander) queue(run types.NamespacedName, batch func(context.Context) commandResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running[run] {
		c.queued[run] = batch
		return
	}
	c.running[run] = true
	go c.run(run, batch)
}

// run runs batch, then the batch queued meanwhile, if any.
func (c *commander) run(run types.NamespacedName, batch func(context.Context) commandResult) {
	for batch != nil {
		res := batch(c.ctx)
		res.done = time.Now()
		if res.err != nil {
			logf.FromContext(c.ctx).Info("control batch failed", "run", run, "error", res.err.Error())
		}
		c.mu.Lock()
		c.last[run] = res
		if res.sent {
			c.sentUntil[run] = res.done
		}
		batch = c.queued[run]
		delete(c.queued, run)
		if batch == nil {
			delete(c.running, run)
		}
		c.mu.Unlock()
		c.ended(run, res)
	}
}

// accepts says whether submit would start a batch for run decided on a
// poll begun at basis now.
func (c *commander) accepts(run types.NamespacedName, basis time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.free(run, basis)
}

// free: no batch of run is running, and basis is not before the end of its
// last batch that sent commands. The caller holds c.mu.
func (c *commander) free(run types.NamespacedName, basis time.Time) bool {
	return !c.running[run] && !basis.Before(c.sentUntil[run])
}

// result is run's last finished batch.
func (c *commander) result(run types.NamespacedName) (commandResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res, ok := c.last[run]
	return res, ok
}

// forget drops what is kept of run (it is gone); a batch still running
// finishes on its own.
func (c *commander) forget(run types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, run)
	delete(c.queued, run)
	delete(c.sentUntil, run)
}

// targets are the builders of ranks whose pods run, for a control call.
func (r *EventBuilderRunReconciler) targets(pods map[int32]*corev1.Pod, ranks []int32) []builderapi.Builder {
	var out []builderapi.Builder
	for _, rank := range ranks {
		if pod := pods[rank]; pod != nil {
			out = append(out, builderapi.Builder{Rank: rank, URL: r.StatusURL(pod)})
		}
	}
	return out
}

// commandReason is the Event reason of a command sent.
var commandReason = map[builderapi.Command]string{
	builderapi.Configure: "BuildersConfigured",
	builderapi.Start:     "BuildersStarted",
	builderapi.Pause:     "BuildersPaused",
	builderapi.Resume:    "BuildersResumed",
	builderapi.Stop:      "BuildersStopped",
	builderapi.Reset:     "BuildersReset",
}
