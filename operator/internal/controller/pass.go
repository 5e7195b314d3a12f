package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// runPass is one reconcile of one run. Its steps, one file each
// (step_*.go), run one after the other (reconcile): each takes what the
// steps before it found and returns what it found or did as a type
// declared here, so that a pass's data flow reads in one place. The
// decisions are runplan's and lifecycle's pure functions; the steps only
// gather their inputs and carry out their answers. A step calls its own
// helpers and the shared files' (status, records, publish, pods, polls,
// commands), never another step's.
type runPass struct {
	r   *EventBuilderRunReconciler
	key types.NamespacedName
	now time.Time // when whatever this reconcile acts on was observed
}

// A step's verdict: go on to the next step, or end the reconcile with
// result and err.
type verdict struct {
	end    bool
	result ctrl.Result
	err    error
}

var goOn = verdict{}

func endWith(result ctrl.Result, err error) verdict {
	return verdict{end: true, result: result, err: err}
}

// endWithStatus ends the reconcile once the status says what stopped it.
// Watches bring the run back when that changes; the resync keeps its
// observedTime current meanwhile (a run with no pods has no polls).
func (p *runPass) endWithStatus(ctx context.Context, orig, run *ebv1.EventBuilderRun) verdict {
	return endWith(ctrl.Result{RequeueAfter: resyncPolls * p.r.PollInterval}, p.r.patchStatus(ctx, orig, run))
}

// runTable is the run's rank table as a step leaves it.
type runTable struct {
	cm        *corev1.ConfigMap // the table's; nil before the first plan
	table     planner.RankTable
	published bool // by this pass
}

// loadedRun is the run, and on a Fabric the Fabric and the nodes, as the
// pass found them (load). run's status is what the pass writes; orig is
// the run as read, for the patch.
type loadedRun struct {
	run, orig *ebv1.EventBuilderRun

	fabric    *planner.Fabric // as its nodes are; nil for a run without one
	fabricKey string          // the Fabric's UID and generation: an edit replans
	nodes     []corev1.Node
	health    runplan.Nodes
	cordoned  map[string]bool
	graceLeft time.Duration // until a node in its NotReady grace period fails
}

// observedRun is what the run is made of now (observe): its pods, its rank
// table and the records beside it, and the builders' poll to decide on.
type observedRun struct {
	pods map[int32]*corev1.Pod
	runTable
	attempts runplan.RejoinAttempts
	given    runplan.GivenAddresses

	// The run's Fabric less the spares whose pods the kubelet refused,
	// and its endpoints (nil and empty for a run without one).
	fabric    *planner.Fabric
	endpoints map[string]planner.Endpoint

	poll    *builderstatus.Poll // a poll to decide on; nil for none
	pollDue bool                // a poll came that no reconcile has seen yet
}

// plannedRun is the table the run goes on under (plan), and what deciding
// it found.
type plannedRun struct {
	runTable
	attempts runplan.RejoinAttempts
	// poll is the one decided on: observe's, or the latest when a rejoin's
	// back-off ended.
	poll          *builderstatus.Poll
	failedRejoins []int // ranks whose last rejoin this reconcile found did not hold
	stopped       bool  // failed with no spare left under failurePolicy Stop
}

// placedRun is the run's table and pods as placePods leaves them.
type placedRun struct {
	runTable                    // as plan left it, or readdressed
	waiting  []runplan.Deferral // rejoins that wait out their back-off
	held     map[int32]bool     // ranks whose old pods build on until the set switched
}

// drivenRun is what driving the builders found.
type drivenRun struct {
	controlErr error // what the last drive of this table met
}

// switchHold bounds how long a planned move's old pods wait for the set to
// switch to the table that moved them (runplan.HeldForSwitch): the
// configure, a cycle boundary and the joiners' connections take seconds.
const switchHold = 30 * time.Second

// controlToken is the builders' bearer token, from the run's control Secret.
func controlToken(secret *corev1.Secret) string {
	return string(secret.Data[builderpod.ControlTokenKey])
}
