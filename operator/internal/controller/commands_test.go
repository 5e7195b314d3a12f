package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Batches run in the background one at a time per run: a batch handed
// over while one runs is refused (submit) or follows it (queue); a batch
// decided on a poll begun before the last batch that sent commands ended
// is refused, whenever it is handed over.
func TestCommanderRunsOneBatchAtATimeOnPollsAfterTheLast(t *testing.T) {
	run := types.NamespacedName{Namespace: "daq", Name: "r"}
	ended := make(chan commandResult, 4)
	c := newCommander(func(key types.NamespacedName, res commandResult) {
		if key != run {
			t.Errorf("ended %v, want %v", key, run)
		}
		ended <- res
	})
	defer c.stop()
	wait := func() commandResult {
		t.Helper()
		select {
		case res := <-ended:
			return res
		case <-time.After(10 * time.Second):
			t.Fatal("no batch ended within 10 s")
			return commandResult{}
		}
	}

	release := make(chan struct{})
	pollBefore := time.Now()
	if !c.submit(run, pollBefore, func(context.Context) commandResult {
		<-release
		return commandResult{kind: driveBatch, epoch: 1, sent: true}
	}) {
		t.Fatal("the first batch was refused")
	}
	if c.accepts(run, time.Now()) || c.submit(run, time.Now(), func(context.Context) commandResult {
		t.Error("a batch handed over while another ran was run")
		return commandResult{}
	}) {
		t.Error("a batch was accepted while another ran")
	}
	c.queue(run, func(context.Context) commandResult {
		return commandResult{kind: driveBatch, epoch: 2, err: errors.New("x")}
	})
	close(release)
	if first, second := wait(), wait(); first.epoch != 1 || second.epoch != 2 || second.done.IsZero() {
		t.Fatalf("ended epochs %d then %d (done %v), want 1 then 2, timed", first.epoch, second.epoch, second.done)
	}
	if last, ok := c.result(run); !ok || last.epoch != 2 || last.err == nil {
		t.Errorf("result %+v, want epoch 2's failure", last)
	}

	// The first batch sent commands: a poll begun before it ended is stale.
	if c.accepts(run, pollBefore) || c.submit(run, pollBefore, func(context.Context) commandResult {
		t.Error("a batch decided on a stale poll was run")
		return commandResult{}
	}) {
		t.Error("a batch decided on a poll begun before the last commands was accepted")
	}
	if !c.submit(run, time.Now(), func(context.Context) commandResult { return commandResult{kind: resetBatch} }) {
		t.Error("a batch decided on a poll begun after the last commands was refused")
	}
	if res := wait(); res.kind != resetBatch {
		t.Errorf("ended %+v, want the reset batch", res)
	}

	c.forget(run)
	if _, ok := c.result(run); ok {
		t.Error("a forgotten run kept its result")
	}
}
