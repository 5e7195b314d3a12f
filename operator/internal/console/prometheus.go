package console

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/types"
)

// prometheusStep is the spacing of the points a Prometheus is asked for.
const prometheusStep = 15 * time.Second

// prometheusTimeout bounds one query: a page waits for it.
const prometheusTimeout = 3 * time.Second

// Prometheus reads a run's event rate from a Prometheus that scrapes its
// builders (the chart's PodMonitor): the rate of their eb_events_built_total
// counters, summed over the run's pods, which outlives the operator's own
// samples (kept in memory, from its start).
type Prometheus struct {
	URL string
	api promv1.API
}

// NewPrometheus is the Prometheus whose HTTP API is at url.
func NewPrometheus(url string) (*Prometheus, error) {
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return nil, fmt.Errorf("--console-prometheus-url %q: %w", url, err)
	}
	return &Prometheus{URL: url, api: promv1.NewAPI(c)}, nil
}

// eventRateQuery is the PromQL of a run's event rate: its builders are the
// pods the PodMonitor labels with the run (eventbuilder.daq.io/run).
func eventRateQuery(run types.NamespacedName) string {
	return fmt.Sprintf(`sum(rate(eb_events_built_total{namespace=%q,eventbuilder_daq_io_run=%q}[1m]))`, run.Namespace, run.Name)
}

// Rates is run's event rate over the window ending at now.
func (p *Prometheus) Rates(ctx context.Context, run types.NamespacedName, now time.Time, window time.Duration) ([]RatePoint, error) {
	ctx, cancel := context.WithTimeout(ctx, prometheusTimeout)
	defer cancel()
	v, _, err := p.api.QueryRange(ctx, eventRateQuery(run), promv1.Range{Start: now.Add(-window), End: now, Step: prometheusStep})
	if err != nil {
		return nil, err
	}
	return matrixRates(v)
}

// matrixRates are the points of a range query's one series (none: no
// builder of the run was scraped in the window).
func matrixRates(v model.Value) ([]RatePoint, error) {
	m, ok := v.(model.Matrix)
	if !ok {
		if v == nil {
			return nil, fmt.Errorf("a range query answered nothing")
		}
		return nil, fmt.Errorf("a range query answered a %s, not a matrix", v.Type())
	}
	if len(m) > 1 {
		return nil, fmt.Errorf("the run's summed rate came as %d series, want 1", len(m))
	}
	var points []RatePoint
	for _, series := range m {
		for _, s := range series.Values {
			points = append(points, RatePoint{At: s.Timestamp.Time(), Rate: float64(s.Value)})
		}
	}
	return points, nil
}
