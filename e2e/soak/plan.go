// Package soak decides what a soak (make soak) does and says what came of
// it: a seeded plan of faults, one at a time with a random gap, and the
// report of how long each took to be noticed and to have every unit
// building again. The harness that injects them on kind is e2e's TestSoak
// (build tag soak); this package is pure and table-tested.
package soak

import (
	"math/rand/v2"
	"time"
)

// Fault classes, as the harness injects them.
const (
	PodKilled       = "pod-killed"       // a live unit's builder pod deleted, grace 0
	BuilderStopped  = "builder-stopped"  // a builder process SIGSTOPped for Hold, then SIGCONTed
	WorkerPaused    = "worker-paused"    // a kind worker's container paused for Hold (a hung server)
	WorkerStopped   = "worker-stopped"   // a kind worker stopped for Hold, then started (a server rebooted)
	ConsumerStalled = "consumer-stalled" // a production unit's consumer SIGSTOPped for Hold (the HLT stuck)
	Partition       = "partition"        // a unit's pod cut off from its peers' on the data path for Hold
	OperatorKilled  = "operator-killed"  // the leading operator's pod deleted, grace 0
	APIServerKilled = "apiserver-killed" // kube-apiserver killed (the kubelet restarts it)
	// ServerLost: a worker that runs every CoreDNS replica killed (its
	// power lost: nothing shuts down) for Hold, then started.
	ServerLost = "server-lost"
	// LeaderServerLost: the worker of the leading operator killed for
	// Hold, then started: the standby must take over and fail over.
	LeaderServerLost = "leader-server-lost"
)

// Classes are every fault class, in the order the report lists them.
var Classes = []string{PodKilled, BuilderStopped, ConsumerStalled, Partition, WorkerPaused, WorkerStopped, ServerLost,
	LeaderServerLost, OperatorKilled, APIServerKilled}

// Fault is one fault of the plan.
type Fault struct {
	Class string
	// Gap is the wait before it, once the previous fault was recovered.
	Gap time.Duration
	// Hold is how long a fault that is healed (stopped, paused) lasts.
	Hold time.Duration
	// Pick chooses the victim among the candidates the harness finds.
	Pick int
}

// Bounds of the random parts of a fault.
const (
	MinGap  = 10 * time.Second
	MaxGap  = 40 * time.Second
	MinHold = 2 * time.Second
	MaxHold = 12 * time.Second
)

// Plan draws faults from a seed: the same seed, the same faults.
type Plan struct {
	rng *rand.Rand
}

// NewPlan starts the plan of seed.
func NewPlan(seed uint64) *Plan {
	return &Plan{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Next is the plan's next fault.
func (p *Plan) Next() Fault {
	return Fault{
		Class: Classes[p.rng.IntN(len(Classes))],
		Gap:   MinGap + time.Duration(p.rng.Int64N(int64(MaxGap-MinGap))),
		Hold:  MinHold + time.Duration(p.rng.Int64N(int64(MaxHold-MinHold))),
		Pick:  p.rng.IntN(1 << 30),
	}
}
