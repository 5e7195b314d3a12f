// Package lifecycle decides, purely, which control commands a run's
// builders need: given each builder's last report (its state and the
// epochs it holds), the rank table's epoch and the run's spec.state. The
// reconciler polls, calls these, and sends what they say with
// internal/builderclient.
//
// The rules (builder/docs/control-api.md has the state machine):
//
//   - configure every builder that answers, is not in ERROR, and holds an
//     older table than the published one (neither its epoch nor its
//     pending epoch is the table's). A running builder switches to the new
//     table at a cycle boundary together with the others, without
//     restarting; that is how a failover reaches the survivors and the
//     spare that takes a unit over.
//   - then drive each builder to spec.state: Running starts READY ones
//     (once every live builder holds the table, so the set starts
//     together; warm spares start as standby dummies) and resumes PAUSED
//     ones; Paused pauses RUNNING ones; Stopped stops RUNNING and PAUSED
//     ones. Builders in ERROR are left alone: the run's phase says so.
package lifecycle

import (
	"slices"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
)

// Builder is one builder of the run's table: a live or spare rank whose
// pod runs.
type Builder struct {
	Rank int32
	// Live: the rank is live in the table; otherwise it is a warm spare.
	Live bool
	// Report is the builder's last status; nil when it did not answer.
	Report *builderapi.Report
}

// Step is one command for a set of ranks.
type Step struct {
	Command builderapi.Command
	Ranks   []int32
}

// Holds: the builder has accepted the table of epoch (it runs it, or will
// switch to it) and is in a state that runs tables.
func Holds(r *builderapi.Report, epoch int64) bool {
	if r == nil || r.State == builderapi.StateError || r.State == builderapi.StateNotReady {
		return false
	}
	return r.Epoch == epoch || r.PendingEpoch == epoch
}

// ToConfigure are the ranks to configure with the table of epoch: those
// that answer, are not in ERROR, and hold an older table. A builder that
// holds a newer table than the operator's is not configured (it would
// refuse: epochs only go forward).
func ToConfigure(epoch int64, builders []Builder) []int32 {
	var out []int32
	for _, b := range builders {
		r := b.Report
		if r == nil || r.State == builderapi.StateError {
			continue
		}
		if r.State == builderapi.StateNotReady || r.HeldEpoch() < epoch {
			out = append(out, b.Rank)
		}
	}
	return out
}

// Configured says whether every live builder holds the table of epoch,
// and lists the live ranks that do not (or did not answer).
func Configured(epoch int64, builders []Builder, live []int32) (bool, []int32) {
	held := map[int32]bool{}
	for _, b := range builders {
		if b.Live && Holds(b.Report, epoch) {
			held[b.Rank] = true
		}
	}
	var missing []int32
	for _, r := range live {
		if !held[r] {
			missing = append(missing, r)
		}
	}
	return len(missing) == 0, missing
}

// Drive decides the state commands that take the builders to desired,
// from their reports as they are once configured. live lists every live
// rank of the table: a READY builder is started only once all of them
// hold the table of epoch, so that the set starts together.
func Drive(desired ebv1.RunState, epoch int64, builders []Builder, live []int32) []Step {
	if desired == "" {
		desired = ebv1.StateRunning
	}
	allHeld, _ := Configured(epoch, builders, live)
	var start, resume, pause, stop []int32
	for _, b := range builders {
		r := b.Report
		if r == nil || !Holds(r, epoch) {
			continue // not configured yet, in ERROR, or not answering
		}
		switch desired {
		case ebv1.StateRunning:
			switch r.State {
			case builderapi.StateReady:
				if allHeld {
					start = append(start, b.Rank)
				}
			case builderapi.StatePaused:
				resume = append(resume, b.Rank)
			}
		case ebv1.StatePaused:
			if r.State == builderapi.StateRunning {
				pause = append(pause, b.Rank)
			}
		case ebv1.StateStopped:
			if r.State == builderapi.StateRunning || r.State == builderapi.StatePaused {
				stop = append(stop, b.Rank)
			}
		}
	}
	var steps []Step
	for _, s := range []Step{{builderapi.Start, start}, {builderapi.Resume, resume}, {builderapi.Pause, pause}, {builderapi.Stop, stop}} {
		if len(s.Ranks) > 0 {
			slices.Sort(s.Ranks)
			steps = append(steps, s)
		}
	}
	return steps
}

// Resize says what stands between a set and a table of n ranks. A running
// builder switches tables at a cycle boundary only between tables of the
// same size (control-api.md, "configure"): a table of another number of
// ranks reaches the set stopped. So before such a table is published the
// set is stopped together (Stop: the builders still in RUNNING or PAUSED
// under a table of another size), and the publish waits while any builder
// is still ending its session (Ending: READY, its activity still building
// or paused: a stop takes effect at the end of the current cycle). Builders
// that do not answer are not waited for: a dead one holds no session.
type Resize struct {
	Stop   []int32
	Ending []int32
}

// Ready says whether a table of the new size can be published now.
func (r Resize) Ready() bool { return len(r.Stop) == 0 && len(r.Ending) == 0 }

// ResizeTo decides Resize for a table of n ranks from the builders' reports.
func ResizeTo(n int, builders []Builder) Resize {
	var out Resize
	for _, b := range builders {
		r := b.Report
		if r == nil || r.Units == 0 || int(r.Units) == n {
			continue
		}
		switch {
		case r.State == builderapi.StateRunning || r.State == builderapi.StatePaused:
			out.Stop = append(out.Stop, b.Rank)
		case r.Activity == builderapi.ActivityBuilding || r.Activity == builderapi.ActivityPaused:
			out.Ending = append(out.Ending, b.Rank)
		}
	}
	slices.Sort(out.Stop)
	slices.Sort(out.Ending)
	return out
}
