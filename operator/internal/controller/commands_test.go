package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// One batch at a time per run: a second submit while one runs is refused,
// a queued batch runs right after it (the last queued only), and each end
// is reported with its result.
func TestCommanderRunsOneBatchAtATime(t *testing.T) {
	run := types.NamespacedName{Namespace: "daq", Name: "r"}
	ended := make(chan commandResult, 8)
	c := newCommander(func(key types.NamespacedName, res commandResult) {
		if key != run {
			t.Errorf("ended %v, want %v", key, run)
		}
		ended <- res
	})
	release := make(chan struct{})
	blocked := func(epoch int64) func(context.Context) commandResult {
		return func(context.Context) commandResult {
			<-release
			return commandResult{kind: driveBatch, epoch: epoch, sent: true}
		}
	}
	next := func() commandResult {
		t.Helper()
		select {
		case res := <-ended:
			return res
		case <-time.After(5 * time.Second):
			t.Fatal("no batch ended within 5 s")
			return commandResult{}
		}
	}

	if !c.submit(run, blocked(1)) {
		t.Fatal("the first batch was refused")
	}
	if !c.busy(run) || c.submit(run, blocked(9)) {
		t.Fatal("a second batch was taken while the first runs")
	}
	c.queue(run, blocked(2))
	c.queue(run, func(context.Context) commandResult {
		return commandResult{kind: driveBatch, epoch: 3, err: errors.New("x")}
	})
	close(release)
	if res := next(); res.epoch != 1 {
		t.Errorf("first end: epoch %d, want 1", res.epoch)
	}
	if res := next(); res.epoch != 3 || res.err == nil || res.done.IsZero() {
		t.Errorf("second end: %+v, want the last queued batch (epoch 3, failed), timed", res)
	}
	if last, ok := c.result(run); !ok || last.epoch != 3 {
		t.Errorf("result %+v, want epoch 3's", last)
	}
	// (busy is cleared before the end is reported)
	if c.busy(run) || !c.submit(run, func(context.Context) commandResult { return commandResult{} }) {
		t.Error("the run is still busy after its batches ended")
	}
	next()
	c.forget(run)
	if _, ok := c.result(run); ok {
		t.Error("a forgotten run kept its result")
	}
}
