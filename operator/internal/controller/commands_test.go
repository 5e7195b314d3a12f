package controller

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// A batch runs in the caller for now (commands.go): it is reported when it
// ends, its result is kept, and a run is never busy between batches.
func TestCommanderRunsABatchAndKeepsItsResult(t *testing.T) {
	run := types.NamespacedName{Namespace: "daq", Name: "r"}
	var ended []commandResult
	c := newCommander(func(key types.NamespacedName, res commandResult) {
		if key != run {
			t.Errorf("ended %v, want %v", key, run)
		}
		ended = append(ended, res)
	})
	if !c.submit(run, func(context.Context) commandResult { return commandResult{kind: driveBatch, epoch: 1, sent: true} }) {
		t.Fatal("the batch was refused")
	}
	c.queue(run, func(context.Context) commandResult { return commandResult{kind: driveBatch, epoch: 2, err: errors.New("x")} })
	if len(ended) != 2 || ended[0].epoch != 1 || ended[1].epoch != 2 || ended[1].done.IsZero() {
		t.Fatalf("ended %+v, want epochs 1 then 2, timed", ended)
	}
	if last, ok := c.result(run); !ok || last.epoch != 2 || last.err == nil || c.busy(run) {
		t.Errorf("result %+v (busy %t), want epoch 2's failure and not busy", last, c.busy(run))
	}
	c.forget(run)
	if _, ok := c.result(run); ok {
		t.Error("a forgotten run kept its result")
	}
}
