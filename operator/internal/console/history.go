package console

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// Window is how far back a run's page draws its event rate.
const Window = 15 * time.Minute

type sample struct {
	at     time.Time
	events int64
}

// RatePoint is the event rate between two samples, at the later one.
type RatePoint struct {
	At   time.Time
	Rate float64 // events per second
}

// History keeps, per run, the events built as its status said at each of
// the operator's samples (status.lastSampleTime), over the last window,
// for the rate to be drawn without a Prometheus, and each failover the
// status recorded (status.lastFailover holds the last one only), for the
// failover timeline. It forgets runs that are gone at the next look.
type History struct {
	mu        sync.Mutex
	window    time.Duration
	samples   map[types.NamespacedName][]sample
	failovers map[types.NamespacedName][]ebv1.FailoverStatus
}

// MaxFailovers bounds a run's failover timeline: the newest are kept.
const MaxFailovers = 50

func NewHistory(window time.Duration) *History {
	return &History{window: window, samples: map[types.NamespacedName][]sample{},
		failovers: map[types.NamespacedName][]ebv1.FailoverStatus{}}
}

// RecordFailover adds the run's last failover as its status records it,
// once: a record seen again (same epoch and observed time) replaces the
// one kept, which the operator completes when every builder took the new
// table (configuredTime).
func (h *History) RecordFailover(run types.NamespacedName, f ebv1.FailoverStatus) {
	h.mu.Lock()
	defer h.mu.Unlock()
	timeline := h.failovers[run]
	if n := len(timeline); n > 0 && timeline[n-1].Epoch == f.Epoch && timeline[n-1].ObservedTime.Equal(&f.ObservedTime) {
		timeline[n-1] = f
		return
	}
	timeline = append(timeline, f)
	if len(timeline) > MaxFailovers {
		timeline = append([]ebv1.FailoverStatus(nil), timeline[len(timeline)-MaxFailovers:]...)
	}
	h.failovers[run] = timeline
}

// Failovers is the run's failover timeline, oldest first.
func (h *History) Failovers(run types.NamespacedName) []ebv1.FailoverStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ebv1.FailoverStatus(nil), h.failovers[run]...)
}

// Record adds a sample of run: its eventsBuilt at the operator's sample
// time. The same sample twice counts once; a count that went down (the run
// was recreated, its counters restarted) starts the series again.
func (h *History) Record(run types.NamespacedName, at time.Time, events int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	series := h.samples[run]
	if n := len(series); n > 0 {
		last := series[n-1]
		if !at.After(last.at) {
			return
		}
		if events < last.events {
			series = nil
		}
	}
	series = append(series, sample{at, events})
	first := 0
	for first < len(series)-1 && at.Sub(series[first].at) > h.window {
		first++
	}
	h.samples[run] = append([]sample(nil), series[first:]...)
}

// Forget drops the runs not in keep.
func (h *History) Forget(keep map[types.NamespacedName]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for run := range h.samples {
		if !keep[run] {
			delete(h.samples, run)
		}
	}
	for run := range h.failovers {
		if !keep[run] {
			delete(h.failovers, run)
		}
	}
}

// Rates is run's event rate between consecutive samples, oldest first.
func (h *History) Rates(run types.NamespacedName) []RatePoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	series := h.samples[run]
	var points []RatePoint
	for i := 1; i < len(series); i++ {
		dt := series[i].at.Sub(series[i-1].at).Seconds()
		points = append(points, RatePoint{At: series[i].at, Rate: float64(series[i].events-series[i-1].events) / dt})
	}
	return points
}

// Sample records every run's counters from c, as the operator last wrote
// them (the status's lastSampleTime), and forgets the runs that are gone.
func (h *History) Sample(ctx context.Context, c client.Reader) error {
	var runs ebv1.EventBuilderRunList
	if err := c.List(ctx, &runs); err != nil {
		return err
	}
	keep := map[types.NamespacedName]bool{}
	for _, run := range runs.Items {
		key := types.NamespacedName{Namespace: run.Namespace, Name: run.Name}
		keep[key] = true
		if t := run.Status.LastSampleTime; t != nil {
			h.Record(key, t.Time, run.Status.EventsBuilt)
		}
		if f := run.Status.LastFailover; f != nil {
			h.RecordFailover(key, *f)
		}
	}
	h.Forget(keep)
	return nil
}

// Sampler is History.Sample every interval until ctx ends, on every replica
// of the operator (its cache has the runs, leader or not).
type Sampler struct {
	History  *History
	Reader   client.Reader
	Interval time.Duration
}

func (s Sampler) Start(ctx context.Context) error {
	ticker := time.NewTicker(s.Interval)
	defer ticker.Stop()
	for {
		_ = s.History.Sample(ctx, s.Reader) // a failed look leaves a gap in the line
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (Sampler) NeedLeaderElection() bool { return false }

// Rate chart geometry, in SVG user units.
const (
	chartWidth, chartHeight = 600, 120
	chartLeft, chartBottom  = 70, 20
)

// RateSVG draws points over the window ending at now: time across, rate
// up from zero to the largest, with that largest written on the axis.
func RateSVG(points []RatePoint, now time.Time, window time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="rate" width="%d" height="%d">`,
		chartWidth, chartHeight)
	plotW, plotH := float64(chartWidth-chartLeft-10), float64(chartHeight-chartBottom-10)
	fmt.Fprintf(&b, `<rect x="%d" y="10" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`, chartLeft, plotW, plotH)
	top := 0.0
	for _, p := range points {
		top = max(top, p.Rate)
	}
	if len(points) == 0 || top <= 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d">no events built in the last %s</text></svg>`, chartLeft+10, chartHeight/2,
			window)
		return b.String()
	}
	fmt.Fprintf(&b, `<text x="2" y="18">%.3g/s</text><text x="2" y="%.0f">0</text>`, top, 10+plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d">-%s</text><text x="%.0f" y="%d">now</text>`, chartLeft, chartHeight-4,
		window, float64(chartLeft)+plotW-24, chartHeight-4)
	b.WriteString(`<polyline fill="none" stroke="#2a7" stroke-width="2" points="`)
	start := now.Add(-window)
	for i, p := range points {
		x := float64(chartLeft) + plotW*max(0, p.At.Sub(start).Seconds())/window.Seconds()
		y := 10 + plotH*(1-max(0, p.Rate)/top)
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", x, y)
	}
	b.WriteString(`"/></svg>`)
	return b.String()
}
