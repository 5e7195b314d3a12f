package opmetrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderclient"
)

// Every metric is on the manager's registry under its documented name,
// and a deleted run's series go.
func TestMetricsAreRegisteredAndForgotten(t *testing.T) {
	// Counted from empty: the registry is global, and other tests (or an
	// earlier -count pass) leave series in it.
	for _, v := range []interface{ Reset() }{Failovers, Epoch, SparesLeft, Spares, Phase, MinEventRate, PollsFailed, ControlFailed} {
		v.Reset()
	}
	floor := int64(1000000)
	Run("ns", "r", RunState{Epoch: 3, Spares: 2, SparesLeft: 2, Phase: "Degraded", MinEventRate: &floor})
	Failovers.WithLabelValues("Unreachable", "MovedToSpare").Inc()
	Configured(1500 * time.Millisecond)
	PollsFailed.WithLabelValues("ns", "r").Add(2)
	ControlFailed.WithLabelValues("configure").Inc()
	for name, want := range map[string]int{"eb_operator_run_epoch": 1, "eb_operator_run_spares_left": 1, "eb_operator_run_spares": 1,
		"eb_operator_run_phase": 6, "eb_operator_run_min_event_rate": 1, "eb_operator_failovers_total": 1,
		"eb_operator_failover_duration_seconds": 1, "eb_operator_builder_polls_failed_total": 1, "eb_operator_builder_control_failed_total": 1} {
		if n, err := testutil.GatherAndCount(metrics.Registry, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", name, n, err, want)
		}
	}
	if got := testutil.ToFloat64(Epoch.WithLabelValues("ns", "r")); got != 3 {
		t.Errorf("epoch %v, want 3", got)
	}
	if d, r := testutil.ToFloat64(Phase.WithLabelValues("ns", "r", "Degraded")), testutil.ToFloat64(Phase.WithLabelValues("ns", "r", "Running")); d != 1 || r != 0 {
		t.Errorf("phase Degraded %v, Running %v; want 1 and 0", d, r)
	}
	if err := testutil.GatherAndCompare(metrics.Registry, strings.NewReader(`
# HELP eb_operator_run_spares_left The warm spares a run has left that can take a unit over.
# TYPE eb_operator_run_spares_left gauge
eb_operator_run_spares_left{namespace="ns",run="r"} 2
`), "eb_operator_run_spares_left"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(MinEventRate.WithLabelValues("ns", "r")); got != 1e6 {
		t.Errorf("event rate floor %v, want 1e6", got)
	}
	Run("ns", "r", RunState{Epoch: 3, Phase: "Running"}) // the floor removed from the spec
	if n, _ := testutil.GatherAndCount(metrics.Registry, "eb_operator_run_min_event_rate"); n != 0 {
		t.Errorf("eb_operator_run_min_event_rate: %d series once the run sets no floor, want 0", n)
	}
	Run("ns", "other", RunState{Phase: "Pending"})
	Run("ns", "other", RunState{Phase: "Running"})
	if got := testutil.ToFloat64(Runs); got != 2 {
		t.Errorf("eb_operator_runs %v with runs r and other recorded, want 2", got)
	}
	before := time.Now()
	Beat()
	if got := testutil.ToFloat64(Heartbeat); got < float64(before.Unix()) {
		t.Errorf("eb_operator_heartbeat_timestamp_seconds %v after a beat at %v", got, before.Unix())
	}
	Forget("ns", "other")
	Forget("ns", "r")
	if got := testutil.ToFloat64(Runs); got != 0 {
		t.Errorf("eb_operator_runs %v with both runs deleted, want 0", got)
	}
	for _, name := range []string{"eb_operator_run_epoch", "eb_operator_run_spares_left", "eb_operator_run_spares", "eb_operator_run_phase",
		"eb_operator_builder_polls_failed_total"} {
		if n, _ := testutil.GatherAndCount(metrics.Registry, name); n != 0 {
			t.Errorf("%s: %d series after the run was deleted, want 0", name, n)
		}
	}
}

// Every builder that refuses or does not answer a command is counted by
// the command.
func TestCountControl(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"wrong bearer token"}`))
	}))
	defer refusing.Close()
	c := CountControl(builderclient.New(builderclient.Timeouts{Poll: time.Second, Control: time.Second}))
	before := testutil.ToFloat64(ControlFailed.WithLabelValues("pause"))
	builders := []builderapi.Builder{{Rank: 0, URL: refusing.URL}, {Rank: 1, URL: refusing.URL}}
	if _, err := c.Send(context.Background(), "t", builderapi.Pause, builders); err == nil {
		t.Fatal("a refused pause returned no error")
	}
	if got := testutil.ToFloat64(ControlFailed.WithLabelValues("pause")) - before; got != 2 {
		t.Errorf("counted %v failed pauses, want 2", got)
	}
}
