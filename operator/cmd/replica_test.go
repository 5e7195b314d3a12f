package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"daq.io/eventbuilder/operator/internal/testenv"
)

// A replica whose lease another replica takes over (as one does when the
// API server missed the leader's renewals) stops leading, and leads again
// in the same process, with a fresh manager, once the lease is free.
func TestAReplicaThatLosesTheLeaseLeadsAgain(t *testing.T) {
	env := testenv.StartForTest(t, filepath.Join("..", ".."))
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	const lease = "replica-test"
	led := make(chan string, 4) // each manager's lease holder identity, as it starts leading
	// The same ports for every manager, as the operator's flags give them.
	ports := testenv.FreePorts(t, 2)
	probes, metrics := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	failed := 0 // managers that could not be made
	newManager := func() (ctrl.Manager, error) {
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
			Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: metrics}, HealthProbeBindAddress: probes,
			LeaderElection: true, LeaderElectionID: lease, LeaderElectionNamespace: "default",
			LeaseDuration: ptr.To(2 * time.Second), RenewDeadline: ptr.To(1500 * time.Millisecond), RetryPeriod: ptr.To(250 * time.Millisecond),
		})
		if err != nil {
			failed++
			return nil, err
		}
		return mgr, mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { // a leader's runnable
			led <- holder(ctx, c, lease)
			<-ctx.Done()
			return nil
		}))
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ended := make(chan error, 1)
	go func() {
		ended <- runReplica(ctx, newManager, testr.New(t), 100*time.Millisecond, []string{probes, metrics})
	}()

	first := awaitLeader(t, led, ended)
	var l coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: lease}, &l); err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity, l.Spec.RenewTime = ptr.To("another-replica"), &metav1.MicroTime{Time: time.Now()}
	if err := c.Update(ctx, &l); err != nil {
		t.Fatal(err)
	}
	took := time.Now()
	second := awaitLeader(t, led, ended)
	t.Logf("led as %s, the lease taken over, led again as %s %s later", first, second, time.Since(took).Round(time.Millisecond))
	if second == first || second == "another-replica" {
		t.Errorf("leading again as %q after %q: want a fresh manager's identity", second, first)
	}
	stop()
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("replica stopped as asked with %v, want nil", err)
		}
		if failed > 0 {
			t.Errorf("%d managers could not be made (the last one's ports still taken?), want none", failed)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the replica did not stop within 30 s of its context's end")
	}
}

// A manager that cannot be made is made again; one that fails for another
// reason than a lost lease ends the replica with its error.
func TestAReplicaEndsOnAManagersOtherError(t *testing.T) {
	env := testenv.StartForTest(t, filepath.Join("..", ".."))
	made := 0
	boom := errors.New("a runnable failed")
	newManager := func() (ctrl.Manager, error) {
		if made++; made == 1 {
			return nil, errors.New("the API server is unreachable")
		}
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			return nil, err
		}
		return mgr, mgr.Add(manager.RunnableFunc(func(context.Context) error { return boom }))
	}
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := runReplica(ctx, newManager, testr.New(t), 100*time.Millisecond, nil); !errors.Is(err, boom) {
		t.Errorf("replica ended with %v, want %v", err, boom)
	}
	if made != 2 {
		t.Errorf("%d managers made, want 2 (the first failed)", made)
	}
}

func awaitLeader(t *testing.T, led <-chan string, ended <-chan error) string {
	t.Helper()
	select {
	case id := <-led:
		return id
	case err := <-ended:
		t.Fatalf("the replica ended (%v) instead of leading", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no manager led within 30 s")
	}
	return ""
}

// holder is the lease's holder identity, as a manager leads.
func holder(ctx context.Context, c client.Client, name string) string {
	var l coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &l); err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}
