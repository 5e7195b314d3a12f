package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1alpha1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// A real Prometheus (the Prometheus Operator's, e2e/monitoring) scrapes a
// run's builders through the chart's PodMonitor and the operator through
// its ServiceMonitor: the run's event rate in PromQL agrees with the run's
// status within 10 %, the operator's series carry the run's epoch and event
// rate floor, and after a unit is killed the chart's EventBuilderPeerLost
// alert fires within a minute.
func TestPrometheusScrapesTheRunAndAlertsOnALostPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	key := client.ObjectKey{Namespace: "e2e-prometheus", Name: "watched"}
	floor := int64(1)
	run := runningRun(ctx, t, key, 3, func(s *ebv1alpha1.EventBuilderRunSpec) { s.MinEventRate = &floor })

	builders := fmt.Sprintf(`namespace=%q,eventbuilder_daq_io_run=%q`, key.Namespace, key.Name)
	operator := fmt.Sprintf(`namespace=%q,run=%q`, key.Namespace, key.Name)
	waitFor(ctx, t, "Prometheus to scrape the 3 builders and the operator's series of the run", 3*time.Minute, func() (bool, string) {
		up, err1 := promScalar(ctx, fmt.Sprintf(`sum(eb_up{%s})`, builders))
		epoch, err2 := promScalar(ctx, fmt.Sprintf(`eb_operator_run_epoch{%s}`, operator))
		floorSeen, err3 := promScalar(ctx, fmt.Sprintf(`eb_operator_run_min_event_rate{%s}`, operator))
		// Every builder's counter scraped for the whole of the last 50 s
		// (every 5 s): the measurement below reaches back up to 40 s, and a
		// series begun inside its window is extrapolated short.
		history, err4 := promScalar(ctx, fmt.Sprintf(`min(count_over_time(eb_events_built_total{%s}[50s]))`, builders))
		if err := k8sClient.Get(ctx, key, run); err != nil {
			return false, err.Error()
		}
		return up == 3 && epoch == float64(run.Status.Epoch) && floorSeen == float64(floor) && history >= 9,
			fmt.Sprintf("builders up %v (%v), epoch %v (%v) of status %d, floor %v (%v), scrapes of each builder's counter in 50 s %v (%v)",
				up, err1, epoch, err2, run.Status.Epoch, floorSeen, err3, history, err4)
	})

	// One interval seen twice: from one of the operator's samples to one
	// about half a minute later (its counters written every 10 s), the
	// status's counter and PromQL's rate over Prometheus's own scrapes
	// (every 5 s here).
	const window = 30 * time.Second
	if err := k8sClient.Get(ctx, key, run); err != nil {
		t.Fatal(err)
	}
	if run.Status.LastSampleTime == nil {
		t.Fatalf("a Running run without lastSampleTime: %s", describe(run))
	}
	start, startedAt := run.Status.EventsBuilt, run.Status.LastSampleTime.Time // a copy: Get reuses the pointer
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(window): // the measurement window, not a wait for a condition
	}
	if err := k8sClient.Get(ctx, key, run); err != nil {
		t.Fatal(err)
	}
	// Over the operator's own poll times, not the test's: the rate changes
	// over a minute of a loaded 2-core host (PromQL over the 30 s before the
	// query once read 12 % more than the status over polls up to 10 s older).
	endedAt := run.Status.LastSampleTime.Time
	span := endedAt.Sub(startedAt)
	statusRate := float64(run.Status.EventsBuilt-start) / span.Seconds()
	promRate, err := promScalarAt(ctx, fmt.Sprintf(`sum(rate(eb_events_built_total{%s}[%dms]))`, builders, span.Milliseconds()), endedAt)
	if err != nil {
		t.Fatalf("PromQL event rate: %v", err)
	}
	t.Logf("event rate over the %s to %s: %.0f events/s from the run's status, %.0f events/s from PromQL (ratio %.3f)",
		span.Round(time.Millisecond), endedAt.Format(time.RFC3339Nano), statusRate, promRate, promRate/statusRate)
	if statusRate <= 0 || math.Abs(promRate/statusRate-1) > 0.10 {
		t.Errorf("PromQL says %.0f events/s, the run's status %.0f events/s: want them within 10 %%", promRate, statusRate)
	}

	victim := run.Status.Units[1]
	t.Logf("killing the unit on rank %d: deleting pod %s with grace period 0", victim.Rank, victim.Pod)
	deleted := deleteBuilderPod(ctx, t, builderPod(ctx, t, key.Namespace, victim.Pod))
	firing := fmt.Sprintf(`count(ALERTS{alertname="EventBuilderPeerLost",alertstate="firing",%s})`, builders)
	waitFor(ctx, t, "the EventBuilderPeerLost alert to fire", time.Minute, func() (bool, string) {
		n, err := promScalar(ctx, firing)
		return n > 0, fmt.Sprintf("%s = %v (%v)", firing, n, err)
	})
	t.Logf("EventBuilderPeerLost firing %s after the pod was deleted", time.Since(deleted).Round(time.Second))

	deleteRun(ctx, t, key)
}

// promScalar runs an instant PromQL query on the kind Prometheus, through
// the API server's service proxy, and returns its one value (NaN and an
// error when the result is not exactly one sample).
func promScalar(ctx context.Context, query string) (float64, error) {
	return promScalarAt(ctx, query, time.Time{})
}

// promScalarAt is promScalar evaluated at a time (now where zero).
func promScalarAt(ctx context.Context, query string, at time.Time) (float64, error) {
	params := map[string]string{"query": query}
	if !at.IsZero() {
		params["time"] = strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)
	}
	body, err := clientset.CoreV1().Services("monitoring").ProxyGet("http", "prometheus-operated", "web",
		"/api/v1/query", params).DoRaw(ctx)
	if err != nil {
		return math.NaN(), err
	}
	var answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return math.NaN(), fmt.Errorf("%s: %w", body, err)
	}
	if answer.Status != "success" {
		return math.NaN(), fmt.Errorf("query %s: %s", query, answer.Error)
	}
	if len(answer.Data.Result) != 1 {
		return math.NaN(), fmt.Errorf("query %s: %d samples, want 1", query, len(answer.Data.Result))
	}
	text, _ := answer.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(text, 64)
}
