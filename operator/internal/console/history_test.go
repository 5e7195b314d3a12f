package console

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/shiftview"
)

func TestHistoryKeepsTheWindowAndRestartsOnAResetCounter(t *testing.T) {
	run := types.NamespacedName{Namespace: "daq", Name: "physics"}
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	h := NewHistory(time.Minute)
	for i := range 40 { // every 2 s for 78 s, 1000 events a second
		h.Record(run, t0.Add(time.Duration(2*i)*time.Second), int64(2000*i))
	}
	h.Record(run, t0.Add(78*time.Second), 78000) // the same sample again
	rates := h.Rates(run)
	if len(rates) != 30 {
		t.Fatalf("%d rates kept, want the 30 of the last minute", len(rates))
	}
	for _, p := range rates {
		if p.Rate != 1000 {
			t.Errorf("rate %v at %v, want 1000", p.Rate, p.At)
		}
	}
	if first := rates[0].At; first.Before(t0.Add(18 * time.Second)) {
		t.Errorf("oldest rate at %v, older than the window", first)
	}

	// The run recreated: its counter starts again from zero.
	h.Record(run, t0.Add(80*time.Second), 500)
	h.Record(run, t0.Add(82*time.Second), 2500)
	if rates := h.Rates(run); len(rates) != 1 || rates[0].Rate != 1000 {
		t.Errorf("after a reset: %v, want one rate of 1000", rates)
	}
	h.Forget(map[types.NamespacedName]bool{})
	if rates := h.Rates(run); rates != nil {
		t.Errorf("a forgotten run still has %v", rates)
	}
}

func TestRateSVGDrawsEachPointWithinTheChart(t *testing.T) {
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	points := []RatePoint{{now.Add(-10 * time.Minute), 1e6}, {now.Add(-5 * time.Minute), 3e7}, {now, 2e7}}
	svg := RateSVG(points, now, Window)
	line := svg[strings.Index(svg, `points="`)+len(`points="`):]
	line = line[:strings.Index(line, `"`)]
	if got := len(strings.Fields(line)); got != 3 {
		t.Fatalf("%d points drawn, want 3: %s", got, svg)
	}
	if !strings.Contains(svg, ">3e+07/s<") {
		t.Errorf("the axis does not name the top rate: %s", svg)
	}
	// The newest point at the right edge, the largest at the top.
	if !strings.Contains(line, "590.0,") || !strings.Contains(line, ",10.0") {
		t.Errorf("points %s: want the newest at x 590 and the largest at y 10", line)
	}
	if empty := RateSVG(nil, now, Window); !strings.Contains(empty, "no events built in the last 15m0s") {
		t.Errorf("no samples: %s", empty)
	}
}

func TestHistoryKeepsEachFailoverOnceTheNewestLast(t *testing.T) {
	run := types.NamespacedName{Namespace: "daq", Name: "physics"}
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	record := func(epoch int64, at time.Time) ebv1.FailoverStatus {
		return ebv1.FailoverStatus{Epoch: epoch, ObservedTime: metav1.NewMicroTime(at), Outcome: ebv1.OutcomeMovedToSpare,
			Duration: metav1.Duration{Duration: 2 * time.Second},
			Moves:    []ebv1.UnitMove{{Unit: 1, Reason: "PeerLost", FailedRank: 1, FailedEndpoint: "srv-a-0"}}}
	}
	h := NewHistory(time.Minute)
	first := record(2, t0)
	h.RecordFailover(run, first)
	configured := first
	configured.ConfiguredTime = ptrMicro(t0.Add(time.Second))
	h.RecordFailover(run, configured) // sampled again once completed: the same failover
	h.RecordFailover(run, record(3, t0.Add(time.Minute)))
	got := h.Failovers(run)
	if len(got) != 2 || got[0].Epoch != 2 || got[0].ConfiguredTime == nil || got[1].Epoch != 3 {
		t.Fatalf("timeline %+v: want epochs 2 (completed) then 3", got)
	}
	for i := range MaxFailovers + 5 {
		h.RecordFailover(run, record(int64(4+i), t0.Add(time.Duration(2+i)*time.Minute)))
	}
	if got := h.Failovers(run); len(got) != MaxFailovers || got[len(got)-1].Epoch != int64(4+MaxFailovers+4) {
		t.Errorf("after %d more: %d kept, newest epoch %d; want the newest %d", MaxFailovers+5, len(got),
			got[len(got)-1].Epoch, MaxFailovers)
	}

	// The page shows each, numbered, and the status's last one alone when
	// the operator saw none.
	text := shiftview.Timeline([]ebv1.FailoverStatus{first, record(3, t0.Add(time.Minute))}, &ebv1.EventBuilderRun{}, t0.Add(2*time.Minute))
	if !strings.Contains(text, "Failover 1 of 2: MovedToSpare at epoch 2, 2m0s ago") ||
		!strings.Contains(text, "Failover 2 of 2: MovedToSpare at epoch 3, 1m0s ago") || !strings.Contains(text, "srv-a-0") {
		t.Errorf("timeline text:\n%s", text)
	}
	last := &ebv1.EventBuilderRun{Status: ebv1.EventBuilderRunStatus{LastFailover: &first}}
	if text := shiftview.Timeline(nil, last, t0.Add(time.Minute)); !strings.HasPrefix(text, "Last failover: MovedToSpare at epoch 2") {
		t.Errorf("no timeline, status only:\n%s", text)
	}

	h.Forget(map[types.NamespacedName]bool{})
	if got := h.Failovers(run); len(got) != 0 {
		t.Errorf("a forgotten run still has %d failovers", len(got))
	}
}

func ptrMicro(t time.Time) *metav1.MicroTime {
	m := metav1.NewMicroTime(t)
	return &m
}
