package builderpoll

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderstatus"
)

// fakeBuilders answer GET /status by URL: a report, or silence.
type fakeBuilders struct {
	mu      sync.Mutex
	answers map[string]builderapi.Report // by URL; missing: no answer
	asked   map[string]int
}

func (f *fakeBuilders) get(_ context.Context, url string) (builderapi.Report, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked[url]++
	if rep, ok := f.answers[url]; ok {
		return rep, nil
	}
	return builderapi.Report{}, errors.New("no answer")
}

func TestPollerPollsInTheBackgroundAndWakesTheRun(t *testing.T) {
	builders := &fakeBuilders{answers: map[string]builderapi.Report{
		"http://a": {State: "RUNNING", EventsBuilt: 10},
		"http://b": {State: "READY"},
	}, asked: map[string]int{}}
	run := types.NamespacedName{Namespace: "daq", Name: "r"}
	woken := make(chan *builderstatus.Poll, 16)
	p := New(builders.get, func(key types.NamespacedName, poll *builderstatus.Poll) {
		if key != run {
			t.Errorf("woke %v, want %v", key, run)
		}
		woken <- poll
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Start(ctx) }()
	next := func(what string) *builderstatus.Poll {
		t.Helper()
		select {
		case poll := <-woken:
			return poll
		case <-time.After(5 * time.Second):
			t.Fatalf("no poll %s within 5 s", what)
			return nil
		}
	}

	if p.Fresh(run) != nil || p.Latest(run) != nil {
		t.Fatal("a poll before the run was tracked")
	}
	p.Track(run, []Target{{Rank: 1, Pod: "uid-b", URL: "http://b"}, {Rank: 0, Pod: "uid-a", URL: "http://a"}}, time.Hour)
	first := next("after Track") // at once, not after an hour
	if len(first.Reports) != 2 || first.Reports[0].EventsBuilt != 10 || first.Pods[1] != "uid-b" {
		t.Errorf("first poll %+v, want both builders' reports by rank", first)
	}
	if fresh := p.Fresh(run); fresh == nil || fresh.Time != first.Time {
		t.Errorf("Fresh = %+v, want the first poll", fresh)
	}
	if p.Fresh(run) != nil {
		t.Error("Fresh gave the same poll twice")
	}
	if p.Latest(run) == nil {
		t.Error("Latest lost the poll Fresh gave")
	}

	// The same targets again: no new poll; a replaced pod: polled at once.
	p.Track(run, []Target{{Rank: 0, Pod: "uid-a", URL: "http://a"}, {Rank: 1, Pod: "uid-b", URL: "http://b"}}, time.Hour)
	select {
	case poll := <-woken:
		t.Fatalf("polled again for unchanged targets: %+v", poll)
	case <-time.After(200 * time.Millisecond):
	}
	builders.mu.Lock()
	delete(builders.answers, "http://b") // b's server is gone
	builders.mu.Unlock()
	p.Track(run, []Target{{Rank: 0, Pod: "uid-a2", URL: "http://a"}, {Rank: 1, Pod: "uid-b", URL: "http://b"}}, time.Hour)
	second := next("after a pod was replaced")
	if second.Pods[0] != "uid-a2" || len(second.Reports) != 1 {
		t.Errorf("second poll %+v, want the new pod of rank 0 and no report from rank 1", second)
	}
	// b had answered before: its silence is a row, confirmed by a poll at
	// once (the interval is an hour).
	confirming := next("confirming that b fell silent")
	if len(confirming.Reports) != 1 || confirming.Time.Sub(second.Time) > 2*time.Second {
		t.Errorf("confirming poll %+v, %v after the one b left unanswered", confirming, confirming.Time.Sub(second.Time))
	}
	if rows := p.Silences(run); len(rows) != 1 || rows[1].Polls != 2 || rows[1].Pod != "uid-b" || !rows[1].Since.Equal(second.Time) {
		t.Errorf("silences %+v, want rank 1 (uid-b) silent for 2 polls since %v", rows, second.Time)
	}

	// Kicked: polled at once; then every interval.
	p.Kick(run)
	next("after Kick")
	// Commands sent: the poll before them is fresh for no one; one after is.
	// The builders answer nothing meanwhile (the poll Changed kicks waits on
	// them), so no newer poll can land before the check.
	p.Latest(run) // (as a reconcile that decided on it)
	builders.mu.Lock()
	p.Changed(run)
	if p.Fresh(run) != nil || p.Latest(run) != nil {
		t.Error("a poll from before the commands is fresh, or latest, after Changed")
	}
	builders.mu.Unlock()
	after := next("after Changed")
	if fresh := p.Fresh(run); fresh == nil || fresh.Time != after.Time {
		t.Errorf("Fresh after the new poll = %+v, want it", fresh)
	}
	p.Track(run, []Target{{Rank: 0, Pod: "uid-a2", URL: "http://a"}}, 20*time.Millisecond)
	next("after the targets changed") // rank 1 dropped
	start := time.Now()
	next("at the interval")
	next("at the next interval")
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("two polls 20 ms apart took %v", took)
	}

	// Forgotten, then stopped: no more polls.
	p.Forget(run)
	if p.Latest(run) != nil || p.Silences(run) != nil {
		t.Error("a forgotten run kept its polls")
	}
	time.Sleep(100 * time.Millisecond) // a poll in flight when forgotten may still land
	for len(woken) > 0 {
		<-woken
	}
	builders.mu.Lock()
	asked := builders.asked["http://a"]
	builders.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	builders.mu.Lock()
	if builders.asked["http://a"] != asked {
		t.Errorf("a forgotten run is still polled: %d then %d requests", asked, builders.asked["http://a"])
	}
	builders.mu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
