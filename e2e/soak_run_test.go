//go:build soak

package e2e

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"daq.io/eventbuilder/e2e/soak"
)

// TestSoak (make soak: SOAK_MINUTES, default 60; SOAK_SEED, default the
// clock) runs the production run on a Fabric with spares (readout drivers,
// builders, consumers that check every event) and a run without a Fabric,
// and injects the seeded plan's faults (e2e/soak) one at a time, each after
// every run is whole again (each unit home, each spare standing by) and a
// random gap (a worker's fault on one that runs a unit): builder pod killed, builder
// SIGSTOPped and SIGCONTed, consumer stalled, a unit partitioned from its
// peers, worker paused, worker stopped and started, a worker killed with
// every CoreDNS replica on it, the leading operator's worker killed,
// operator pod killed, API server killed. Nothing in the product knows it
// is a soak. It samples both runs every 500 ms, logs each fault with its
// class and the seed, and prints (and writes to $E2E_ARTIFACTS/soak) the
// report: per class how long to detection and to every unit building
// again, each run's building share, and anything that must never happen.
func TestSoak(t *testing.T) {
	minutes, seed := soakSettings(t)
	length := time.Duration(minutes) * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), length+30*time.Minute)
	defer cancel()
	t.Logf("soak: %s, seed %d (SOAK_SEED=%d repeats it)", length, seed, seed)

	s := startSoak(ctx, t, seed, strconv.FormatUint(seed, 10))
	defer s.finish()
	plan := soak.NewPlan(seed)
	for i := 1; time.Since(s.start) < length; i++ {
		s.fault(i, s.towardUnits(plan.Next()))
		s.whole()
	}
}

// soakSettings reads SOAK_MINUTES and SOAK_SEED.
func soakSettings(t *testing.T) (int, uint64) {
	minutes, seed := 60, uint64(time.Now().UnixNano())
	if v := os.Getenv("SOAK_MINUTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SOAK_MINUTES=%q: expected a whole number of minutes, 1 or more", v)
		}
		minutes = n
	}
	if v := os.Getenv("SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q: expected an unsigned integer (a report names the seed it ran with)", v)
		}
		seed = n
	}
	return minutes, seed
}
