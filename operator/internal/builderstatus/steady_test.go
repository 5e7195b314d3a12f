package builderstatus

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// at is the time s seconds after the Unix epoch (micro, of aggregate_test).
func at(s int) *metav1.MicroTime { return micro(time.Unix(int64(s), 0)) }

func TestSteadyChange(t *testing.T) {
	building := ebv1.EventBuilderRunStatus{
		Phase: ebv1.PhaseRunning, Epoch: 3, EventsBuilt: 1000, BytesBuilt: 64000, EventRate: 500, ThroughputGbps: "0.256",
		LastSampleTime: at(10), ObservedTime: at(10), Consumed: &ebv1.ConsumerCounts{MEPs: 1},
		Units: []ebv1.UnitStatus{{Rank: 0, State: "RUNNING", Activity: "building", Epoch: 3, NextEvent: 1000, ProgressTime: at(10),
			EventsBuilt: 1000, BytesBuilt: 64000, Consumer: &ebv1.ConsumerCounts{MEPs: 1}}},
		Ranks: []ebv1.RankStatus{{Rank: 0, Role: "Live", State: "RUNNING"}},
	}
	cases := []struct {
		name string
		edit func(*ebv1.EventBuilderRunStatus)
		want bool
	}{
		{"nothing", func(*ebv1.EventBuilderRunStatus) {}, true},
		{"counters, rates and times move on", func(s *ebv1.EventBuilderRunStatus) {
			s.EventsBuilt, s.BytesBuilt, s.EventRate, s.ThroughputGbps, s.LastSampleTime = 2000, 128000, 400, "0.205", at(12)
			s.ObservedTime = at(12)
			s.Consumed = &ebv1.ConsumerCounts{MEPs: 2}
			u := &s.Units[0]
			u.NextEvent, u.ProgressTime, u.EventsBuilt, u.BytesBuilt, u.Consumer = 2000, at(12), 2000, 128000, &ebv1.ConsumerCounts{MEPs: 2}
		}, true},
		{"only the operator looked again", func(s *ebv1.EventBuilderRunStatus) { s.ObservedTime = at(20) }, true},
		{"the set stops building", func(s *ebv1.EventBuilderRunStatus) { s.EventRate, s.LastSampleTime = 0, at(12) }, false},
		{"a phase", func(s *ebv1.EventBuilderRunStatus) { s.Phase = ebv1.PhaseDegraded }, false},
		{"a condition", func(s *ebv1.EventBuilderRunStatus) {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: ebv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "X"})
		}, false},
		{"an epoch", func(s *ebv1.EventBuilderRunStatus) { s.Epoch = 4 }, false},
		{"a unit's state", func(s *ebv1.EventBuilderRunStatus) { s.Units[0].State = "PAUSED" }, false},
		{"a unit's activity", func(s *ebv1.EventBuilderRunStatus) { s.Units[0].Activity = "connecting" }, false},
		{"a unit's lost peers", func(s *ebv1.EventBuilderRunStatus) { s.Units[0].LostPeers = []int32{1} }, false},
		{"a unit's incomplete events", func(s *ebv1.EventBuilderRunStatus) { s.Units[0].EventsIncomplete = 1 }, true},
		{"a unit more", func(s *ebv1.EventBuilderRunStatus) { s.Units = append(s.Units, ebv1.UnitStatus{Rank: 1}) }, false},
		{"a rank's state", func(s *ebv1.EventBuilderRunStatus) { s.Ranks[0].State = "ERROR" }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := building.DeepCopy()
			c.edit(b)
			if got := SteadyChange(&building, b); got != c.want {
				t.Errorf("SteadyChange = %t, want %t", got, c.want)
			}
		})
	}
}

func TestCanWait(t *testing.T) {
	written := ebv1.EventBuilderRunStatus{Phase: ebv1.PhaseRunning, EventsBuilt: 1000, EventRate: 100, LastSampleTime: at(0), ObservedTime: at(0)}
	const interval = 10 * time.Second
	cases := []struct {
		name             string
		sample, observed int
		events           int64
		interval         time.Duration
		want             bool
	}{
		{"new counters within the interval", 4, 4, 1400, interval, true},
		{"new counters at the interval", 10, 10, 2000, interval, false},
		// A resync (no poll) at the interval carries the written counters:
		// it must not take their turn, or a run whose resyncs come first
		// would never show new counters.
		{"a pass without a poll at the interval", 0, 10, 1000, interval, true},
		{"a pass without a poll at twice the interval", 0, 20, 1000, interval, false},
		{"no interval", 1, 1, 1010, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := written.DeepCopy()
			s.LastSampleTime, s.ObservedTime, s.EventsBuilt = at(c.sample), at(c.observed), c.events
			if got := CanWait(&written, s, c.interval); got != c.want {
				t.Errorf("CanWait = %v, want %v", got, c.want)
			}
		})
	}
	phase := written.DeepCopy()
	phase.Phase, phase.ObservedTime = ebv1.PhaseDegraded, at(1)
	if CanWait(&written, phase, interval) {
		t.Error("a phase change waits")
	}
}
