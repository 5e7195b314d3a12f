package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"daq.io/eventbuilder/operator/internal/planner"
)

// Control calls are sent as batches, one per run at a time; for now the
// reconcile that hands a batch over waits for it (submit and queue run it
// in the caller's goroutine): run in a goroutine of its own, as polls are,
// batches sent a command twice now and then in the controller tests (a
// configure of the same epoch), which is not understood yet. The design
// below is the one the goroutine is meant for. Each run's
// command batch (configure and the commands spec.state asks for, a reset
// before a rejoin, the stop before a resize) runs in a goroutine of its
// own, one batch at a time per run. A reconcile decides on a poll taken
// since the run's last batch, hands the batch over and goes on; the
// batch's end marks the polls begun before it stale and polls at once
// (builderpoll.Changed), which wakes the run with what the commands did. A
// reconcile that finds the run's batch still running sends nothing: the
// batch's end brings a new poll and a new decision. A builder that does
// not answer a command costs its run's batch the control timeout, never a
// reconcile worker.

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
}

// newCommander calls ended (from the batch's goroutine) after each batch.
func newCommander(ended func(types.NamespacedName, commandResult)) *commander {
	ctx, stop := context.WithCancel(context.Background())
	return &commander{ctx: ctx, stop: stop, ended: ended, running: map[types.NamespacedName]bool{},
		queued: map[types.NamespacedName]func(context.Context) commandResult{}, last: map[types.NamespacedName]commandResult{}}
}

// Start runs until ctx ends, then cancels the batches still running (a
// manager Runnable).
func (c *commander) Start(ctx context.Context) error {
	<-ctx.Done()
	c.stop()
	return nil
}

// submit runs batch for run unless one of run's batches is running; it
// says whether it did.
func (c *commander) submit(run types.NamespacedName, batch func(context.Context) commandResult) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running[run] {
		return false
	}
	c.running[run] = true
	c.mu.Unlock()
	c.run(run, batch)
	c.mu.Lock()
	return true
}

// queue runs batch for run now, or right after the batch running, in place
// of any queued before it: a new rank table must reach the builders without
// waiting for a poll (a failover), whatever was being sent.
func (c *commander) queue(run types.NamespacedName, batch func(context.Context) commandResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running[run] {
		c.queued[run] = batch
		return
	}
	c.running[run] = true
	c.mu.Unlock()
	c.run(run, batch)
	c.mu.Lock()
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
		batch = c.queued[run]
		delete(c.queued, run)
		if batch == nil {
			delete(c.running, run)
		}
		c.mu.Unlock()
		c.ended(run, res)
	}
}

// busy says whether one of run's batches is running.
func (c *commander) busy(run types.NamespacedName) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running[run]
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
}

// liveRanks are the live ranks of t, in rank order.
func liveRanks(t planner.RankTable) []int32 {
	var out []int32
	for _, rk := range t.Ranks {
		if rk.Role == planner.Live {
			out = append(out, int32(rk.Rank))
		}
	}
	return out
}
