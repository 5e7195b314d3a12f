package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/types"
)

func TestMatrixRatesTakesTheRunsOneSeries(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	one := model.Matrix{{Metric: model.Metric{}, Values: []model.SamplePair{
		{Timestamp: model.TimeFromUnixNano(t0.UnixNano()), Value: 1000},
		{Timestamp: model.TimeFromUnixNano(t0.Add(15 * time.Second).UnixNano()), Value: 2500},
	}}}
	points, err := matrixRates(one)
	if err != nil || len(points) != 2 || !points[1].At.Equal(t0.Add(15*time.Second)) || points[1].Rate != 2500 {
		t.Errorf("one series: %v, %v", points, err)
	}
	if points, err := matrixRates(model.Matrix{}); err != nil || len(points) != 0 {
		t.Errorf("no series (nothing scraped): %v, %v; want no points, no error", points, err)
	}
	if _, err := matrixRates(append(one, one[0])); err == nil || !strings.Contains(err.Error(), "2 series") {
		t.Errorf("two series: %v, want an error naming them", err)
	}
	if _, err := matrixRates(model.Vector{}); err == nil || !strings.Contains(err.Error(), "not a matrix") {
		t.Errorf("a vector: %v, want an error", err)
	}
	if _, err := matrixRates(nil); err == nil || !strings.Contains(err.Error(), "answered nothing") {
		t.Errorf("nothing: %v, want an error", err)
	}
}

func TestRatesFallBackToTheOperatorsSamplesSayingWhy(t *testing.T) {
	run := types.NamespacedName{Namespace: "daq", Name: "physics"}
	if q := eventRateQuery(run); q != `sum(rate(eb_events_built_total{namespace="daq",eventbuilder_daq_io_run="physics"}[1m]))` {
		t.Errorf("query %s", q)
	}
	now := time.Now()
	h := NewHistory(Window)
	h.Record(run, now.Add(-10*time.Second), 0)
	h.Record(run, now.Add(-5*time.Second), 5000)
	if points, source := rates(context.Background(), h, nil, run, now); len(points) != 1 || !strings.HasPrefix(source, "the operator's samples") {
		t.Errorf("without Prometheus: %v from %q", points, source)
	}
	// A Prometheus that does not answer (nothing listens on port 1): the
	// page still draws the operator's samples, and says why.
	prom, err := NewPrometheus("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	points, source := rates(context.Background(), h, prom, run, now)
	if len(points) != 1 || !strings.Contains(source, "Prometheus at http://127.0.0.1:1 did not answer") {
		t.Errorf("Prometheus down: %v from %q", points, source)
	}
	if _, err := NewPrometheus("::not a url"); err == nil || !strings.Contains(err.Error(), "--console-prometheus-url") {
		t.Errorf("a bad URL: %v, want an error naming the flag", err)
	}
}
