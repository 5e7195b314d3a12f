package main

import (
	"context"
	"net"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// runReplica runs the operator's managers one after the other until ctx
// ends. A replica that loses the leader lease (the API server did not
// answer its renewals within --leader-elect-renew-deadline: a control
// plane loaded by a worker's reboot, seen in the soak) campaigns again at
// once in this process, with a fresh manager, instead of exiting: an exit
// costs a container restart, the kubelet's back-off once it has happened a
// few times, and a cache sync, while the other replica may have failed the
// same way and no one leads. A manager that cannot be made (the API server
// unreachable from a node that just rebooted) is retried every retry.
// Any other error ends the replica. listens are the addresses the managers
// serve on (probes, metrics, console).
func runReplica(ctx context.Context, newManager func() (ctrl.Manager, error), log logr.Logger, retry time.Duration, listens []string) error {
	for {
		mgr, err := newManager()
		if err != nil {
			log.Error(err, "unable to create manager; retrying", "in", retry)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(retry):
				continue
			}
		}
		log.Info("starting manager")
		err = mgr.Start(ctx)
		if ctx.Err() != nil || !leaseLost(err) {
			return err
		}
		log.Info("lost the leader lease: campaigning again with a fresh manager", "reason", err.Error())
		// A manager that lost its lease returns without waiting for its
		// servers to stop (there is no graceful shutdown then).
		if err := awaitFree(ctx, listens, 30*time.Second); err != nil {
			log.Error(err, "the last manager's servers still hold their ports; going on")
		}
	}
}

// awaitFree waits until every address of listens can be listened on.
func awaitFree(ctx context.Context, listens []string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for _, addr := range listens {
		for {
			l, err := net.Listen("tcp", addr)
			if err == nil {
				l.Close()
				break
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// leaseLost is the error controller-runtime's manager ends with when
// client-go's elector stops leading (pkg/manager/internal.go,
// OnStoppedLeading); TestAReplicaThatLosesTheLeaseLeadsAgain holds it to
// that.
func leaseLost(err error) bool {
	return err != nil && strings.Contains(err.Error(), "leader election lost")
}
