package builderstatus

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// Unit is what the reconciler observed of one rank in the cluster.
type Unit struct {
	Rank  int32
	Pod   string // empty while the pod does not exist
	Node  string // where the pod is bound; empty while it is not
	Ready bool
}

// Poll is the outcome of polling the builders at Time: the pods asked (by
// rank, their UIDs) and the reports of those that answered.
type Poll struct {
	Time    time.Time
	Pods    map[int32]string
	Reports map[int32]builderapi.Report
}

// Silence is a row of polls a builder pod left unanswered: since the first
// of them, and how many.
type Silence struct {
	Pod   string
	Since time.Time
	Polls int
}

// Silences are the rows of unanswered polls of a run's builders, by rank,
// and the pods that have answered at least once.
type Silences struct {
	Rows  map[int32]Silence
	Heard map[string]bool
}

// After carries s over poll p. A pod that answered, or that was not asked
// (gone, not running), has no row; one that did not answer extends its row
// or starts one, if it has spoken before: a builder still starting is not
// silent, it has not spoken yet. A pod in ready (those the kubelet finds
// Ready: their builder answered its readiness probe) has spoken, even if
// not to this operator: a new leader counts the silence of a server lost
// with the old one from its first poll.
func (s Silences) After(p *Poll, ready map[string]bool) Silences {
	next := Silences{Rows: map[int32]Silence{}, Heard: map[string]bool{}}
	for rank, pod := range p.Pods {
		if _, answered := p.Reports[rank]; answered {
			next.Heard[pod] = true
			continue
		}
		if !s.Heard[pod] && !ready[pod] {
			continue
		}
		next.Heard[pod] = true
		row, ok := s.Rows[rank]
		if !ok || row.Pod != pod {
			row = Silence{Pod: pod, Since: p.Time}
		}
		row.Polls++
		next.Rows[rank] = row
	}
	return next
}

// Summary is the part of a run's status derived from its units and builders.
type Summary struct {
	Units            []ebv1.UnitStatus
	ReadyUnits       int32
	EventsBuilt      int64
	EventsIncomplete int64
	EventsDropped    int64
	BytesBuilt       int64
	// Consumed sums the units' consumer counts; nil when none reports.
	Consumed       *ebv1.ConsumerCounts
	EventRate      int64
	ThroughputGbps string
	LastSampleTime *metav1.MicroTime

	// Phase with the reason and message of the Ready condition.
	Phase   ebv1.RunPhase
	Reason  string
	Message string
}

// Aggregate folds the observed units, one per live rank in rank order, and
// the builders' reports into a Summary. prev is the run's current status:
// it holds every rank's last known state and counters and the time they
// were sampled, from which rates are computed. A nil poll means the
// builders were not polled this time: states, counters and rates carry
// over. desired is the run's spec.state, which decides what phase the
// builders' states make; a unit whose next_event stood still for longer
// than stallAfter (as of the last poll) is not building.
func Aggregate(prev *ebv1.EventBuilderRunStatus, units []Unit, poll *Poll, desired ebv1.RunState, stallAfter time.Duration) Summary {
	last := make(map[int32]ebv1.UnitStatus, len(prev.Units))
	for _, u := range prev.Units {
		last[u.Rank] = u
	}

	s := Summary{
		Units:          make([]ebv1.UnitStatus, 0, len(units)),
		EventRate:      prev.EventRate,
		ThroughputGbps: prev.ThroughputGbps,
		LastSampleTime: prev.LastSampleTime,
	}
	var dEvents, dBytes int64
	for _, u := range units {
		st := last[u.Rank]
		st.Rank, st.Pod, st.Ready = u.Rank, u.Pod, u.Ready
		if poll != nil {
			rep, ok := poll.Reports[u.Rank]
			// Only a rank that also answered the previous poll has a
			// baseline at LastSampleTime; the others re-base.
			if ok && st.State != "" {
				dEvents += delta(st.EventsBuilt, rep.EventsBuilt)
				dBytes += delta(st.BytesBuilt, rep.BytesBuilt)
			}
			if ok {
				if st.ProgressTime == nil || rep.NextEvent != st.NextEvent {
					at := metav1.NewMicroTime(poll.Time)
					st.ProgressTime = &at
				}
				st.Activity, st.NextEvent = rep.Activity, rep.NextEvent
				st.State, st.LastError = rep.State, rep.LastError
				st.EventsBuilt, st.EventsIncomplete, st.BytesBuilt = rep.EventsBuilt, rep.EventsIncomplete, rep.BytesBuilt
				st.EventsDropped, st.Epoch, st.PendingEpoch = rep.EventsDropped, rep.Epoch, rep.PendingEpoch
				st.Consumer = rep.Consumer.Counts()
				st.LostPeers = nil
				if len(rep.LostPeers) > 0 {
					st.LostPeers = slices.Clone(rep.LostPeers)
				}
			} else {
				// Unknown now; the last counters stay as the best total.
				st.State = ""
			}
		}
		s.Units = append(s.Units, st)
		if st.Ready {
			s.ReadyUnits++
		}
		s.EventsBuilt += st.EventsBuilt
		s.EventsIncomplete += st.EventsIncomplete
		s.EventsDropped += st.EventsDropped
		s.BytesBuilt += st.BytesBuilt
		if c := st.Consumer; c != nil {
			if s.Consumed == nil {
				s.Consumed = &ebv1.ConsumerCounts{}
			}
			s.Consumed.MEPs += c.MEPs
			s.Consumed.EventsComplete += c.EventsComplete
			s.Consumed.EventsIncomplete += c.EventsIncomplete
			s.Consumed.Rejected += c.Rejected
		}
	}

	if poll != nil {
		s.EventRate, s.ThroughputGbps = 0, formatGbps(0)
		if len(poll.Reports) > 0 {
			if prev.LastSampleTime != nil {
				if dt := poll.Time.Sub(prev.LastSampleTime.Time).Seconds(); dt > 0 {
					s.EventRate = int64(math.Round(float64(dEvents) / dt))
					s.ThroughputGbps = formatGbps(float64(dBytes) * 8 / 1e9 / dt)
				}
			}
			t := metav1.NewMicroTime(poll.Time)
			s.LastSampleTime = &t
		}
	}

	s.Phase, s.Reason, s.Message = assess(s.Units, s.ReadyUnits, desired)
	// A run that has built goes Degraded, never back to Pending, when units go missing.
	hasRun := prev.Phase == ebv1.PhaseRunning || prev.Phase == ebv1.PhaseDegraded
	if s.Reason == ebv1.ReasonUnitsPending && desired != ebv1.StatePaused && desired != ebv1.StateStopped && hasRun {
		s.Phase, s.Reason, s.Message = ebv1.PhaseDegraded, ebv1.ReasonUnitsMissing, missing(units, s.Units)
	}
	if s.Phase == ebv1.PhaseRunning && s.LastSampleTime != nil {
		if stuck := stalled(s.Units, s.LastSampleTime.Time, stallAfter); len(stuck) > 0 {
			s.Phase, s.Reason, s.Message = ebv1.PhaseDegraded, ebv1.ReasonUnitsNotBuilding, notBuilding(stuck, units, s.LastSampleTime.Time)
		}
	}
	if s.Phase == ebv1.PhaseRunning {
		if lost := lostByPeers(s.Units); len(lost) > 0 {
			s.Phase, s.Reason, s.Message = ebv1.PhaseDegraded, ebv1.ReasonUnitsLostByPeers, lostMessage(lost, units)
		}
	}
	return s
}

// lostByPeers are the live units that a running peer reports lost, with
// the ranks that report each, those lost by most peers first: a unit cut off from the
// set's data network (a partition) or whose process stopped. Its own
// builder may still answer RUNNING, building alone; the stall check would
// find it only --builder-stall-after later.
func lostByPeers(units []ebv1.UnitStatus) []lostUnit {
	live := make(map[int32]bool, len(units))
	for _, u := range units {
		live[u.Rank] = true
	}
	by := map[int32][]int32{}
	for _, u := range units {
		if u.State != builderapi.StateRunning {
			continue
		}
		for _, rank := range u.LostPeers {
			if live[rank] {
				by[rank] = append(by[rank], u.Rank)
			}
		}
	}
	out := make([]lostUnit, 0, len(by))
	for _, rank := range slices.Sorted(maps.Keys(by)) {
		out = append(out, lostUnit{Rank: rank, By: by[rank]})
	}
	// A unit cut off loses every peer, each of which loses it alone: as
	// the set's proposals do, name first the unit most peers lost.
	slices.SortStableFunc(out, func(a, b lostUnit) int { return cmp.Compare(len(b.By), len(a.By)) })
	return out
}

// lostUnit is a live rank its peers lost, and which of them report it.
type lostUnit struct {
	Rank int32
	By   []int32
}

// lostMessage is the message of a run whose units are lost by their peers.
func lostMessage(lost []lostUnit, observed []Unit) string {
	node := nodesOf(observed)
	ranks := shortlist.Join(lost, ", ", func(l lostUnit) string {
		return fmt.Sprintf("%d (node %s, lost by %s)", l.Rank, cmp.Or(node[l.Rank], "(none)"),
			shortlist.Join(l.By, ", ", func(r int32) string { return strconv.Itoa(int(r)) }))
	})
	return fmt.Sprintf("ranks %s are lost by their peers: cut off from the set's data network (a partition), or their "+
		"builders stopped; the set builds on without their data until a failover moves them to spares or, with no "+
		"spare, they answer again and rejoin", ranks)
}

// missing is the message of a run that has built and misses units: each
// unit that is not ready and RUNNING, with its pod, node and why.
func missing(observed []Unit, rows []ebv1.UnitStatus) string {
	var out []string
	for i, u := range observed {
		row := rows[i]
		var why string
		switch {
		case u.Pod == "":
			why = "no pod"
		case row.State == "":
			why = fmt.Sprintf("pod %s on node %s, builder not answering", u.Pod, cmp.Or(u.Node, "(none)"))
		case row.State != builderapi.StateRunning:
			why = fmt.Sprintf("pod %s on node %s, builder %s", u.Pod, cmp.Or(u.Node, "(none)"), row.State)
		case !u.Ready:
			why = fmt.Sprintf("pod %s on node %s not Ready", u.Pod, cmp.Or(u.Node, "(none)"))
		default:
			continue
		}
		out = append(out, fmt.Sprintf("rank %d (%s)", u.Rank, why))
	}
	return fmt.Sprintf("%d of %d units are not building: %s", len(out), len(observed), shortlist.Join(out, "; ", func(s string) string { return s }))
}

// stalled are the units whose next_event stood still for longer than
// stallAfter at time at.
func stalled(units []ebv1.UnitStatus, at time.Time, stallAfter time.Duration) []ebv1.UnitStatus {
	var out []ebv1.UnitStatus
	for _, u := range units {
		if u.ProgressTime != nil && at.Sub(u.ProgressTime.Time) > stallAfter {
			out = append(out, u)
		}
	}
	return out
}

// notBuilding is the message of a run whose units stalled: which, on
// what node, for how long, doing what, what that points to, and the first
// one's last error.
func notBuilding(stuck []ebv1.UnitStatus, observed []Unit, at time.Time) string {
	node := nodesOf(observed)
	ranks := shortlist.Join(stuck, ", ", func(u ebv1.UnitStatus) string {
		return fmt.Sprintf("%d (%s, node %s)", u.Rank, cmp.Or(u.Activity, "activity unknown"), cmp.Or(node[u.Rank], "(none)"))
	})
	first := stuck[0]
	msg := fmt.Sprintf("every builder is %s, but ranks %s have built nothing for %s (the event stream stands at %d)",
		builderapi.StateRunning, ranks, at.Sub(first.ProgressTime.Time).Round(time.Second), first.NextEvent)
	if i := slices.IndexFunc(stuck, func(u ebv1.UnitStatus) bool { return u.Activity == builderapi.ActivityConnecting }); i >= 0 {
		msg += fmt.Sprintf("; rank %d cannot connect to its peers: the data network between their nodes is cut (a partition), "+
			"or a peer's address does not resolve", stuck[i].Rank)
	}
	if first.LastError != "" {
		msg += fmt.Sprintf("; rank %d: %s", first.Rank, clipError(first.LastError))
	}
	return msg
}

// nodesOf is where each observed unit's pod is bound, by rank.
func nodesOf(observed []Unit) map[int32]string {
	node := make(map[int32]string, len(observed))
	for _, u := range observed {
		node[u.Rank] = u.Node
	}
	return node
}

// clipError shortens a builder's last error for a message.
func clipError(e string) string {
	if len(e) > maxErrorLen {
		return e[:maxErrorLen] + "..."
	}
	return e
}

// delta is how much a counter grew; a counter that went down belongs to a
// restarted builder and counts from zero.
func delta(prev, cur int64) int64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

func formatGbps(gbps float64) string { return strconv.FormatFloat(gbps, 'f', 3, 64) }

// maxErrorLen is how much of a builder's last error a message quotes.
const maxErrorLen = 300

// assess decides the phase: Failed if any builder is in ERROR; else, by
// the desired state, Running once every unit is ready and RUNNING, Paused
// once every builder answers and none is RUNNING or NOT_READY, Stopped
// once every builder answers READY or NOT_READY; Pending otherwise.
func assess(units []ebv1.UnitStatus, ready int32, desired ebv1.RunState) (ebv1.RunPhase, string, string) {
	var failed []ebv1.UnitStatus
	count := map[string]int{}
	for _, u := range units {
		count[u.State]++
		if u.State == builderapi.StateError {
			failed = append(failed, u)
		}
	}
	running := count[builderapi.StateRunning]
	n := len(units)
	if len(failed) == 0 && n > 0 {
		switch desired {
		case ebv1.StatePaused:
			if count[builderapi.StatePaused]+count[builderapi.StateReady] == n {
				return ebv1.PhasePaused, ebv1.ReasonRunPaused, fmt.Sprintf("spec.state is Paused: %d builders PAUSED, %d READY (never started)", count[builderapi.StatePaused], count[builderapi.StateReady])
			}
			return ebv1.PhasePending, ebv1.ReasonUnitsPending, fmt.Sprintf("pausing: %d/%d builders PAUSED, %d RUNNING, %d did not answer", count[builderapi.StatePaused], n, running, count[""])
		case ebv1.StateStopped:
			if count[builderapi.StateReady]+count[builderapi.StateNotReady] == n {
				return ebv1.PhaseStopped, ebv1.ReasonRunStopped, fmt.Sprintf("spec.state is Stopped: %d builders READY, %d NOT_READY; their pods stay", count[builderapi.StateReady], count[builderapi.StateNotReady])
			}
			return ebv1.PhasePending, ebv1.ReasonUnitsPending, fmt.Sprintf("stopping: %d/%d builders READY, %d RUNNING, %d PAUSED, %d did not answer", count[builderapi.StateReady], n, running, count[builderapi.StatePaused], count[""])
		}
	}
	switch {
	case len(failed) > 0:
		// Events carry this message, and events.k8s.io refuses notes over
		// 1024 characters: name a few ranks, clip the error.
		ranks := shortlist.Join(failed, ", ", func(u ebv1.UnitStatus) string { return strconv.Itoa(int(u.Rank)) })
		return ebv1.PhaseFailed, ebv1.ReasonBuilderError,
			fmt.Sprintf("builders of ranks %s report %s; rank %d: %s", ranks, builderapi.StateError, failed[0].Rank, clipError(failed[0].LastError))
	case int(ready) == n && running == n:
		return ebv1.PhaseRunning, ebv1.ReasonAllUnitsRunning, fmt.Sprintf("all %d units ready and %s", n, builderapi.StateRunning)
	default:
		return ebv1.PhasePending, ebv1.ReasonUnitsPending, fmt.Sprintf("%d/%d units ready, %d/%d builders %s", ready, n, running, n, builderapi.StateRunning)
	}
}
