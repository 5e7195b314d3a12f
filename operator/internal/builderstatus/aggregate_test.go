package builderstatus

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"daq.io/eventbuilder/operator/internal/builderapi"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func micro(t time.Time) *metav1.MicroTime { m := metav1.NewMicroTime(t); return &m }

func running(events, bytes int64) builderapi.Report {
	return builderapi.Report{State: builderapi.StateRunning, EventsBuilt: events, BytesBuilt: bytes}
}

// units returns n ready units with pods.
func units(n int) []Unit {
	us := make([]Unit, n)
	for i := range us {
		us[i] = Unit{Rank: int32(i), Pod: "p", Node: fmt.Sprintf("n%d", i), Ready: true}
	}
	return us
}

func TestAggregate(t *testing.T) {
	// Two ranks that answered a poll at t0.
	prev := ebv1.EventBuilderRunStatus{
		EventRate:      7,
		ThroughputGbps: "0.500",
		LastSampleTime: micro(t0),
		Units: []ebv1.UnitStatus{
			{Rank: 0, Pod: "p", Ready: true, State: builderapi.StateRunning, EventsBuilt: 1000, BytesBuilt: 1e9},
			{Rank: 1, Pod: "p", Ready: true, State: builderapi.StateRunning, EventsBuilt: 2000, BytesBuilt: 2e9},
		},
	}

	type want struct {
		phase              ebv1.RunPhase
		reason             string
		ready              int32
		events, incomplete int64
		rate               int64
		gbps               string
		sample             *metav1.MicroTime
		states             []string
	}
	for _, tc := range []struct {
		name  string
		prev  ebv1.EventBuilderRunStatus
		units []Unit
		poll  *Poll
		want  want
	}{
		{
			name:  "first poll: totals but no rate yet",
			prev:  ebv1.EventBuilderRunStatus{},
			units: units(2),
			poll:  &Poll{Time: t0, Reports: map[int32]builderapi.Report{0: running(10, 100), 1: running(20, 200)}},
			want:  want{ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning, 2, 30, 0, 0, "0.000", micro(t0), []string{"RUNNING", "RUNNING"}},
		},
		{
			name:  "rate and throughput from the deltas over two seconds",
			prev:  prev,
			units: units(2),
			poll: &Poll{Time: t0.Add(2 * time.Second), Reports: map[int32]builderapi.Report{
				0: running(1000+3000, 1e9+2e9),
				1: running(2000+5000, 2e9+3e9),
			}},
			// 8000 events / 2 s; 5e9 B * 8 / 2 s = 20 Gb/s.
			want: want{ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning, 2, 11000, 0, 4000, "20.000", micro(t0.Add(2 * time.Second)), []string{"RUNNING", "RUNNING"}},
		},
		{
			name:  "restarted builder counts from zero",
			prev:  prev,
			units: units(2),
			poll: &Poll{Time: t0.Add(time.Second), Reports: map[int32]builderapi.Report{
				0: running(1100, 1e9),
				1: running(50, 0), // was 2000
			}},
			want: want{ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning, 2, 1150, 0, 150, "0.000", micro(t0.Add(time.Second)), []string{"RUNNING", "RUNNING"}},
		},
		{
			name:  "silent builder keeps its last counters, adds no rate, and blocks Running",
			prev:  prev,
			units: units(2),
			poll:  &Poll{Time: t0.Add(time.Second), Reports: map[int32]builderapi.Report{0: running(1500, 1e9)}},
			want:  want{ebv1.PhasePending, ebv1.ReasonUnitsPending, 2, 3500, 0, 500, "0.000", micro(t0.Add(time.Second)), []string{"RUNNING", ""}},
		},
		{
			name: "builder back after a silent poll re-bases instead of spiking",
			prev: func() ebv1.EventBuilderRunStatus {
				p := *prev.DeepCopy()
				p.Units[1].State = ""
				return p
			}(),
			units: units(2),
			poll: &Poll{Time: t0.Add(time.Second), Reports: map[int32]builderapi.Report{
				0: running(1100, 1e9),
				1: running(9000, 2e9),
			}},
			want: want{ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning, 2, 10100, 0, 100, "0.000", micro(t0.Add(time.Second)), []string{"RUNNING", "RUNNING"}},
		},
		{
			name:  "nobody answers: sample time stays, rate drops to zero",
			prev:  prev,
			units: units(2),
			poll:  &Poll{Time: t0.Add(time.Second), Reports: map[int32]builderapi.Report{}},
			want:  want{ebv1.PhasePending, ebv1.ReasonUnitsPending, 2, 3000, 0, 0, "0.000", micro(t0), []string{"", ""}},
		},
		{
			name:  "not polled: states, counters and rates carry over, readiness is fresh",
			prev:  prev,
			units: []Unit{{Rank: 0, Pod: "p", Ready: true}, {Rank: 1, Pod: "p", Ready: false}},
			poll:  nil,
			want:  want{ebv1.PhasePending, ebv1.ReasonUnitsPending, 1, 3000, 0, 7, "0.500", micro(t0), []string{"RUNNING", "RUNNING"}},
		},
		{
			name:  "a builder in ERROR fails the run",
			prev:  prev,
			units: units(2),
			poll: &Poll{Time: t0.Add(time.Second), Reports: map[int32]builderapi.Report{
				0: running(1000, 1e9),
				1: {State: builderapi.StateError, EventsBuilt: 2000, EventsIncomplete: 3, BytesBuilt: 2e9, LastError: "peer 0 hung up"},
			}},
			want: want{ebv1.PhaseFailed, ebv1.ReasonBuilderError, 2, 3000, 3, 0, "0.000", micro(t0.Add(time.Second)), []string{"RUNNING", "ERROR"}},
		},
		{
			name:  "scale up: new rank without pod is pending",
			prev:  prev,
			units: append(units(2), Unit{Rank: 2}),
			poll:  nil,
			want:  want{ebv1.PhasePending, ebv1.ReasonUnitsPending, 2, 3000, 0, 7, "0.500", micro(t0), []string{"RUNNING", "RUNNING", ""}},
		},
		{
			name:  "scale down drops the rows of removed ranks",
			prev:  prev,
			units: units(1),
			poll:  nil,
			want:  want{ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning, 1, 1000, 0, 7, "0.500", micro(t0), []string{"RUNNING"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Aggregate(&tc.prev, tc.units, tc.poll, ebv1.StateRunning, stallAfter)
			var states []string
			for i, u := range s.Units {
				if u.Rank != int32(i) {
					t.Errorf("row %d has rank %d", i, u.Rank)
				}
				states = append(states, u.State)
			}
			if s.Phase == ebv1.PhaseFailed && !strings.Contains(s.Message, "rank 1: peer 0 hung up") {
				t.Errorf("message %q does not carry the failing builder's error", s.Message)
			}
			got := want{s.Phase, s.Reason, s.ReadyUnits, s.EventsBuilt, s.EventsIncomplete, s.EventRate, s.ThroughputGbps, s.LastSampleTime, states}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Aggregate()\n got %+v\nwant %+v\nmessage: %s", got, tc.want, s.Message)
			}
		})
	}
}

func TestAggregateDoesNotModifyPrev(t *testing.T) {
	prev := ebv1.EventBuilderRunStatus{Units: []ebv1.UnitStatus{{Rank: 0, State: builderapi.StateRunning, EventsBuilt: 1}}}
	before := prev.DeepCopy()
	Aggregate(&prev, units(1), &Poll{Time: t0, Reports: map[int32]builderapi.Report{0: running(5, 5)}}, ebv1.StateRunning, stallAfter)
	if !reflect.DeepEqual(&prev, before) {
		t.Errorf("prev changed: %+v, was %+v", prev, *before)
	}
}

// events.k8s.io refuses notes over 1024 characters: a run of hundreds of
// failed builders must still produce a short message.
func TestBuilderErrorMessageIsBounded(t *testing.T) {
	reports := map[int32]builderapi.Report{}
	for r := range int32(300) {
		reports[r] = builderapi.Report{State: builderapi.StateError, LastError: strings.Repeat("x", 2000)}
	}
	s := Aggregate(&ebv1.EventBuilderRunStatus{}, units(300), &Poll{Time: t0, Reports: reports}, ebv1.StateRunning, stallAfter)
	if s.Reason != ebv1.ReasonBuilderError || len(s.Message) > 600 || !strings.Contains(s.Message, "0, 1, 2, 3, 4, and 295 more") {
		t.Errorf("message (%d chars): %.200s", len(s.Message), s.Message)
	}
}

// spec.state decides which builder states make the phase.
func TestAggregateDesiredState(t *testing.T) {
	poll := func(states ...string) *Poll {
		p := &Poll{Time: t0, Reports: map[int32]builderapi.Report{}}
		for i, s := range states {
			if s != "" {
				p.Reports[int32(i)] = builderapi.Report{State: s}
			}
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		desired ebv1.RunState
		poll    *Poll
		phase   ebv1.RunPhase
		reason  string
	}{
		{"running", ebv1.StateRunning, poll(builderapi.StateRunning, builderapi.StateRunning), ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning},
		{"running asked, one PAUSED", ebv1.StateRunning, poll(builderapi.StateRunning, builderapi.StatePaused), ebv1.PhasePending, ebv1.ReasonUnitsPending},
		{"paused", ebv1.StatePaused, poll(builderapi.StatePaused, builderapi.StatePaused), ebv1.PhasePaused, ebv1.ReasonRunPaused},
		{"paused, one never started", ebv1.StatePaused, poll(builderapi.StatePaused, builderapi.StateReady), ebv1.PhasePaused, ebv1.ReasonRunPaused},
		{"pausing", ebv1.StatePaused, poll(builderapi.StatePaused, builderapi.StateRunning), ebv1.PhasePending, ebv1.ReasonUnitsPending},
		{"paused asked, one silent", ebv1.StatePaused, poll(builderapi.StatePaused, ""), ebv1.PhasePending, ebv1.ReasonUnitsPending},
		{"stopped", ebv1.StateStopped, poll(builderapi.StateReady, builderapi.StateNotReady), ebv1.PhaseStopped, ebv1.ReasonRunStopped},
		{"stopping", ebv1.StateStopped, poll(builderapi.StateReady, builderapi.StatePaused), ebv1.PhasePending, ebv1.ReasonUnitsPending},
		{"ERROR fails whatever is asked", ebv1.StateStopped, poll(builderapi.StateReady, builderapi.StateError), ebv1.PhaseFailed, ebv1.ReasonBuilderError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Aggregate(&ebv1.EventBuilderRunStatus{}, units(2), tc.poll, tc.desired, stallAfter)
			if s.Phase != tc.phase || s.Reason != tc.reason {
				t.Errorf("phase %s reason %s (%s), want %s %s", s.Phase, s.Reason, s.Message, tc.phase, tc.reason)
			}
		})
	}
}

// Epochs, lost peers and dropped events reach the unit rows and totals.
func TestAggregateControlFields(t *testing.T) {
	s := Aggregate(&ebv1.EventBuilderRunStatus{}, units(2), &Poll{Time: t0, Reports: map[int32]builderapi.Report{
		0: {State: builderapi.StateRunning, Epoch: 2, PendingEpoch: 3, EventsDropped: 5, LostPeers: []int32{1}},
		1: {State: builderapi.StateRunning, Epoch: 3, EventsDropped: 7},
	}}, ebv1.StateRunning, stallAfter)
	u := s.Units
	if u[0].Epoch != 2 || u[0].PendingEpoch != 3 || !reflect.DeepEqual(u[0].LostPeers, []int32{1}) || u[1].LostPeers != nil ||
		u[1].Epoch != 3 || s.EventsDropped != 12 {
		t.Errorf("units %+v, dropped %d", u, s.EventsDropped)
	}
}

// Units whose MEP rings' consumers report are summed into consumed; a run
// where none reports has none.
func TestAggregateConsumerCounts(t *testing.T) {
	s := Aggregate(&ebv1.EventBuilderRunStatus{}, units(3), &Poll{Time: t0, Reports: map[int32]builderapi.Report{
		0: {State: builderapi.StateRunning, Consumer: &builderapi.Consumer{MEPs: 3, EventsComplete: 3000, EventsIncomplete: 1, Rejected: 2}},
		1: {State: builderapi.StateRunning, Consumer: &builderapi.Consumer{MEPs: 2, EventsComplete: 2000}},
		2: {State: builderapi.StateRunning},
	}}, ebv1.StateRunning, stallAfter)
	want := ebv1.ConsumerCounts{MEPs: 5, EventsComplete: 5000, EventsIncomplete: 1, Rejected: 2}
	if s.Consumed == nil || *s.Consumed != want || s.Units[2].Consumer != nil || s.Units[1].Consumer.MEPs != 2 {
		t.Errorf("consumed %+v, units %+v", s.Consumed, s.Units)
	}
	none := Aggregate(&ebv1.EventBuilderRunStatus{}, units(1), &Poll{Time: t0, Reports: map[int32]builderapi.Report{0: {State: builderapi.StateRunning}}},
		ebv1.StateRunning, stallAfter)
	if none.Consumed != nil {
		t.Errorf("consumed %+v without a consumer", none.Consumed)
	}
}

// A row of unanswered polls starts at the first and grows with each; an
// answer, or a pod no longer asked, ends it; a pod that never answered
// (its builder still starting) has none, and a new pod on the rank starts
// afresh.
func TestSilencesAfterPolls(t *testing.T) {
	start := time.Unix(100, 0)
	pods := map[int32]string{1: "a", 2: "b", 3: "c", 4: "d"}
	poll := func(at time.Duration, pods map[int32]string, unanswered ...int32) *Poll {
		p := &Poll{Time: start.Add(at), Pods: pods, Reports: map[int32]builderapi.Report{}}
		for rank := range pods {
			if !slices.Contains(unanswered, rank) {
				p.Reports[rank] = builderapi.Report{}
			}
		}
		return p
	}
	s := Silences{}.After(poll(0, pods, 4), nil)                                                     // d has never answered
	s = s.After(poll(time.Second, pods, 1, 2, 4), nil)                                               // a and b fall silent
	s = s.After(poll(2*time.Second, pods, 1, 3, 4), nil)                                             // b answers again, c falls silent
	s = s.After(poll(3*time.Second, map[int32]string{1: "a", 2: "b", 3: "e", 4: "d"}, 1, 3, 4), nil) // rank 3 has a new pod
	want := map[int32]Silence{1: {"a", start.Add(time.Second), 3}}
	if len(s.Rows) != len(want) {
		t.Fatalf("rows %+v, want %+v", s.Rows, want)
	}
	for rank, w := range want {
		if got := s.Rows[rank]; got.Pod != w.Pod || !got.Since.Equal(w.Since) || got.Polls != w.Polls {
			t.Errorf("rank %d: %+v, want %+v", rank, got, w)
		}
	}
	if s.Heard["d"] || s.Heard["e"] || s.Heard["c"] {
		t.Errorf("heard %v: c is gone, d and e never answered", s.Heard)
	}
}

// An operator that has heard no builder yet (a new leader) counts the
// silence of a Ready pod from its first poll: the kubelet's readiness
// probe heard its builder. A pod that is not Ready and never answered is
// still starting, not silent.
func TestSilencesOfReadyPodsCountForANewLeader(t *testing.T) {
	start := time.Unix(100, 0)
	pods := map[int32]string{0: "a", 1: "b", 2: "c"}
	ready := map[string]bool{"a": true, "b": true} // c is still starting
	first := &Poll{Time: start, Pods: pods, Reports: map[int32]builderapi.Report{1: {}}}
	s := Silences{}.After(first, ready)
	s = s.After(&Poll{Time: start.Add(time.Second), Pods: pods, Reports: map[int32]builderapi.Report{1: {}}}, ready)
	if got := s.Rows[0]; got.Pod != "a" || !got.Since.Equal(start) || got.Polls != 2 {
		t.Errorf("rank 0 (Ready, silent to this operator): %+v, want silent since the first poll, for 2 polls", got)
	}
	for _, rank := range []int32{1, 2} {
		if row, ok := s.Rows[rank]; ok {
			t.Errorf("rank %d: row %+v, want none (1 answers, 2 is starting)", rank, row)
		}
	}
}

const stallAfter = 10 * time.Second

// Ready means building: a run whose builders are all RUNNING but some of
// which have not moved the event stream on for longer than stallAfter is
// Degraded, naming them, what they do and the first one's last error.
func TestAggregateNotBuilding(t *testing.T) {
	at := func(next int64, activity, lastError string) builderapi.Report {
		return builderapi.Report{State: builderapi.StateRunning, Activity: activity, NextEvent: next, LastError: lastError}
	}
	// Two units last seen at event 100, moving on at t0.
	prev := ebv1.EventBuilderRunStatus{LastSampleTime: micro(t0), Units: []ebv1.UnitStatus{
		{Rank: 0, Pod: "p", Ready: true, State: builderapi.StateRunning, NextEvent: 100, ProgressTime: micro(t0)},
		{Rank: 1, Pod: "p", Ready: true, State: builderapi.StateRunning, NextEvent: 100, ProgressTime: micro(t0)},
	}}
	for _, tc := range []struct {
		name     string
		prev     ebv1.EventBuilderRunStatus
		after    time.Duration
		reports  map[int32]builderapi.Report
		desired  ebv1.RunState
		phase    ebv1.RunPhase
		says     []string
		progress []time.Time
	}{
		{"building: the stream moves", prev, 11 * time.Second,
			map[int32]builderapi.Report{0: at(5000, builderapi.ActivityBuilding, ""), 1: at(5000, builderapi.ActivityBuilding, "")}, ebv1.StateRunning,
			ebv1.PhaseRunning, nil, []time.Time{t0.Add(11 * time.Second), t0.Add(11 * time.Second)}},
		{"still within stallAfter", prev, 9 * time.Second,
			map[int32]builderapi.Report{0: at(100, builderapi.ActivityConnecting, ""), 1: at(100, builderapi.ActivityConnecting, "")}, ebv1.StateRunning,
			ebv1.PhaseRunning, nil, []time.Time{t0, t0}},
		{"connecting past stallAfter", prev, 11 * time.Second,
			map[int32]builderapi.Report{0: at(100, builderapi.ActivityConnecting, "rank 3 at x-eb-3.x-eb:7000: cannot resolve: Temporary failure in name resolution"),
				1: at(100, builderapi.ActivityConnecting, "")}, ebv1.StateRunning,
			ebv1.PhaseDegraded, []string{"ranks 0 (connecting, node n0), 1 (connecting, node n1) have built nothing for 11s", "stands at 100",
				"rank 0 cannot connect to its peers: the data network between their nodes is cut (a partition)", "rank 0: rank 3 at x-eb-3.x-eb:7000: cannot resolve"},
			[]time.Time{t0, t0}},
		{"one unit stalled, building", prev, 12 * time.Second,
			map[int32]builderapi.Report{0: at(9000, builderapi.ActivityBuilding, ""), 1: at(100, builderapi.ActivityBuilding, "output ring full")}, ebv1.StateRunning,
			ebv1.PhaseDegraded, []string{"ranks 1 (building, node n1) have built nothing for 12s", "rank 1: output ring full"},
			[]time.Time{t0.Add(12 * time.Second), t0}},
		{"a restarted builder's stream starts again: progress", prev, 30 * time.Second,
			map[int32]builderapi.Report{0: at(20, builderapi.ActivityBuilding, ""), 1: at(20, builderapi.ActivityBuilding, "")}, ebv1.StateRunning,
			ebv1.PhaseRunning, nil, []time.Time{t0.Add(30 * time.Second), t0.Add(30 * time.Second)}},
		{"paused on purpose is not stalled", prev, time.Minute,
			map[int32]builderapi.Report{0: {State: builderapi.StatePaused, NextEvent: 100}, 1: {State: builderapi.StatePaused, NextEvent: 100}}, ebv1.StatePaused,
			ebv1.PhasePaused, nil, []time.Time{t0, t0}},
		{"first seen: progress counts from there", ebv1.EventBuilderRunStatus{}, time.Hour,
			map[int32]builderapi.Report{0: at(100, builderapi.ActivityConnecting, ""), 1: at(100, builderapi.ActivityConnecting, "")}, ebv1.StateRunning,
			ebv1.PhaseRunning, nil, []time.Time{t0.Add(time.Hour), t0.Add(time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Aggregate(&tc.prev, units(2), &Poll{Time: t0.Add(tc.after), Reports: tc.reports}, tc.desired, stallAfter)
			if s.Phase != tc.phase {
				t.Errorf("phase %s (%s: %s), want %s", s.Phase, s.Reason, s.Message, tc.phase)
			}
			if tc.phase == ebv1.PhaseDegraded && s.Reason != ebv1.ReasonUnitsNotBuilding {
				t.Errorf("reason %s, want %s", s.Reason, ebv1.ReasonUnitsNotBuilding)
			}
			for _, want := range tc.says {
				if !strings.Contains(s.Message, want) {
					t.Errorf("message %q does not say %q", s.Message, want)
				}
			}
			for i, u := range s.Units {
				if u.ProgressTime == nil || !u.ProgressTime.Time.Equal(tc.progress[i]) {
					t.Errorf("rank %d: progressTime %v, want %v", i, u.ProgressTime, tc.progress[i])
				}
			}
		})
	}
}

// A run that has built never goes back to Pending: missing units make it
// Degraded, each named with its pod, node and why.
func TestAggregateMissingUnits(t *testing.T) {
	observed := []Unit{{Rank: 0, Pod: "r-eb-0", Node: "w1", Ready: true}, {Rank: 1, Pod: "r-eb-1", Node: "w2", Ready: false},
		{Rank: 2}, {Rank: 3, Pod: "r-eb-3", Node: "w2", Ready: true}}
	poll := &Poll{Time: t0, Reports: map[int32]builderapi.Report{0: running(1, 1), 3: {State: builderapi.StateReady}}}
	for _, tc := range []struct {
		name    string
		prev    ebv1.RunPhase
		desired ebv1.RunState
		phase   ebv1.RunPhase
		says    string
	}{
		{"was Running", ebv1.PhaseRunning, ebv1.StateRunning, ebv1.PhaseDegraded,
			"3 of 4 units are not building: rank 1 (pod r-eb-1 on node w2, builder not answering); rank 2 (no pod); rank 3 (pod r-eb-3 on node w2, builder READY)"},
		{"was Degraded", ebv1.PhaseDegraded, ebv1.StateRunning, ebv1.PhaseDegraded, "rank 2 (no pod)"},
		{"never ran: still starting", ebv1.PhasePending, ebv1.StateRunning, ebv1.PhasePending, "2/4 units ready, 1/4 builders RUNNING"},
		{"being stopped", ebv1.PhaseRunning, ebv1.StateStopped, ebv1.PhasePending, "stopping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Aggregate(&ebv1.EventBuilderRunStatus{Phase: tc.prev}, observed, poll, tc.desired, stallAfter)
			if s.Phase != tc.phase || !strings.Contains(s.Message, tc.says) {
				t.Errorf("%s (%s): %s; want %s saying %q", s.Phase, s.Reason, s.Message, tc.phase, tc.says)
			}
			if tc.phase == ebv1.PhaseDegraded && s.Reason != ebv1.ReasonUnitsMissing {
				t.Errorf("reason %s, want %s", s.Reason, ebv1.ReasonUnitsMissing)
			}
		})
	}
}

// A unit its running peers report lost makes the run Degraded at once,
// though every builder answers RUNNING (the lost one building alone, cut
// off from the set): the stall check would see it only stallAfter later.
func TestAggregateUnitsLostByPeers(t *testing.T) {
	lost := func(peers ...int32) builderapi.Report {
		r := running(1, 1)
		r.Activity, r.LostPeers = builderapi.ActivityBuilding, peers
		return r
	}
	for _, tc := range []struct {
		name    string
		reports map[int32]builderapi.Report
		phase   ebv1.RunPhase
		says    string
	}{
		{"none lost", map[int32]builderapi.Report{0: lost(), 1: lost(), 2: lost()}, ebv1.PhaseRunning, ""},
		{"rank 2 cut off: lost by both others, it lost them", map[int32]builderapi.Report{0: lost(2), 1: lost(2), 2: lost(0, 1)},
			ebv1.PhaseDegraded, "ranks 2 (node n2, lost by 0, 1), 0 (node n0, lost by 2), 1 (node n1, lost by 2) are lost by their peers"},
		{"a report from a builder not running does not count", map[int32]builderapi.Report{0: lost(), 1: lost(), 2: {State: builderapi.StateNotReady, LostPeers: []int32{0}}},
			ebv1.PhasePending, ""},
		{"a rank not live (a dummy, a rank failed over) does not count", map[int32]builderapi.Report{0: lost(7), 1: lost(), 2: lost()}, ebv1.PhaseRunning, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Aggregate(&ebv1.EventBuilderRunStatus{}, units(3), &Poll{Time: t0, Reports: tc.reports}, ebv1.StateRunning, stallAfter)
			if s.Phase != tc.phase {
				t.Fatalf("phase %s (%s: %s), want %s", s.Phase, s.Reason, s.Message, tc.phase)
			}
			if tc.phase == ebv1.PhaseDegraded && (s.Reason != ebv1.ReasonUnitsLostByPeers || !strings.Contains(s.Message, tc.says)) {
				t.Errorf("%s: %q, want %s saying %q", s.Reason, s.Message, ebv1.ReasonUnitsLostByPeers, tc.says)
			}
		})
	}
}
