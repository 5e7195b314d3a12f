package builderstatus

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// SteadyChange says whether status b differs from a only as a steady run's
// status changes on every poll: event and byte counters, rates, the
// sample and observed times, each unit's counters, next event and progress time, and the
// consumers' counts, while the run goes on building (or goes on standing
// still: the event rate stays nonzero, or zero). Anything else, a phase,
// a condition, a unit's state, epoch, activity or lost peers, a rank, the
// set starting or stopping to build, is a change worth writing at once.
// At LHCb size a write is about a hundred kilobytes, and the counters go
// to Prometheus from every builder anyway: the operator writes steady
// changes only now and then (EventBuilderRunReconciler.StatusCountersInterval).
func SteadyChange(a, b *ebv1.EventBuilderRunStatus) bool {
	if (a.EventRate == 0) != (b.EventRate == 0) || len(a.Units) != len(b.Units) {
		return false
	}
	return equality.Semantic.DeepEqual(withoutCounters(a), withoutCounters(b))
}

// withoutCounters is a copy of s without what SteadyChange lets change.
func withoutCounters(s *ebv1.EventBuilderRunStatus) *ebv1.EventBuilderRunStatus {
	c := s.DeepCopy()
	c.EventsBuilt, c.EventsIncomplete, c.EventsDropped, c.BytesBuilt = 0, 0, 0, 0
	c.EventRate, c.ThroughputGbps, c.LastSampleTime, c.ObservedTime, c.Consumed = 0, "", nil, nil, nil
	for i := range c.Units {
		u := &c.Units[i]
		u.EventsBuilt, u.EventsIncomplete, u.EventsDropped, u.BytesBuilt = 0, 0, 0, 0
		u.NextEvent, u.ProgressTime, u.Consumer = 0, nil, nil
	}
	return c
}

// CanWait says whether status, computed after written (the status last
// written), may go unwritten: a steady change (SteadyChange) whose counters
// were sampled less than interval after the written ones, and whose
// observedTime is less than twice interval after the written one. Counters
// are due by their sample time, not by the pass: a pass without a poll
// (a resync) carries the old counters, and must not take their turn. The
// heartbeat alone is due at twice the interval, so that a run whose
// builders answer is written once per interval, with both. interval <= 0:
// nothing waits.
func CanWait(written, status *ebv1.EventBuilderRunStatus, interval time.Duration) bool {
	if interval <= 0 || written.ObservedTime == nil || status.ObservedTime == nil || !SteadyChange(written, status) {
		return false
	}
	if status.ObservedTime.Sub(written.ObservedTime.Time) >= 2*interval {
		return false
	}
	if s, w := status.LastSampleTime, written.LastSampleTime; s != nil && (w == nil || s.Sub(w.Time) >= interval) {
		return false
	}
	return true
}
