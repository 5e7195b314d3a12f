package runplan

import (
	"fmt"
	"maps"
	"slices"
	"time"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/planner"
)

// Rejoins take a lost unit of a run without a Fabric back on its own rank
// (no spare to move it to): when, how often, and which builders to reset.

// Rejoins finds the live ranks of t that their peers report lost
// (LostPeers) and whose own builder answers the poll again, in any state
// but ERROR: its process restarted (a pod recreated, a container
// restarted: NOT_READY), or it lost its set and still runs its session
// (RUNNING or PAUSED at the epoch it was lost in: its data network went
// down while its control API answers, a partition that may heal). A lost
// unit cannot come back into its epoch; a new epoch of the same table
// takes it back: at the switch the running set reconnects a peer lost in
// the old epoch and live in the new one (Rejoin), as a fresh process
// (DecideRejoins resets one still in its session first). A lost rank
// whose builder does not answer (its pod is being recreated) or is in
// ERROR is not listed: it waits, and no epoch is spent on it; nor is one
// still in its session that cannot reach the peers it lost (reaches): its
// rejoin would not hold. Ranks in order.
func Rejoins(t planner.RankTable, reports map[int32]builderapi.Report) []int {
	lost := LostPeers(t, reports)
	var out []int
	for _, r := range t.Ranks {
		rep, answers := reports[int32(r.Rank)]
		if lost[r.Rank] && answers && rep.State != builderapi.StateError && reaches(t, rep) {
			out = append(out, r.Rank)
		}
	}
	return out
}

// reaches says whether a lost unit's builder reaches the peers it lost:
// one still building in its session dials their data ports
// (lost_peers_reachable) and must reach a strict majority of the live
// ranks it lost. Until then the partition that cut it off lasts, and a
// rejoin would cost the set a join timeout for nothing; once it heals, the
// rejoin follows within a poll, with no back-off to wait out. A fresh
// process (restarted, or reset) has no peers to dial, and a builder that
// does not probe (nil) reports nothing to wait for: both rejoin at once.
func reaches(t planner.RankTable, rep builderapi.Report) bool {
	if rep.LostPeersReachable == nil || !InSession(rep.State) {
		return true
	}
	lost, reached := 0, 0
	for _, peer := range rep.LostPeers {
		if peer < 0 || int(peer) >= len(t.Ranks) || t.Ranks[peer].Role != planner.Live {
			continue
		}
		lost++
		if slices.Contains(*rep.LostPeersReachable, peer) {
			reached++
		}
	}
	return lost == 0 || 2*reached > lost
}

// Rejoin is the recovery of a run without a fabric whose lost ranks
// (Rejoins) answer again: the same table at the next epoch, one for all
// of them, with every rank where it was. Configured on every builder, it
// takes the lost units back into the running set.
func Rejoin(t planner.RankTable, ranks []int) Recovery { return retake(t, ranks, ReasonPeerLost) }

// retake is the same table at the next epoch, outcome Rejoined, with a
// move of each rank onto itself for the reason given.
func retake(t planner.RankTable, ranks []int, reason string) Recovery {
	rec := Recovery{Table: t, Outcome: ebv1.OutcomeRejoined}
	for _, rank := range ranks {
		r := t.Ranks[rank]
		rec.Moves = append(rec.Moves, ebv1.UnitMove{Unit: int32(r.Unit), FailedRank: int32(rank), FailedEndpoint: r.Endpoint, Reason: reason})
	}
	rec.Table.Epoch = t.Epoch + 1
	return rec
}

// RejoinBackoff spaces the rejoins of a rank whose rejoins do not hold
// (its builder answers the operator but cannot join the set, e.g. its
// node's data network is down): each rejoin costs the set a join timeout
// of dropped events. A zero (or negative) field takes
// DefaultRejoinBackoff's: the zero RejoinBackoff is the default, never
// "no back-off".
type RejoinBackoff struct {
	First time.Duration // after one rejoin that did not hold
	Max   time.Duration
}

// DefaultRejoinBackoff waits 10 s, 20 s, 40 s, ... up to 5 min.
var DefaultRejoinBackoff = RejoinBackoff{First: 10 * time.Second, Max: 5 * time.Minute}

// orDefault fills b's zero fields from DefaultRejoinBackoff.
func (b RejoinBackoff) orDefault() RejoinBackoff {
	if b.First <= 0 {
		b.First = DefaultRejoinBackoff.First
	}
	if b.Max <= 0 {
		b.Max = DefaultRejoinBackoff.Max
	}
	return b
}

// Delay is the wait after attempts rejoins in a row that did not hold.
func (b RejoinBackoff) Delay(attempts int) time.Duration {
	b = b.orDefault()
	d := b.First
	for i := 1; i < attempts && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// RejoinAttempt is the durable record of a rank's rejoins since it last
// built (kept with the rank table, so a restarted operator keeps backing
// off).
type RejoinAttempt struct {
	Attempts int       `json:"attempts"` // rejoin epochs published for the rank since it last built
	Epoch    int64     `json:"epoch"`    // the last of them
	Time     time.Time `json:"time"`     // when it was published
	// Failed: its peers reported it lost again at that epoch or later;
	// the next rejoin waits Delay(Attempts) from Time.
	Failed bool `json:"failed,omitempty"`
}

// retryAt is when the rank's next rejoin may go, once its last failed.
func (at RejoinAttempt) retryAt(b RejoinBackoff) time.Time { return at.Time.Add(b.Delay(at.Attempts)) }

// RejoinAttempts are the records by rank.
type RejoinAttempts map[int]RejoinAttempt

// Due says whether a deferred rejoin's wait has ended at now.
func (a RejoinAttempts) Due(now time.Time, b RejoinBackoff) bool {
	for _, at := range a {
		if at.Failed && !now.Before(at.retryAt(b)) {
			return true
		}
	}
	return false
}

// Deferral is a lost rank waiting out its backoff before its next rejoin.
type Deferral struct {
	Rank     int
	Attempts int // rejoins in a row that did not hold
	Until    time.Time
}

// Waiting are the ranks whose next rejoin waits at now, in rank order.
func (a RejoinAttempts) Waiting(now time.Time, b RejoinBackoff) []Deferral {
	var out []Deferral
	for _, rank := range slices.Sorted(maps.Keys(a)) {
		at := a[rank]
		if until := at.retryAt(b); at.Failed && now.Before(until) {
			out = append(out, Deferral{Rank: rank, Attempts: at.Attempts, Until: until})
		}
	}
	return out
}

// RejoinDecision is what DecideRejoins found.
type RejoinDecision struct {
	Now []int // rejoin at the next epoch (Rejoin), in rank order
	// Reset: when Now is not empty, the lost ranks whose builder still
	// runs its session (RUNNING or PAUSED), in rank order. Each must be
	// sent reset (NOT_READY) before the rejoin epoch is configured on it,
	// so that it joins as a fresh process: configured in its session, it
	// would join the set as a unit already building, at the place in the
	// event stream where it went on alone, out of step: the builder
	// refuses it (lost both ways, and it builds on alone; older builders
	// put every unit in ERROR), so it could never rejoin.
	Reset  []int
	Failed []int // ranks whose last rejoin this decision finds did not hold, in rank order
	// Attempts is the record to keep: with the rejoin table when Now is
	// not empty (counting its epoch), else where Changed.
	Attempts RejoinAttempts
	Changed  bool
}

// DecideRejoins applies the backoff to the rejoins of a run without a
// fabric (Rejoins: lost ranks whose builder answers), at now. A rank's
// first rejoin goes at once. A rejoin fails when the rank is reported lost
// again (LostPeers) at its epoch or later; the next one waits
// Delay(attempts) from the last. A rejoin holds when its peers report the
// rank up (UpPeers) at its epoch or later: its record is dropped, and a
// later loss rejoins at once again. Records of ranks no longer live go.
// The rejoin epoch is configured on every builder, so every lost rank
// still in its session (not only those in Now) is listed in Reset.
func DecideRejoins(t planner.RankTable, reports map[int32]builderapi.Report, attempts RejoinAttempts,
	now time.Time, b RejoinBackoff) RejoinDecision {
	lost, up := LostPeers(t, reports), UpPeers(t, reports)
	d := RejoinDecision{Attempts: RejoinAttempts{}}
	for rank, at := range attempts {
		switch {
		case rank < 0 || rank >= len(t.Ranks) || t.Ranks[rank].Role != planner.Live:
		case t.Epoch >= at.Epoch && up[rank] && !lost[rank]:
		case t.Epoch >= at.Epoch && lost[rank] && !at.Failed:
			at.Failed = true
			d.Failed = append(d.Failed, rank)
			d.Attempts[rank] = at
		default:
			d.Attempts[rank] = at
		}
	}
	slices.Sort(d.Failed)
	for _, rank := range Rejoins(t, reports) {
		// A lost rank with a record has just been marked Failed, if not before.
		if at, known := d.Attempts[rank]; known && now.Before(at.retryAt(b)) {
			continue
		}
		at := d.Attempts[rank]
		d.Now = append(d.Now, rank)
		d.Attempts[rank] = RejoinAttempt{Attempts: at.Attempts + 1, Epoch: t.Epoch + 1, Time: now}
	}
	if len(d.Now) > 0 {
		for _, r := range t.Ranks {
			if rep, answers := reports[int32(r.Rank)]; (lost[r.Rank] || alone(t, r.Rank, reports)) && answers && InSession(rep.State) {
				d.Reset = append(d.Reset, r.Rank)
			}
		}
	}
	d.Changed = !maps.EqualFunc(d.Attempts, attempts, func(x, y RejoinAttempt) bool {
		return x.Attempts == y.Attempts && x.Epoch == y.Epoch && x.Time.Equal(y.Time) && x.Failed == y.Failed
	})
	return d
}

// alone says whether live rank `rank`'s builder reports every other live
// rank of t lost while another live builder still runs a session of its
// own: it put itself out of the set (eb-builder: having lost every peer it
// cannot tell whether they died or it was cut off, and cycles on alone
// counting no event) at its own place in the event stream, and so did the
// other. No majority names either lost when the rest of the set is gone
// too (a worker with half the set restarted, the other half each alone),
// yet the rejoin cannot take them back in their sessions: at the switch
// they refuse each other (out of step). So they are reset with the rejoin
// and join as fresh processes. One alone with only fresh processes about
// it is the set's place: it is kept.
func alone(t planner.RankTable, rank int, reports map[int32]builderapi.Report) bool {
	rep := reports[int32(rank)]
	if rep.Epoch != t.Epoch {
		return false
	}
	others, otherSessions := 0, 0
	for _, r := range t.Ranks {
		if r.Role != planner.Live || r.Rank == rank {
			continue
		}
		others++
		if !slices.Contains(rep.LostPeers, int32(r.Rank)) {
			return false
		}
		if peer, answers := reports[int32(r.Rank)]; answers && InSession(peer.State) && peer.Epoch == t.Epoch {
			otherSessions++
		}
	}
	return others > 0 && otherSessions > 0
}

// InSession: a builder in state runs a session with its set (RUNNING or
// PAUSED), with a place in the event stream; NOT_READY and READY have
// none yet (a READY builder starts with the set or joins it afresh), and
// ERROR ended it.
func InSession(state string) bool {
	return state == builderapi.StateRunning || state == builderapi.StatePaused
}

// String says how long the rank waits, for the Ready condition and events.
func (d Deferral) String() string {
	return fmt.Sprintf("rank %d waits to rejoin until %s (failed rejoins: %d)",
		d.Rank, d.Until.UTC().Format(time.RFC3339), d.Attempts)
}
