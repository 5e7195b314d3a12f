// Package opmetrics is the operator's own Prometheus metrics, served on
// the manager's metrics endpoint (controller-runtime's registry) beside
// the framework's (controller_runtime_reconcile_time_seconds{controller}
// is the reconcile duration): what a person on shift needs of failovers,
// epochs, spares and the operator's talk with the builders.
package opmetrics

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderclient"
	"daq.io/eventbuilder/operator/internal/ranktable"
)

// The metrics, each labelled as its help says.
var (
	Failovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eb_operator_failovers_total",
		Help: "Units failed over, by the failure's reason (NodeNotReady, PeerLost, Unreachable, a pod's reason...) and the failover's outcome (MovedToSpare, Degraded, Stopped, Rejoined).",
	}, []string{"reason", "outcome"})
	FailoverDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "eb_operator_failover_duration_seconds",
		Help:    "From a failure observed to every live builder holding the failover's epoch.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 12), // 10 ms .. 20 s
	})
	Epoch = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eb_operator_run_epoch",
		Help: "The epoch of a run's published rank table.",
	}, []string{"namespace", "run"})
	SparesLeft = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eb_operator_run_spares_left",
		Help: "The warm spares a run has left that can take a unit over.",
	}, []string{"namespace", "run"})
	Spares = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eb_operator_run_spares",
		Help: "The warm spares a run asks for (spec.spares).",
	}, []string{"namespace", "run"})
	Phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eb_operator_run_phase",
		Help: "1 for a run's current phase (Pending, Running, Paused, Stopped, Degraded, Failed), 0 for the others.",
	}, []string{"namespace", "run", "phase"})
	MinEventRate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eb_operator_run_min_event_rate",
		Help: "The event rate floor a run asks for (spec.minEventRate, events per second); absent where it sets none.",
	}, []string{"namespace", "run"})
	PollsFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eb_operator_builder_polls_failed_total",
		Help: "Builder status polls (GET /status) that got no answer, by run.",
	}, []string{"namespace", "run"})
	ControlFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eb_operator_builder_control_failed_total",
		Help: "Builder control commands refused or unanswered, by command.",
	}, []string{"command"})
	// Runs and Heartbeat let an alert tell a silent operator from one with
	// nothing to do: a standby replica exports 0 for both.
	Runs = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "eb_operator_runs",
		Help: "The runs this operator replica reconciles (0 on a standby: only the leader reconciles).",
	})
	Heartbeat = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "eb_operator_heartbeat_timestamp_seconds",
		Help: "When this replica last began to reconcile a run (Unix time; 0 on a standby). Each run is reconciled at least every few poll intervals.",
	})
)

// collectors are every metric of the package.
var collectors = []prometheus.Collector{Failovers, FailoverDuration, Epoch, SparesLeft, Spares, Phase, MinEventRate, PollsFailed, ControlFailed, Runs, Heartbeat}

// known are the runs recorded by Run and not yet forgotten: Runs counts them.
var known = struct {
	sync.Mutex
	runs map[[2]string]bool
}{runs: map[[2]string]bool{}}

func countRun(namespace, run string, exists bool) {
	known.Lock()
	defer known.Unlock()
	if exists {
		known.runs[[2]string{namespace, run}] = true
	} else {
		delete(known.runs, [2]string{namespace, run})
	}
	Runs.Set(float64(len(known.runs)))
}

// Beat records that a reconcile of a run begins.
func Beat() { Heartbeat.SetToCurrentTime() }

func init() {
	metrics.Registry.MustRegister(collectors...)
}

// phases are the run phases Phase has a series for.
var phases = []string{"Pending", "Running", "Paused", "Stopped", "Degraded", "Failed"}

// RunState is what the run gauges record of one run.
type RunState struct {
	Epoch              int64
	Spares, SparesLeft int32
	Phase              string
	MinEventRate       *int64 // nil: no floor, no series
}

// Run records a run's epoch, spares asked for and left, phase and event
// rate floor.
func Run(namespace, run string, s RunState) {
	countRun(namespace, run, true)
	Epoch.WithLabelValues(namespace, run).Set(float64(s.Epoch))
	Spares.WithLabelValues(namespace, run).Set(float64(s.Spares))
	SparesLeft.WithLabelValues(namespace, run).Set(float64(s.SparesLeft))
	for _, p := range phases {
		v := 0.0
		if p == s.Phase {
			v = 1
		}
		Phase.WithLabelValues(namespace, run, p).Set(v)
	}
	if s.MinEventRate != nil {
		MinEventRate.WithLabelValues(namespace, run).Set(float64(*s.MinEventRate))
	} else {
		MinEventRate.DeleteLabelValues(namespace, run)
	}
}

// Forget drops a deleted run's series.
func Forget(namespace, run string) {
	countRun(namespace, run, false)
	for _, v := range []*prometheus.GaugeVec{Epoch, Spares, SparesLeft, MinEventRate} {
		v.DeleteLabelValues(namespace, run)
	}
	Phase.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "run": run})
	PollsFailed.DeleteLabelValues(namespace, run)
}

// Configured records how long a failover took to reach every live builder.
func Configured(d time.Duration) { FailoverDuration.Observe(d.Seconds()) }

// CountControl is c, counting in ControlFailed every builder that refuses
// or does not answer a command.
func CountControl(c builderclient.Control) builderclient.Control { return countingControl{c} }

type countingControl struct{ builderclient.Control }

func (c countingControl) Configure(ctx context.Context, token string, builders []builderapi.Builder, table ranktable.Document) (builderapi.Reports, error) {
	reps, err := c.Control.Configure(ctx, token, builders, table)
	countFailed(builderapi.Configure, err)
	return reps, err
}

func (c countingControl) Send(ctx context.Context, token string, cmd builderapi.Command, builders []builderapi.Builder) (builderapi.Reports, error) {
	reps, err := c.Control.Send(ctx, token, cmd, builders)
	countFailed(cmd, err)
	return reps, err
}

func countFailed(cmd builderapi.Command, err error) {
	var errs *builderapi.Errors
	if errors.As(err, &errs) {
		ControlFailed.WithLabelValues(string(cmd)).Add(float64(len(errs.Builders)))
	}
}
