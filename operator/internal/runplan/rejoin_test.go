package runplan

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
)

func TestRejoins(t *testing.T) {
	table, err := Plan(&ebv1.EventBuilderRunSpec{Units: 4}, nil, 2) // LLLL at epoch 3
	if err != nil {
		t.Fatal(err)
	}
	at := func(state string, epoch int64, lost ...int32) builderapi.Report {
		return builderapi.Report{State: state, Epoch: epoch, LostPeers: lost}
	}
	// reaching: a builder in its session that probes the peers it lost,
	// reaching those given.
	reaching := func(rep builderapi.Report, reached ...int32) builderapi.Report {
		rep.LostPeersReachable = &reached
		return rep
	}
	run := builderapi.StateRunning
	restarted := at(builderapi.StateNotReady, 0)
	for _, tc := range []struct {
		name    string
		reports map[int32]builderapi.Report
		want    []int
	}{
		{"nobody lost", map[int32]builderapi.Report{0: at(run, 3), 1: at(run, 3), 2: at(run, 3), 3: at(run, 3)}, nil},
		{"lost by all, restarted: answers NOT_READY",
			map[int32]builderapi.Report{0: at(run, 3, 1), 1: restarted, 2: at(run, 3, 1), 3: at(run, 3, 1)}, []int{1}},
		{"lost by all, configured and started again at the epoch it was lost in",
			map[int32]builderapi.Report{0: at(run, 3, 1), 1: at(run, 3), 2: at(run, 3, 1), 3: at(run, 3, 1)}, []int{1}},
		{"a partition healed: it answers, having lost them too",
			map[int32]builderapi.Report{0: at(run, 3, 1), 1: at(run, 3, 0, 2, 3), 2: at(run, 3, 1), 3: at(run, 3, 1)}, []int{1}},
		{"two lost, both back: one rejoin for both",
			map[int32]builderapi.Report{0: at(run, 3, 1, 3), 1: restarted, 2: at(run, 3, 1, 3), 3: restarted}, []int{1, 3}},
		{"two lost, one back: only it", map[int32]builderapi.Report{0: at(run, 3, 1, 3), 1: restarted, 2: at(run, 3, 1, 3)}, []int{1}},
		{"lost but silent (its pod is being recreated): it waits",
			map[int32]builderapi.Report{0: at(run, 3, 1), 2: at(run, 3, 1), 3: at(run, 3, 1)}, nil},
		{"lost and in ERROR: it must be reset or its pod deleted first",
			map[int32]builderapi.Report{0: at(run, 3, 1), 1: at(builderapi.StateError, 3), 2: at(run, 3, 1), 3: at(run, 3, 1)}, nil},
		{"one of three peers: no majority",
			map[int32]builderapi.Report{0: at(run, 3, 1), 1: restarted, 2: at(run, 3), 3: at(run, 3)}, nil},
		{"reports of another epoch do not count (the rejoin epoch is switching)",
			map[int32]builderapi.Report{0: at(run, 2, 1), 1: restarted, 2: at(run, 2, 1), 3: at(run, 2, 1)}, nil},
		{"partitioned: in its session, it reaches none of the peers it lost",
			map[int32]builderapi.Report{0: at(run, 3, 1), 1: reaching(at(run, 3, 0, 2, 3)), 2: at(run, 3, 1), 3: at(run, 3, 1)}, nil},
		{"the partition healed: it reaches them all",
			map[int32]builderapi.Report{0: at(run, 3, 1), 1: reaching(at(run, 3, 0, 2, 3), 0, 2, 3), 2: at(run, 3, 1), 3: at(run, 3, 1)}, []int{1}},
		{"it reaches a majority of them (the third stopped meanwhile)",
			map[int32]builderapi.Report{0: at(run, 3, 1), 1: reaching(at(run, 3, 0, 2, 3), 0, 2), 2: at(run, 3, 1), 3: at(run, 3, 1)}, []int{1}},
		{"it reaches one of three: no majority, it waits",
			map[int32]builderapi.Report{0: at(run, 3, 1), 1: reaching(at(run, 3, 0, 2, 3), 2), 2: at(run, 3, 1), 3: at(run, 3, 1)}, nil},
		{"paused in its session counts as in it",
			map[int32]builderapi.Report{0: at(run, 3, 1), 1: reaching(at(builderapi.StatePaused, 3, 0, 2, 3)), 2: at(run, 3, 1), 3: at(run, 3, 1)}, nil},
		{"it lost nobody itself (only its peers lost it): nothing to wait for",
			map[int32]builderapi.Report{0: at(run, 3, 1), 1: reaching(at(run, 3)), 2: at(run, 3, 1), 3: at(run, 3, 1)}, []int{1}},
		{"the peers it lost are not in the table: nothing to wait for",
			map[int32]builderapi.Report{0: at(run, 3, 1), 1: reaching(at(run, 3, 7)), 2: at(run, 3, 1), 3: at(run, 3, 1)}, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Rejoins(table, tc.reports); !slices.Equal(got, tc.want) {
				t.Errorf("rejoins %v, want %v", got, tc.want)
			}
		})
	}

	rec := Rejoin(table, []int{1, 3})
	if roles(rec.Table) != "LLLL" || rec.Table.Epoch != 4 || table.Epoch != 3 || rec.Outcome != ebv1.OutcomeRejoined {
		t.Errorf("rejoin: %s at epoch %d (input now at %d), outcome %s; want the same table at epoch 4, Rejoined",
			roles(rec.Table), rec.Table.Epoch, table.Epoch, rec.Outcome)
	}
	for i, m := range rec.Moves {
		if want := int32(2*i + 1); m.Unit != want || m.FailedRank != want || m.Reason != ReasonPeerLost || m.SpareRank != nil {
			t.Errorf("move %d: %+v, want unit and rank %d, PeerLost, no spare", i, m, want)
		}
	}
	if s, want := rec.Summary(), "unit 1 on rank 1 failed: PeerLost; its builder answers again and rejoins on its rank; unit 3 on rank 3"; !strings.HasPrefix(s, want) {
		t.Errorf("summary %q, want it to start %q", s, want)
	}
}

func TestRejoinBackoffDelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    RejoinBackoff
		want map[int]time.Duration // by attempts
	}{
		{"default", DefaultRejoinBackoff, map[int]time.Duration{
			1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 5: 160 * time.Second, 6: 5 * time.Minute, 100: 5 * time.Minute}},
		{"the zero value is the default, not no back-off", RejoinBackoff{}, map[int]time.Duration{
			1: 10 * time.Second, 2: 20 * time.Second, 6: 5 * time.Minute, 100: 5 * time.Minute}},
		{"no First: the default's", RejoinBackoff{Max: time.Minute}, map[int]time.Duration{1: 10 * time.Second, 3: 40 * time.Second, 4: time.Minute}},
		{"no Max: the default's", RejoinBackoff{First: time.Second}, map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 100: 5 * time.Minute}},
		{"negative: the default's", RejoinBackoff{First: -time.Second, Max: -time.Second}, map[int]time.Duration{1: 10 * time.Second, 100: 5 * time.Minute}},
		{"set", RejoinBackoff{First: 2 * time.Second, Max: 4 * time.Second}, map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 4 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for attempts, want := range tc.want {
				if got := tc.b.Delay(attempts); got != want {
					t.Errorf("Delay(%d) = %v, want %v", attempts, got, want)
				}
			}
		})
	}
	// The zero value backs off in DecideRejoins too: a rejoin that failed
	// 1 s ago waits.
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	a := RejoinAttempts{1: {Attempts: 1, Epoch: 3, Time: t0.Add(-time.Second), Failed: true}}
	if a.Due(t0, RejoinBackoff{}) || len(a.Waiting(t0, RejoinBackoff{})) != 1 {
		t.Error("with the zero RejoinBackoff a failed rejoin is due at once")
	}
}

// Rank 1 of LLLL at epoch 3 is lost and answers; its rejoins back off
// while they do not hold.
func TestDecideRejoins(t *testing.T) {
	table, err := Plan(&ebv1.EventBuilderRunSpec{Units: 4}, nil, 2) // LLLL at epoch 3
	if err != nil {
		t.Fatal(err)
	}
	b := RejoinBackoff{First: 10 * time.Second, Max: 40 * time.Second}
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(s int) time.Time { return t0.Add(-time.Duration(s) * time.Second) }
	// A peer's report at epoch: rank 1 lost, up or (neither) connecting.
	peer := func(epoch int64, rank1 string) builderapi.Report {
		rep := builderapi.Report{State: builderapi.StateRunning, Epoch: epoch, Peers: []builderapi.Peer{{Rank: 1, State: rank1}}}
		if rank1 == builderapi.PeerLost {
			rep.LostPeers = []int32{1}
		}
		return rep
	}
	// at: the peers' reports at epoch, rank 1 lost, up or connecting for
	// them; rank 1's builder in state self ("" silent): NOT_READY
	// restarted, else at epoch 3.
	const silent, restarted = "", builderapi.StateNotReady
	run, paused, ready := builderapi.StateRunning, builderapi.StatePaused, builderapi.StateReady
	at := func(epoch int64, rank1, self string) map[int32]builderapi.Report {
		reps := map[int32]builderapi.Report{0: peer(epoch, rank1), 2: peer(epoch, rank1), 3: peer(epoch, rank1)}
		switch self {
		case silent:
		case restarted:
			reps[1] = builderapi.Report{State: self}
		default:
			reps[1] = builderapi.Report{State: self, Epoch: 3}
		}
		return reps
	}
	// Ranks 1 and 2 lost by 0 and 3, both answering in state self at epoch 3.
	twoLost := func(self string) map[int32]builderapi.Report {
		rep := builderapi.Report{State: run, Epoch: 3, LostPeers: []int32{1, 2}}
		return map[int32]builderapi.Report{0: rep, 3: rep, 1: {State: self, Epoch: 3}, 2: {State: self, Epoch: 3}}
	}
	pending := RejoinAttempt{Attempts: 1, Epoch: 3, Time: ago(1)}
	failed := func(attempts int, secondsAgo int) RejoinAttempt {
		return RejoinAttempt{Attempts: attempts, Epoch: 3, Time: ago(secondsAgo), Failed: true}
	}
	for _, tc := range []struct {
		name     string
		reports  map[int32]builderapi.Report
		attempts RejoinAttempts
		want     RejoinDecision
	}{
		{"first rejoin of a restarted process: at once", at(3, builderapi.PeerLost, restarted), RejoinAttempts{},
			RejoinDecision{Now: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0}}, Changed: true}},
		{"a partition (healed or not): it still runs its session, RUNNING; reset first", at(3, builderapi.PeerLost, run), RejoinAttempts{},
			RejoinDecision{Now: []int{1}, Reset: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0}}, Changed: true}},
		{"PAUSED in its session: reset first", at(3, builderapi.PeerLost, paused), RejoinAttempts{},
			RejoinDecision{Now: []int{1}, Reset: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0}}, Changed: true}},
		{"READY: no session to leave, not reset", at(3, builderapi.PeerLost, ready), RejoinAttempts{},
			RejoinDecision{Now: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0}}, Changed: true}},
		{"in ERROR: neither rejoined nor reset", at(3, builderapi.PeerLost, builderapi.StateError), RejoinAttempts{},
			RejoinDecision{Attempts: RejoinAttempts{}}},
		{"its epoch is being switched to: the peers still report the old one", at(2, builderapi.PeerLost, run),
			RejoinAttempts{1: pending}, RejoinDecision{Attempts: RejoinAttempts{1: pending}}},
		{"joining: neither lost nor up yet", at(3, "connecting", run),
			RejoinAttempts{1: pending}, RejoinDecision{Attempts: RejoinAttempts{1: pending}}},
		{"lost again at its epoch: failed, the next waits 10 s, nothing reset", at(3, builderapi.PeerLost, run), RejoinAttempts{1: pending},
			RejoinDecision{Failed: []int{1}, Attempts: RejoinAttempts{1: failed(1, 1)}, Changed: true}},
		{"lost at a later epoch than its rejoin's: failed too", at(3, builderapi.PeerLost, run),
			RejoinAttempts{1: {Attempts: 1, Epoch: 2, Time: ago(1)}},
			RejoinDecision{Failed: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 2, Time: ago(1), Failed: true}}, Changed: true}},
		{"still waiting", at(3, builderapi.PeerLost, run), RejoinAttempts{1: failed(1, 5)},
			RejoinDecision{Attempts: RejoinAttempts{1: failed(1, 5)}}},
		{"waited: the second rejoin, RUNNING where the first left it: reset first", at(3, builderapi.PeerLost, run), RejoinAttempts{1: failed(1, 10)},
			RejoinDecision{Now: []int{1}, Reset: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 2, Epoch: 4, Time: t0}}, Changed: true}},
		{"after two, 20 s", at(3, builderapi.PeerLost, run), RejoinAttempts{1: failed(2, 15)},
			RejoinDecision{Attempts: RejoinAttempts{1: failed(2, 15)}}},
		{"after nine, the 40 s cap", at(3, builderapi.PeerLost, run), RejoinAttempts{1: failed(9, 40)},
			RejoinDecision{Now: []int{1}, Reset: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 10, Epoch: 4, Time: t0}}, Changed: true}},
		{"silent once its wait is over: it waits for its builder", at(3, builderapi.PeerLost, silent), RejoinAttempts{1: failed(1, 60)},
			RejoinDecision{Attempts: RejoinAttempts{1: failed(1, 60)}}},
		{"its peers report it up: it held, the record goes", at(3, builderapi.PeerUp, run), RejoinAttempts{1: failed(3, 1)},
			RejoinDecision{Attempts: RejoinAttempts{}, Changed: true}},
		{"a record of a rank no longer live goes", at(3, builderapi.PeerUp, run), RejoinAttempts{7: failed(1, 1)},
			RejoinDecision{Attempts: RejoinAttempts{}, Changed: true}},
		{"one rejoins, one waits: the new epoch reaches both, both in their session are reset", twoLost(run),
			RejoinAttempts{2: failed(1, 5)},
			RejoinDecision{Now: []int{1}, Reset: []int{1, 2}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0}, 2: failed(1, 5)}, Changed: true}},
		{"both waiting: no epoch, nothing reset", twoLost(run), RejoinAttempts{1: failed(1, 5), 2: failed(1, 5)},
			RejoinDecision{Attempts: RejoinAttempts{1: failed(1, 5), 2: failed(1, 5)}}},
		{"one rejoins, the other restarted: nothing to reset", twoLost(restarted), RejoinAttempts{2: failed(1, 5)},
			RejoinDecision{Now: []int{1}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0}, 2: failed(1, 5)}, Changed: true}},
		{"half the set restarted, the other half each alone (lost by no majority): the lonely are reset with the rejoin",
			map[int32]builderapi.Report{
				0: {State: run, Epoch: 3, LostPeers: []int32{1, 2, 3}}, 2: {State: run, Epoch: 3, LostPeers: []int32{0, 1, 3}},
				1: {State: restarted}, 3: {State: restarted}},
			RejoinAttempts{},
			RejoinDecision{Now: []int{1, 3}, Reset: []int{0, 2}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0},
				3: {Attempts: 1, Epoch: 4, Time: t0}}, Changed: true}},
		{"alone with only fresh processes about it, it is the set's place: kept",
			map[int32]builderapi.Report{
				0: {State: run, Epoch: 3, LostPeers: []int32{1, 2, 3}},
				1: {State: restarted}, 2: {State: restarted}, 3: {State: restarted}},
			RejoinAttempts{},
			RejoinDecision{Now: []int{1, 2, 3}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0},
				2: {Attempts: 1, Epoch: 4, Time: t0}, 3: {Attempts: 1, Epoch: 4, Time: t0}}, Changed: true}},
		{"a unit that lost only some of its peers is no lonely one: not reset",
			map[int32]builderapi.Report{
				0: {State: run, Epoch: 3, LostPeers: []int32{1, 3}}, 2: {State: run, Epoch: 3, LostPeers: []int32{1, 3}},
				1: {State: restarted}, 3: {State: restarted}},
			RejoinAttempts{},
			RejoinDecision{Now: []int{1, 3}, Attempts: RejoinAttempts{1: {Attempts: 1, Epoch: 4, Time: t0},
				3: {Attempts: 1, Epoch: 4, Time: t0}}, Changed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DecideRejoins(table, tc.reports, tc.attempts, t0, b)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}

	if (RejoinAttempts{1: failed(1, 9)}).Due(t0, b) || !(RejoinAttempts{1: failed(1, 10)}).Due(t0, b) ||
		(RejoinAttempts{1: pending}).Due(t0.Add(time.Hour), b) {
		t.Error("Due: a failed rejoin is due once its delay has passed, a pending one never")
	}
	waiting := RejoinAttempts{3: failed(2, 15), 1: failed(1, 5), 2: failed(1, 10), 0: pending}.Waiting(t0, b)
	if want := []Deferral{{Rank: 1, Attempts: 1, Until: t0.Add(5 * time.Second)}, {Rank: 3, Attempts: 2, Until: t0.Add(5 * time.Second)}}; !reflect.DeepEqual(waiting, want) {
		t.Errorf("waiting %+v, want %+v (failed and not due, by rank)", waiting, want)
	}
	if s := (Deferral{Rank: 1, Attempts: 2, Until: t0}).String(); s != "rank 1 waits to rejoin until 2030-01-01T12:00:00Z (failed rejoins: 2)" {
		t.Errorf("deferral %q", s)
	}
}
