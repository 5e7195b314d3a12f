package builderclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderemu"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/ranktable"
	"daq.io/eventbuilder/operator/internal/runplan"
	"daq.io/eventbuilder/operator/internal/testenv"
)

// The contract suite: the same scenarios of builder/docs/control-api.md
// run against real eb-builder processes and against the emulation the
// envtests drive (internal/builderemu), so that neither the operator's
// client nor the emulation can drift from the builder unnoticed. Each
// scenario runs twice, as subtests "emulation" and "eb-builder". The real
// builders need their binary: EB_BUILDER=/path/to/eb-builder (make
// test-operator builds it and sets it, so there a missing binary fails);
// without it the eb-builder subtests skip, saying so.
//
// 5xx and garbage answers come from neither side: the client's tests meet
// them from an httptest server (TestClientErrors).

// realToken is the control token every builder of the suite is started with.
const realToken = "0123456789abcdef"

// set is a set of builders, one per rank of a table (live or not), as the
// operator's pods start them (controlled: --rank, --http-port,
// --token-file, no table), and the rank table (epoch 1) that names them.
type set struct {
	t        *testing.T
	builders []builderapi.Builder
	doc      ranktable.Document
	status   *Client
	// kill ends rank r's process as a crash does; start starts it again
	// (a restarted container: same rank and ports) and waits for it to
	// serve, NOT_READY.
	kill, start func(r int)
}

// contract runs scenario against a set of each implementation for table.
func contract(t *testing.T, table planner.RankTable, scenario func(t *testing.T, s *set)) {
	t.Helper()
	for _, impl := range []struct {
		name string
		new  func(*testing.T, planner.RankTable) *set
	}{{"emulation", newEmulatedSet}, {"eb-builder", newRealSet}} {
		t.Run(impl.name, func(t *testing.T) { scenario(t, impl.new(t, table)) })
	}
}

// newEmulatedSet starts an emulated builder for each rank of table, all of
// one mesh (one run).
func newEmulatedSet(t *testing.T, table planner.RankTable) *set {
	farm := builderemu.NewFarm()
	t.Cleanup(farm.Close)
	n := table.N()
	s := &set{t: t, status: New(Timeouts{Poll: time.Second, Control: time.Second})}
	addresses := make([]string, n)
	options := func(r int) builderemu.Options {
		return builderemu.Options{Token: realToken, Rank: int32(r), Mesh: "contract"}
	}
	for r := range n {
		addresses[r] = net.JoinHostPort("127.0.0.1", strconv.Itoa(7000+r))
		farm.Start(strconv.Itoa(r), options(r))
		s.builders = append(s.builders, builderapi.Builder{Rank: int32(r), URL: farm.URL(strconv.Itoa(r))})
	}
	s.kill = func(r int) { farm.Kill(strconv.Itoa(r)) }
	s.start = func(r int) { farm.Start(strconv.Itoa(r), options(r)) }
	s.doc = ranktable.New("contract", "", table, addresses, nil)
	return s
}

// plan is the operator's table of a run without a fabric (runplan.Plan), at epoch 1.
func plan(t *testing.T, spec ebv1.EventBuilderRunSpec) planner.RankTable {
	t.Helper()
	table, err := runplan.Plan(&spec, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// newRealSet starts an eb-builder process for each rank of table and
// waits for each to serve, NOT_READY; its document is the table as the
// operator renders it (ranktable.New).
func newRealSet(t *testing.T, table planner.RankTable) *set {
	t.Helper()
	bin := os.Getenv("EB_BUILDER")
	if bin == "" {
		testenv.Unavailable(t, "EB_BUILDER is not set: no eb-builder binary to drive (make test-operator builds one and sets it)")
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(realToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &set{t: t, status: New(Timeouts{Poll: time.Second, Control: time.Second})}
	n := table.N()
	ports := testenv.FreePorts(t, 2*n)
	httpPorts := ports[:n]
	procs := map[int]*exec.Cmd{}
	s.start = func(r int) {
		t.Helper()
		cmd := exec.Command(bin, "--rank", strconv.Itoa(r), "--http-port", strconv.Itoa(httpPorts[r]), "--token-file", tokenFile,
			"--packing-factor", "100", "--fragment-size", "128", "--rate", "100000")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("EB_BUILDER=%s: %v", bin, err)
		}
		procs[r] = cmd
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		waitFor(t, fmt.Sprintf("rank %d serving", r), func() error {
			rep, err := s.status.Get(context.Background(), s.builders[r].URL)
			if err == nil && rep.State != builderapi.StateNotReady {
				err = fmt.Errorf("state %s", rep.State)
			}
			return err
		})
	}
	s.kill = func(r int) {
		_ = procs[r].Process.Kill()
		_ = procs[r].Wait()
	}
	addresses := make([]string, n)
	for r := range n {
		addresses[r] = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[n+r]))
		s.builders = append(s.builders, builderapi.Builder{Rank: int32(r), URL: "http://127.0.0.1:" + strconv.Itoa(httpPorts[r])})
		s.start(r)
	}
	s.doc = ranktable.New("contract", "", table, addresses, nil)
	return s
}

// waitLost waits for rank `by` to report exactly ranks lost.
func (s *set) waitLost(by int, lost ...int32) {
	s.t.Helper()
	waitFor(s.t, fmt.Sprintf("rank %d reporting %v lost", by, lost), func() error {
		rep, err := s.status.Get(context.Background(), s.builders[by].URL)
		if err == nil && !slices.Equal(rep.LostPeers, lost) {
			err = fmt.Errorf("lost_peers %v", rep.LostPeers)
		}
		return err
	})
}

// A run: configure, start, a unit dying and reported lost, the failover
// to a standby spare by a new epoch configured on the survivor and the
// spare, the same epoch again, pause, resume, stop.
func TestContractRunAndFailover(t *testing.T) {
	table := plan(t, ebv1.EventBuilderRunSpec{Units: 3})
	table.Ranks[2] = planner.Rank{Rank: 2, Port: 2, Role: planner.Spare, Unit: planner.NoUnit} // a warm spare
	contract(t, table, runAndFailover)
}

func runAndFailover(t *testing.T, set *set) {
	builders, doc, status := set.builders, set.doc, set.status
	ctx := context.Background()
	c := New(Timeouts{Poll: 2 * time.Second, Control: 2 * time.Second})
	const token = realToken

	if _, err := c.Configure(ctx, "wrong", builders, doc); err == nil {
		t.Errorf("a wrong token was accepted")
	}
	reps, err := c.Configure(ctx, token, builders, doc)
	if err != nil {
		t.Fatal(err)
	}
	if reps[0].State != builderapi.StateReady || reps[0].Epoch != 1 || reps[2].Role != builderapi.RoleDummy {
		t.Errorf("after configure: %+v / %+v", reps[0], reps[2])
	}
	if _, err := c.Send(ctx, token, builderapi.Start, builders); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "events built", func() error {
		rep, err := status.Get(ctx, builders[0].URL)
		if err == nil && (rep.State != builderapi.StateRunning || rep.EventsBuilt == 0) {
			err = fmt.Errorf("%s, %d events", rep.State, rep.EventsBuilt)
		}
		return err
	})

	// Rank 1 dies; rank 0 reports it lost.
	set.kill(1)
	set.waitLost(0, 1)
	// Failover: rank 1's unit moves to the spare (rank 2), by configure
	// of the survivors and the spare.
	next := doc
	next.Epoch = 2
	next.Ranks = append([]ranktable.Rank(nil), doc.Ranks...)
	next.Ranks[1].State, next.Ranks[2].State = ranktable.Dummy, ranktable.Live
	builders = []builderapi.Builder{builders[0], builders[2]}
	if _, err := c.Configure(ctx, token, builders, next); err != nil {
		t.Fatal(err)
	}
	before, _ := status.Get(ctx, builders[0].URL)
	waitFor(t, "epoch 2 on every builder, the spare building", func() error {
		if rep, err := status.Get(ctx, builders[0].URL); err != nil || rep.EventsBuilt <= before.EventsBuilt || len(rep.LostPeers) != 0 {
			return fmt.Errorf("rank 0 after the switch: %d events (had %d), lost %v, %v", rep.EventsBuilt, before.EventsBuilt, rep.LostPeers, err)
		}
		for _, b := range builders {
			rep, err := status.Get(ctx, b.URL)
			if err != nil {
				return err
			}
			if rep.Epoch != 2 || rep.PendingEpoch != 0 || rep.State != builderapi.StateRunning {
				return fmt.Errorf("rank %d: %+v", b.Rank, rep)
			}
		}
		rep, _ := status.Get(ctx, builders[1].URL)
		if rep.Role != builderapi.RoleLive || rep.EventsBuilt == 0 {
			return fmt.Errorf("spare: %s, %d events", rep.Role, rep.EventsBuilt)
		}
		return nil
	})
	// Configure of the same epoch and table again is no error.
	if _, err := c.Configure(ctx, token, builders, next); err != nil {
		t.Errorf("configure again: %v", err)
	}

	for _, step := range []struct {
		cmd   builderapi.Command
		state string
	}{{builderapi.Pause, builderapi.StatePaused}, {builderapi.Resume, builderapi.StateRunning}, {builderapi.Stop, builderapi.StateReady}} {
		if _, err := c.Send(ctx, token, step.cmd, builders); err != nil {
			t.Fatalf("%s: %v", step.cmd, err)
		}
		waitFor(t, string(step.cmd), func() error {
			for _, b := range builders {
				if rep, err := status.Get(ctx, b.URL); err != nil || rep.State != step.state {
					return fmt.Errorf("rank %d: %s %v", b.Rank, rep.State, err)
				}
			}
			return nil
		})
		if step.cmd == builderapi.Pause {
			// The builder answers PAUSED at once and pauses at the next
			// cycle boundary, when its activity turns paused: a resume
			// before that is kept (control-api.md), but the pause this
			// step checks is the one that took effect.
			waitFor(t, "the pause to take effect", func() error {
				for _, b := range builders {
					if rep, err := status.Get(ctx, b.URL); err != nil || rep.Activity != builderapi.ActivityPaused {
						return fmt.Errorf("rank %d: activity %s %v", b.Rank, rep.Activity, err)
					}
				}
				return nil
			})
		}
	}
}

// TestContractRejoin: in a set without spares (a run without a
// Fabric), a unit killed and restarted (its container restarted: same
// rank and ports) is taken back by the same table at a new epoch,
// configured on every unit, as the operator's rejoin does: every unit
// switches to it, nobody is lost any more, and the restarted unit builds.
// A lost unit rejoins by the same table at the next epoch, as a new
// process: one restarted, or one the operator reset in its session (what
// it does to a unit a partition cut off, which went on alone).
func TestContractRejoin(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, set *set, c *Client)
	}{
		{"restarted", func(t *testing.T, set *set, _ *Client) {
			set.kill(1)
			set.waitLost(0, 1)
			set.waitLost(2, 1)
			set.start(1)
		}},
		{"reset in its session", func(t *testing.T, set *set, c *Client) {
			reps, err := c.Send(context.Background(), realToken, builderapi.Reset, set.builders[1:2])
			if err != nil || reps[1].State != builderapi.StateNotReady {
				t.Fatalf("reset rank 1: %+v, %v; want NOT_READY", reps, err)
			}
			set.waitLost(0, 1)
			set.waitLost(2, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			contract(t, plan(t, ebv1.EventBuilderRunSpec{Units: 3}), func(t *testing.T, set *set) { rejoin(t, set, tc.lose) })
		})
	}
}

func rejoin(t *testing.T, set *set, lose func(*testing.T, *set, *Client)) {
	ctx := context.Background()
	c := New(Timeouts{Poll: 2 * time.Second, Control: 2 * time.Second})
	if _, err := c.Configure(ctx, realToken, set.builders, set.doc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, realToken, builderapi.Start, set.builders); err != nil {
		t.Fatal(err)
	}
	building := func(what string, epoch int64) {
		t.Helper()
		before := map[int32]int64{}
		for _, b := range set.builders {
			rep, _ := set.status.Get(ctx, b.URL)
			before[b.Rank] = rep.EventsBuilt
		}
		waitFor(t, what, func() error {
			for _, b := range set.builders {
				rep, err := set.status.Get(ctx, b.URL)
				switch {
				case err != nil:
					return err
				case rep.State != builderapi.StateRunning || rep.Epoch != epoch || rep.PendingEpoch != 0 || len(rep.LostPeers) != 0:
					return fmt.Errorf("rank %d: %s at epoch %d (pending %d), lost %v", b.Rank, rep.State, rep.Epoch, rep.PendingEpoch, rep.LostPeers)
				case rep.EventsBuilt <= before[b.Rank]:
					return fmt.Errorf("rank %d: %d events built, had %d", b.Rank, rep.EventsBuilt, before[b.Rank])
				}
			}
			return nil
		})
	}
	building("every unit building at epoch 1", 1)

	// Rank 1 is lost to its peers and comes back NOT_READY.
	lose(t, set, c)

	// The rejoin: the same table at epoch 2 on every unit, rank 1 started.
	next := set.doc
	next.Epoch = 2
	if _, err := c.Configure(ctx, realToken, set.builders, next); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, realToken, builderapi.Start, set.builders[1:2]); err != nil {
		t.Fatal(err)
	}
	building("every unit building at epoch 2, nobody lost", 2)
}

// An unfolded set: RUs build nothing, the BUs build every event once.
func TestContractUnfolded(t *testing.T) {
	contract(t, plan(t, ebv1.EventBuilderRunSpec{Units: 2, Layout: ebv1.LayoutUnfolded}), unfolded)
}

func unfolded(t *testing.T, set *set) {
	ctx := context.Background()
	c := New(Timeouts{Poll: 2 * time.Second, Control: 2 * time.Second})
	if got := []string{set.doc.Ranks[0].Function, set.doc.Ranks[1].Function, set.doc.Ranks[2].Function, set.doc.Ranks[3].Function}; !slices.Equal(got, []string{"RU", "RU", "BU", "BU"}) {
		t.Fatalf("the operator's table has functions %v, want RU RU BU BU", got)
	}
	if _, err := c.Configure(ctx, realToken, set.builders, set.doc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, realToken, builderapi.Start, set.builders); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both BUs building", func() error {
		for _, b := range set.builders[2:] {
			if rep, err := set.status.Get(ctx, b.URL); err != nil || rep.State != builderapi.StateRunning || rep.EventsBuilt < 1000 {
				return fmt.Errorf("rank %d: %s, %d events, %v", b.Rank, rep.State, rep.EventsBuilt, err)
			}
		}
		return nil
	})
	if _, err := c.Send(ctx, realToken, builderapi.Stop, set.builders[:1]); err != nil {
		t.Fatal(err)
	}
	var built, next int64
	waitFor(t, "the set stopped together", func() error {
		built = 0
		for _, b := range set.builders {
			rep, err := set.status.Get(ctx, b.URL)
			switch {
			case err != nil:
				return err
			case rep.State != builderapi.StateReady:
				return fmt.Errorf("rank %d: %s", b.Rank, rep.State)
			case rep.EventsIncomplete != 0 || rep.EventsDropped != 0 || rep.LastError != "":
				return fmt.Errorf("rank %d: %d incomplete, %d dropped, %q", b.Rank, rep.EventsIncomplete, rep.EventsDropped, rep.LastError)
			case b.Rank < 2 && rep.EventsBuilt != 0:
				return fmt.Errorf("RU rank %d built %d events", b.Rank, rep.EventsBuilt)
			}
			built += rep.EventsBuilt
			next = rep.NextEvent
		}
		return nil
	})
	if built != next {
		t.Errorf("%d events built, the sources made %d: every event is built exactly once", built, next)
	}
}

func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, what, check)
}

// statusOf reads rank r's report, failing the test if it does not answer.
func (s *set) statusOf(r int) builderapi.Report {
	s.t.Helper()
	rep, err := s.status.Get(context.Background(), s.builders[r].URL)
	if err != nil {
		s.t.Fatalf("rank %d: %v", r, err)
	}
	return rep
}

// waitStates waits for every rank of ranks to report state and activity.
func (s *set) waitStates(what string, state, activity string, ranks ...int) {
	s.t.Helper()
	waitFor(s.t, what, func() error {
		for _, r := range ranks {
			rep, err := s.status.Get(context.Background(), s.builders[r].URL)
			if err == nil && (rep.State != state || rep.Activity != activity) {
				err = fmt.Errorf("rank %d: %s, %s", r, rep.State, rep.Activity)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// sized is doc cut to its first n ranks, at epoch.
func sized(doc ranktable.Document, n int, epoch int64) ranktable.Document {
	doc.Epoch = epoch
	doc.Ranks = append([]ranktable.Rank(nil), doc.Ranks[:n]...)
	return doc
}

// A set does not build until every live unit of its table has started:
// the first started waits connecting, its peers not up.
func TestContractSetStartsTogether(t *testing.T) {
	contract(t, plan(t, ebv1.EventBuilderRunSpec{Units: 2}), func(t *testing.T, s *set) {
		ctx := context.Background()
		c := New(Timeouts{Poll: 2 * time.Second, Control: 2 * time.Second})
		if _, err := c.Configure(ctx, realToken, s.builders, s.doc); err != nil {
			t.Fatal(err)
		}
		if rep := s.statusOf(0); rep.Units != 2 || rep.Activity != builderapi.ActivityIdle || rep.Role != builderapi.RoleLive {
			t.Errorf("configured: units %d, activity %s, role %s; want 2, idle, live", rep.Units, rep.Activity, rep.Role)
		}
		if _, err := c.Send(ctx, realToken, builderapi.Start, s.builders[:1]); err != nil {
			t.Fatal(err)
		}
		s.waitStates("rank 0 connecting", builderapi.StateRunning, builderapi.ActivityConnecting, 0)
		if rep := s.statusOf(0); rep.EventsBuilt != 0 || len(rep.Peers) != 2 || rep.Peers[1].State == builderapi.PeerUp {
			t.Errorf("rank 0 alone: %d events, peers %+v; want none built and rank 1 not up", rep.EventsBuilt, rep.Peers)
		}
		if _, err := c.Send(ctx, realToken, builderapi.Start, s.builders[1:]); err != nil {
			t.Fatal(err)
		}
		s.waitStates("both building", builderapi.StateRunning, builderapi.ActivityBuilding, 0, 1)
		waitFor(t, "rank 1 up for rank 0", func() error {
			if rep := s.statusOf(0); rep.Peers[1].State != builderapi.PeerUp {
				return fmt.Errorf("peers %+v", rep.Peers)
			}
			return nil
		})
	})
}

// A running set refuses a table of another number of ranks (409); it is
// stopped together, configured with the new table (new ranks included)
// and started again, and goes on where it stopped: growing from 2 ranks
// to 3, then back to 2. Every event the sources made is counted once.
func TestContractResize(t *testing.T) {
	contract(t, plan(t, ebv1.EventBuilderRunSpec{Units: 3}), func(t *testing.T, s *set) {
		ctx := context.Background()
		c := New(Timeouts{Poll: 2 * time.Second, Control: 2 * time.Second})
		runOn := func(doc ranktable.Document, ranks ...int) {
			t.Helper()
			var bs []builderapi.Builder
			for _, r := range ranks {
				bs = append(bs, s.builders[r])
			}
			if _, err := c.Configure(ctx, realToken, bs, doc); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Send(ctx, realToken, builderapi.Start, bs); err != nil {
				t.Fatal(err)
			}
			s.waitStates(fmt.Sprintf("ranks %v building at epoch %d", ranks, doc.Epoch), builderapi.StateRunning, builderapi.ActivityBuilding, ranks...)
			for _, r := range ranks {
				if rep := s.statusOf(r); rep.Epoch != doc.Epoch || rep.Units != int32(len(doc.Ranks)) {
					t.Errorf("rank %d: epoch %d, units %d; want %d, %d", r, rep.Epoch, rep.Units, doc.Epoch, len(doc.Ranks))
				}
			}
		}
		// resize refuses next on a running rank 0, stops the set of ranks and
		// returns where it stopped.
		resize := func(next ranktable.Document, ranks ...int) int64 {
			t.Helper()
			_, err := c.Configure(ctx, realToken, s.builders[:1], next)
			var errs *builderapi.Errors
			if !errors.As(err, &errs) || errs.Builders[0].Status != http.StatusConflict || errs.Builders[0].State != builderapi.StateRunning ||
				!strings.Contains(errs.Builders[0].Message, "number of ranks cannot change while running") {
				t.Fatalf("a table of %d ranks sent to a running set: %v; want 409 naming the number of ranks", len(next.Ranks), err)
			}
			waitFor(t, "some events built", func() error {
				if rep := s.statusOf(0); rep.EventsBuilt == 0 {
					return errors.New("none yet")
				}
				return nil
			})
			if _, err := c.Send(ctx, realToken, builderapi.Stop, s.builders[:1]); err != nil {
				t.Fatal(err)
			}
			s.waitStates("the set stopped together", builderapi.StateReady, builderapi.ActivityIdle, ranks...)
			return s.statusOf(0).NextEvent
		}

		runOn(sized(s.doc, 2, 1), 0, 1)
		at := resize(sized(s.doc, 3, 2), 0, 1)
		runOn(sized(s.doc, 3, 2), 0, 1, 2)
		if rep := s.statusOf(2); rep.NextEvent < at {
			t.Errorf("the new rank 2 is at event %d, the set stopped at %d: a resized set goes on, never back", rep.NextEvent, at)
		}
		resize(sized(s.doc, 2, 3), 0, 1, 2)
		runOn(sized(s.doc, 2, 3), 0, 1)
		if _, err := c.Send(ctx, realToken, builderapi.Stop, s.builders[:1]); err != nil {
			t.Fatal(err)
		}
		s.waitStates("the set stopped", builderapi.StateReady, builderapi.ActivityIdle, 0, 1)
		var counted int64
		for r := range s.builders {
			rep := s.statusOf(r)
			counted += rep.EventsBuilt + rep.EventsDropped
		}
		if next := s.statusOf(0).NextEvent; counted != next {
			t.Errorf("%d events built or dropped, the sources made %d: every event is counted once across resizes", counted, next)
		}
	})
}

// call sends method path to rank r's builder with the bearer token (none
// when empty) and body; it returns the status code, the decoded JSON body
// (nil when it is not JSON) and the response's headers.
func (s *set) call(r int, method, path, token, body string) (int, map[string]any, http.Header) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.builders[r].URL+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		doc = nil
	}
	return resp.StatusCode, doc, resp.Header
}

// Refusals: each names what is wrong, with the same status on both sides.
// Authentication comes first (an unknown command with a wrong token is
// 401, not 404); a refused transition is 409 with the state and the
// allowed commands; a bad table is 400 naming the field; epochs only go
// forward.
func TestContractRefusals(t *testing.T) {
	contract(t, plan(t, ebv1.EventBuilderRunSpec{Units: 2}), func(t *testing.T, s *set) {
		configure := func(doc ranktable.Document, rank int) string {
			body, err := json.Marshal(map[string]any{"rank": rank, "table": doc})
			if err != nil {
				t.Fatal(err)
			}
			return string(body)
		}
		good := configure(s.doc, 0)
		bad := func(edit func(d *ranktable.Document)) string {
			d := s.doc
			d.Ranks = append([]ranktable.Rank(nil), s.doc.Ranks...)
			edit(&d)
			return configure(d, 0)
		}
		older := s.doc
		older.Epoch = 2
		other := older
		other.Ranks = append([]ranktable.Rank(nil), s.doc.Ranks...)
		other.Ranks[1].State = ranktable.Dummy
		for _, tc := range []struct {
			name          string
			method, path  string
			token, body   string
			code          int
			says          string // in "error"
			state         string // the state a 409 names
			authenticates bool   // a 401 carries WWW-Authenticate: Bearer
		}{
			{name: "no token", method: "POST", path: "/control/start", code: 401, says: "missing Authorization: Bearer <token>", authenticates: true},
			{name: "wrong token", method: "POST", path: "/control/start", token: "wrong", code: 401, says: "wrong bearer token", authenticates: true},
			{name: "unknown command, wrong token", method: "POST", path: "/control/launch", token: "wrong", code: 401, says: "wrong bearer token", authenticates: true},
			{name: "unknown command", method: "POST", path: "/control/launch", token: realToken, code: 404, says: "unknown command 'launch'"},
			{name: "a command by GET", method: "GET", path: "/control/start", token: realToken, code: 405},
			{name: "start before configure", method: "POST", path: "/control/start", token: realToken, code: 409, says: "cannot start in state NOT_READY", state: builderapi.StateNotReady},
			{name: "start with a body", method: "POST", path: "/control/start", token: realToken, body: "{}", code: 400, says: "takes no body"},
			{name: "no table", method: "POST", path: "/control/configure", token: realToken, body: `{"rank":0}`, code: 400, says: "table"},
			{name: "wrong version", method: "POST", path: "/control/configure", token: realToken, code: 400, says: "table.version",
				body: bad(func(d *ranktable.Document) { d.Version = "v0" })},
			{name: "epoch 0", method: "POST", path: "/control/configure", token: realToken, code: 400, says: "table.epoch",
				body: bad(func(d *ranktable.Document) { d.Epoch = 0 })},
			{name: "an address without a port", method: "POST", path: "/control/configure", token: realToken, code: 400, says: "table.ranks[1].address",
				body: bad(func(d *ranktable.Document) { d.Ranks[1].Address = "nowhere" })},
			{name: "two ranks on one address", method: "POST", path: "/control/configure", token: realToken, code: 400, says: "table.ranks[1].address",
				body: bad(func(d *ranktable.Document) { d.Ranks[1].Address = d.Ranks[0].Address })},
			{name: "a rank out of place", method: "POST", path: "/control/configure", token: realToken, code: 400, says: "table.ranks[1].rank",
				body: bad(func(d *ranktable.Document) { d.Ranks[1].Rank = 0 })},
			{name: "no live rank", method: "POST", path: "/control/configure", token: realToken, code: 400, says: "no live rank",
				body: bad(func(d *ranktable.Document) { d.Ranks[0].State, d.Ranks[1].State = ranktable.Dummy, ranktable.Dummy })},
			{name: "an unread source on a rank that reads", method: "POST", path: "/control/configure", token: realToken, code: 400,
				says: "table.ranks[0].sourceUnread", body: bad(func(d *ranktable.Document) { d.Ranks[0].SourceUnread = true })},
			{name: "a stream name with a space", method: "POST", path: "/control/configure", token: realToken, code: 400,
				says: "table.ranks[0].sources[0] 'tell 40': expected a stream name", body: bad(func(d *ranktable.Document) { d.Ranks[0].Sources = []string{"tell 40"} })},
			{name: "a stream read and unread", method: "POST", path: "/control/configure", token: realToken, code: 400,
				says: "table.unreadStreams[0] 'a': also at table.ranks[0].sources[0]", body: bad(func(d *ranktable.Document) {
					d.Ranks[0].Sources, d.UnreadStreams = []string{"a"}, []string{"a"}
				})},
			{name: "streams on a BU", method: "POST", path: "/control/configure", token: realToken, code: 400,
				says: "table.ranks[1].sources: on a rank that runs no RU (function BU)", body: bad(func(d *ranktable.Document) {
					d.Ranks[1].Function, d.Ranks[1].Sources = "BU", []string{"b"}
				})},
			{name: "unread streams that are no array", method: "POST", path: "/control/configure", token: realToken, code: 400,
				says: "table.unreadStreams: expected an array of stream names", body: strings.Replace(good, `"ranks":`, `"unreadStreams":"a","ranks":`, 1)},
			{name: "another rank than --rank", method: "POST", path: "/control/configure", token: realToken, code: 400, says: "--rank 0",
				body: configure(s.doc, 1)},
			{name: "the table", method: "POST", path: "/control/configure", token: realToken, body: configure(older, 0), code: 200},
			{name: "the same table again", method: "POST", path: "/control/configure", token: realToken, body: configure(older, 0), code: 200},
			{name: "another table at that epoch", method: "POST", path: "/control/configure", token: realToken, body: configure(other, 0), code: 409,
				says: "epoch 2", state: builderapi.StateReady},
			{name: "an older epoch", method: "POST", path: "/control/configure", token: realToken, body: good, code: 409,
				says: "epochs only go forward", state: builderapi.StateReady},
			{name: "pause when READY", method: "POST", path: "/control/pause", token: realToken, code: 409, says: "cannot pause in state READY",
				state: builderapi.StateReady},
		} {
			code, doc, header := s.call(0, tc.method, tc.path, tc.token, tc.body)
			msg, _ := doc["error"].(string)
			switch {
			case code != tc.code:
				t.Errorf("%s: %d %q, want %d", tc.name, code, msg, tc.code)
			case tc.says != "" && !strings.Contains(msg, tc.says):
				t.Errorf("%s: error %q does not say %q", tc.name, msg, tc.says)
			case tc.authenticates && header.Get("WWW-Authenticate") != "Bearer":
				t.Errorf("%s: WWW-Authenticate %q, want Bearer", tc.name, header.Get("WWW-Authenticate"))
			case tc.state != "" && (doc["state"] != tc.state || doc["allowed"] == nil):
				t.Errorf("%s: state %v, allowed %v; want %s and the commands it allows", tc.name, doc["state"], doc["allowed"], tc.state)
			}
		}
	})
}

// Reads need no token: /healthz always, /readyz once configured, /status,
// /metrics in Prometheus text with the counters the status shows. A reset
// forgets the table (NOT_READY, any epoch accepted) but the status keeps
// showing its epoch and role until the next configure.
func TestContractReads(t *testing.T) {
	contract(t, plan(t, ebv1.EventBuilderRunSpec{Units: 2}), func(t *testing.T, s *set) {
		ctx := context.Background()
		c := New(Timeouts{Poll: 2 * time.Second, Control: 2 * time.Second})
		get := func(path string) (int, string) {
			resp, err := http.Get(s.builders[0].URL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		if code, _ := get("/healthz"); code != 200 {
			t.Errorf("/healthz: %d", code)
		}
		if code, _ := get("/readyz"); code != 503 {
			t.Errorf("/readyz before configure: %d, want 503", code)
		}
		doc := s.doc
		doc.Epoch = 5
		if _, err := c.Configure(ctx, realToken, s.builders, doc); err != nil {
			t.Fatal(err)
		}
		if code, _ := get("/readyz"); code != 200 {
			t.Errorf("/readyz once configured: %d, want 200", code)
		}
		code, metrics := get("/metrics")
		for _, name := range []string{"eb_up ", "eb_epoch 5", `eb_state{state="READY"} 1`, "eb_events_built_total ", "eb_events_dropped_total ", "eb_building_seconds_total "} {
			if !strings.Contains(metrics, "\n"+name) {
				t.Errorf("/metrics (%d) has no line starting %q", code, name)
			}
		}
		reps, err := c.Send(ctx, realToken, builderapi.Reset, s.builders[:1])
		if err != nil {
			t.Fatal(err)
		}
		if rep := reps[0]; rep.State != builderapi.StateNotReady || rep.Epoch != 5 || rep.Role != builderapi.RoleLive ||
			!slices.Equal(rep.Allowed, []string{"configure", "reset"}) {
			t.Errorf("after reset: %s at epoch %d, role %s, allowed %v; want NOT_READY still showing epoch 5, live, allowed configure and reset",
				rep.State, rep.Epoch, rep.Role, rep.Allowed)
		}
		doc.Epoch = 1 // a reset builder holds no table: any epoch goes
		if _, err := c.Configure(ctx, realToken, s.builders[:1], doc); err != nil {
			t.Errorf("configure epoch 1 after a reset: %v", err)
		}
	})
}

// A token file with no token stops eb-builder at start, as it does the
// emulation's StartPod (builderemu.TestStartPod): a builder must never
// serve with its control API open or off by accident.
func TestContractEmptyTokenFileStopsTheStart(t *testing.T) {
	bin := os.Getenv("EB_BUILDER")
	if bin == "" {
		testenv.Unavailable(t, "EB_BUILDER is not set: no eb-builder binary to start (make test-operator builds one and sets it)")
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--rank", "0", "--http-port", strconv.Itoa(testenv.FreePorts(t, 1)[0]), "--token-file", tokenFile).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() <= 0 || !strings.Contains(string(out), "the file is empty") {
		t.Errorf("eb-builder with an empty token file: %v, %q; want it to exit non-zero saying the file is empty", err, out)
	}
}

// A pod's command line is one eb-builder takes, for every shape of run
// (builderpod.Args): each starts a real eb-builder that serves /healthz,
// where an unknown flag, a value out of its range or flags that exclude
// each other would stop it at once (exit 2, naming the flag).
func TestContractEbBuilderTakesThePodsCommandLine(t *testing.T) {
	bin := os.Getenv("EB_BUILDER")
	if bin == "" {
		testenv.Unavailable(t, "EB_BUILDER is not set: no eb-builder binary to start (make test-operator builds one and sets it)")
	}
	dir := t.TempDir()
	files := map[string]string{"--token-file": filepath.Join(dir, "token"), "--data-key-file": filepath.Join(dir, "data-key")}
	for _, path := range files {
		if err := os.WriteFile(path, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	side := ebv1.SideContainer{Image: "side:1"}
	shapes := []struct {
		name    string
		builder ebv1.BuilderSpec
		layout  ebv1.Layout
		place   *builderpod.Placement
	}{
		{name: "tcp, generator, discard, every tuned setting", builder: ebv1.BuilderSpec{
			Transport: ebv1.TransportTCP, PackingFactor: 100,
			Source:           &ebv1.SourceSpec{Generator: &ebv1.GeneratorSource{FragmentSize: 64}},
			Output:           &ebv1.OutputSpec{Discard: &ebv1.DiscardOutput{}},
			IncompleteEvents: ebv1.IncompleteFlag,
			PeerTimeout:      &metav1.Duration{Duration: 1500 * time.Millisecond},
			JoinTimeout:      &metav1.Duration{Duration: 10 * time.Second},
			BusyPoll:         &metav1.Duration{Duration: 2 * time.Millisecond},
			DataThreads:      ptr.To(int32(1)), // at most the CPUs of any machine the test runs on
			TCPStreams:       ptr.To(int32(2)),
		}},
		{name: "generator checked in the builder (the defaults)", builder: ebv1.BuilderSpec{
			PackingFactor: 1000, Source: &ebv1.SourceSpec{Generator: &ebv1.GeneratorSource{FragmentSize: 128}},
			Output: &ebv1.OutputSpec{Check: &ebv1.CheckOutput{}},
		}},
		{name: "verbs on a fabric endpoint's device", builder: ebv1.BuilderSpec{
			Transport: ebv1.TransportVerbs, PackingFactor: 1000,
			Source: &ebv1.SourceSpec{Generator: &ebv1.GeneratorSource{FragmentSize: 128}},
			Output: &ebv1.OutputSpec{Discard: &ebv1.DiscardOutput{}},
		}, place: &builderpod.Placement{Endpoint: "e0", Node: "n0", RDMADevice: "mlx5_0"}},
		{name: "readout driver's ring in, consumer's ring out", builder: ebv1.BuilderSpec{
			PackingFactor: 1000,
			Source:        &ebv1.SourceSpec{Shm: &ebv1.ShmSource{RingMiB: 16, Driver: side}},
			Output:        &ebv1.OutputSpec{Shm: &ebv1.ShmOutput{RingMiB: 8, Consumer: side}},
		}},
		{name: "recorded MFPs from a file", builder: ebv1.BuilderSpec{
			PackingFactor: 1000,
			Source:        &ebv1.SourceSpec{File: &ebv1.FileSource{ClaimName: "recorded", Path: "run-{rank}.mfp"}},
			Output:        &ebv1.OutputSpec{Discard: &ebv1.DiscardOutput{}},
		}},
		{name: "unfolded", layout: ebv1.LayoutUnfolded, builder: ebv1.BuilderSpec{
			PackingFactor: 1000, Source: &ebv1.SourceSpec{Generator: &ebv1.GeneratorSource{FragmentSize: 128}},
			Output: &ebv1.OutputSpec{Discard: &ebv1.DiscardOutput{}},
		}},
	}
	for _, shape := range shapes {
		t.Run(shape.name, func(t *testing.T) {
			run := &ebv1.EventBuilderRun{Spec: ebv1.EventBuilderRunSpec{Units: 2, Layout: shape.layout, Builder: shape.builder}}
			args := builderpod.Args(run, 1, shape.place)
			port := strconv.Itoa(testenv.FreePorts(t, 1)[0])
			for i := 0; i+1 < len(args); i++ { // the pod's paths and port, here
				if path, ok := files[args[i]]; ok {
					args[i+1] = path
				} else if args[i] == "--http-port" {
					args[i+1] = port
				}
			}
			startServing(t, bin, args, port)
		})
	}
}

// startServing starts eb-builder with args and waits until it serves
// /healthz on port; it fails the test, with the builder's output, if the
// builder exits first.
func startServing(t *testing.T, bin string, args []string, port string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("EB_BUILDER=%s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitFor(t, fmt.Sprintf("eb-builder %q serving /healthz", args), func() error {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("eb-builder %q exited (%v): %s", args, err, out.String())
		default:
		}
		resp, err := http.Get("http://127.0.0.1:" + port + "/healthz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz: %d", resp.StatusCode)
		}
		return nil
	})
}
