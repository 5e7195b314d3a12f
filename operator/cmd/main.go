// Command manager runs the event-builder operator.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderclient"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/console"
	"daq.io/eventbuilder/operator/internal/controller"
	"daq.io/eventbuilder/operator/internal/opmetrics"
	"daq.io/eventbuilder/operator/internal/runplan"
)

// options are the manager's command-line flags.
type options struct {
	metricsAddr, probeAddr, consoleAddr       string
	consolePrometheus                         string
	secureMetrics, enableHTTP2                bool
	leaderElect                               bool
	leaderElectionNamespace                   string
	leaseDuration, renewDeadline, retryPeriod time.Duration
	pollInterval, pollTimeout                 time.Duration
	controlTimeout                            time.Duration
	notReadyGrace                             time.Duration
	reofferVacatedAfter, reofferVacatedMax    time.Duration
	unreachableAfter                          time.Duration
	stallAfter                                time.Duration
	maxConcurrentReconciles                   int
	statusCountersInterval                    time.Duration
	watchNamespaces                           string
	networkPolicy                             bool
	operatorNamespace                         string
	operatorPodLabels                         string
	metricsNamespaces                         string
}

// tunedFlags are the flags a farm tunes; the Helm chart has a value for
// each (a test checks that it renders them with these defaults).
var tunedFlags = []string{"builder-poll-interval", "builder-poll-timeout", "builder-control-timeout", "node-not-ready-grace",
	"reoffer-vacated-after", "reoffer-vacated-max", "builder-unreachable-after", "builder-stall-after", "max-concurrent-reconciles", "status-counters-interval",
	"leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period"}

// bindFlags defines the manager's flags on fs.
func bindFlags(fs *flag.FlagSet) *options {
	o := &options{}
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0",
		"Address the metrics endpoint binds to, e.g. :8443 (HTTPS) or :8080 (HTTP); 0 disables it.")
	fs.StringVar(&o.consoleAddr, "console-bind-address", "0",
		"where the shift crew's read-only web console serves (HTTPS, under /console/), authenticated and authorised "+
			"through the API server as the metrics are (nonResourceURLs /console/*, verb get); 0 turns it off")
	fs.StringVar(&o.consolePrometheus, "console-prometheus-url", "",
		"a Prometheus scraping the builders (the chart's PodMonitor), e.g. http://prometheus-operated.monitoring:9090, "+
			"from which the console draws each run's event rate; empty: from the operator's own samples of the runs' status")
	fs.BoolVar(&o.secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS, authenticated and authorized against the API server.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false,
		"Allow HTTP/2 on the metrics server; off by default against the HTTP/2 Stream Cancellation and Rapid Reset CVEs.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Elect a leader, so that only one of several replicas reconciles.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader election Lease; empty: the pod's own (from its service account). "+
			"Set it to run the manager outside a pod (make bench-farm does).")
	// Much shorter than client-go's 15s/10s/2s: a standby must lead within
	// seconds of the leader's server going silent, since nothing fails a
	// lost server's units over meanwhile. A renewal is one small write.
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 4*time.Second,
		"How long a standby waits, after the leader last renewed its lease, before it takes over.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 3*time.Second,
		"How long the leader keeps trying to renew its lease before it stops leading (and campaigns again as a standby); "+
			"below --leader-elect-lease-duration, so that it has stopped before a standby takes over.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 500*time.Millisecond,
		"How often the leader renews its lease and a standby tries to take it.")
	fs.DurationVar(&o.pollInterval, "builder-poll-interval", time.Second, "How often each run's builders are polled for status.")
	fs.DurationVar(&o.pollTimeout, "builder-poll-timeout", 750*time.Millisecond, "Timeout of one builder status request.")
	fs.DurationVar(&o.controlTimeout, "builder-control-timeout", 2*time.Second,
		"Timeout of one builder control command (configure, start, pause, resume, stop).")
	fs.DurationVar(&o.notReadyGrace, "node-not-ready-grace", 10*time.Second,
		"How long a node's Ready condition may be False before the units on it fail over to spares. "+
			"A node whose Ready is Unknown, that is being deleted or that is gone fails them at once.")
	fs.DurationVar(&o.reofferVacatedAfter, "reoffer-vacated-after", 15*time.Second,
		"How long an endpoint whose unit failed away waits, its node Ready, before it is offered as a warm spare again "+
			"though its server neither turned NotReady nor rebooted (its builder's pod or process failed, a hang, a "+
			"network blip; one back from either is offered at once), where another builder of the run on its server "+
			"answers; twice as long each time it is vacated again within --reoffer-vacated-max of its offer, up to that, "+
			"and that long where no builder on its server answers. A unit is restored onto a spare only once its pod is Ready. 0: never.")
	fs.DurationVar(&o.reofferVacatedMax, "reoffer-vacated-max", 2*time.Minute,
		"The longest rest of an endpoint vacated again and again (--reoffer-vacated-after doubled); one that held "+
			"for this long since its offer rests --reoffer-vacated-after again.")
	fs.DurationVar(&o.unreachableAfter, "builder-unreachable-after", time.Second,
		"How long a live unit's builder may answer no poll (two in a row at least), with no majority of its peers "+
			"reporting it up, before the unit fails over to a spare (its server may be gone with every peer that "+
			"could report it). 0 turns it off.")
	fs.DurationVar(&o.stallAfter, "builder-stall-after", 10*time.Second,
		"How long a live unit's event stream may stand still while every builder is RUNNING (connecting to a peer "+
			"that never answers, a stalled source or output) before the run is Degraded, reason UnitsNotBuilding, "+
			"and not Ready.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 4,
		"How many runs are reconciled at once: a run whose builders do not answer holds one worker for its poll and "+
			"control timeouts, not every other run's failover.")
	fs.DurationVar(&o.statusCountersInterval, "status-counters-interval", 10*time.Second,
		"How often a steady run's status is written when only its event counters, rates and sample times changed "+
			"(any other change, a phase, condition, unit state, epoch, or the set starting or stopping to build, is "+
			"written at once); rates then span the interval. Every run's status.observedTime is written at least every twice this. "+
			"0 writes at every reconcile.")
	fs.StringVar(&o.watchNamespaces, "watch-namespaces", "",
		"Comma-separated namespaces whose runs the operator manages (it then needs Roles in those only); "+
			"empty: every namespace (a ClusterRole).")
	fs.BoolVar(&o.networkPolicy, "builder-network-policy", false,
		"Give each run a NetworkPolicy: its data port reachable from its own pods only, its HTTP port (control, "+
			"status, metrics) from the operator's pods (--operator-namespace, --operator-pod-labels) and the "+
			"namespaces of --metrics-namespace-selector only.")
	fs.StringVar(&o.operatorNamespace, "operator-namespace", os.Getenv("POD_NAMESPACE"),
		"The operator's namespace, for the builders' NetworkPolicy (default: $POD_NAMESPACE).")
	fs.StringVar(&o.operatorPodLabels, "operator-pod-labels", "",
		"Labels selecting the operator's pods, k=v,... (the chart's selector labels), for the builders' NetworkPolicy.")
	fs.StringVar(&o.metricsNamespaces, "metrics-namespace-selector", "",
		"Label selector of the namespaces whose pods may scrape the builders' /metrics through their NetworkPolicy, "+
			"e.g. kubernetes.io/metadata.name=monitoring; empty: none.")
	return o
}

// leaseTimes checks the leader election's durations against each other
// (client-go refuses them later, naming no flag).
func (o *options) leaseTimes() error {
	switch {
	case o.retryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period %s: must be above 0", o.retryPeriod)
	case o.renewDeadline <= time.Duration(leaderelection.JitterFactor*float64(o.retryPeriod)):
		return fmt.Errorf("--leader-elect-renew-deadline %s must exceed %.1f x --leader-elect-retry-period (%s): raise it or lower the retry period",
			o.renewDeadline, leaderelection.JitterFactor, o.retryPeriod)
	case o.leaseDuration <= o.renewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration %s must exceed --leader-elect-renew-deadline %s, "+
			"or a standby could lead while the leader still does: raise it or lower the deadline", o.leaseDuration, o.renewDeadline)
	}
	return nil
}

// controlClients is who may reach the builders' HTTP port, or nil when
// runs get no NetworkPolicy; an error names the flag to correct.
func (o *options) controlClients() (*builderpod.ControlClients, error) {
	if !o.networkPolicy {
		return nil, nil
	}
	if o.operatorNamespace == "" || o.operatorPodLabels == "" {
		return nil, errors.New("--builder-network-policy needs --operator-namespace (or $POD_NAMESPACE) and --operator-pod-labels")
	}
	pods, err := labels.ConvertSelectorToLabelsMap(o.operatorPodLabels)
	if err != nil {
		return nil, fmt.Errorf("--operator-pod-labels %q: %w; give k=v,...", o.operatorPodLabels, err)
	}
	c := &builderpod.ControlClients{OperatorNamespace: o.operatorNamespace, OperatorPodLabels: pods}
	if o.metricsNamespaces != "" {
		if c.Monitoring, err = metav1.ParseToLabelSelector(o.metricsNamespaces); err != nil {
			return nil, fmt.Errorf("--metrics-namespace-selector %q: %w", o.metricsNamespaces, err)
		}
	}
	return c, nil
}

// listens are the addresses the manager serves on.
func (o *options) listens() []string {
	var out []string
	for _, addr := range []string{o.probeAddr, o.metricsAddr, o.consoleAddr} {
		if addr != "" && addr != "0" {
			out = append(out, addr)
		}
	}
	return out
}

// namespaces are the namespaces whose objects the manager caches, or nil
// for all of them.
func (o *options) namespaces() map[string]cache.Config {
	if o.watchNamespaces == "" {
		return nil
	}
	out := map[string]cache.Config{}
	for _, ns := range strings.Split(o.watchNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out[ns] = cache.Config{}
		}
	}
	return out
}

func main() {
	o := bindFlags(flag.CommandLine)
	var opts zap.Options
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(ebv1.AddToScheme(scheme))

	var tlsOpts []func(*tls.Config)
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.secureMetrics, TLSOpts: tlsOpts}
	if o.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	clients, err := o.controlClients()
	if err == nil {
		err = o.leaseTimes()
	}
	if err != nil {
		log.Error(err, "invalid flags")
		os.Exit(2)
	}
	// One client, one pool of connections, for the builders' polls and
	// commands, kept across the managers of runReplica.
	builders := builderclient.New(builderclient.Timeouts{Poll: o.pollTimeout, Control: o.controlTimeout})
	cfg := ctrl.GetConfigOrDie()
	mapper, err := sharedMapper(cfg)
	if err != nil {
		log.Error(err, "unable to make a REST mapper")
		os.Exit(1)
	}
	newManager := func() (ctrl.Manager, error) {
		return setUpManager(cfg, mapper, o, scheme, metricsOpts, tlsOpts, clients, builders)
	}
	if err := runReplica(ctrl.SetupSignalHandler(), newManager, log, 2*time.Second, o.listens()); err != nil {
		log.Error(err, "problem running manager")
		os.Exit(1)
	}
}

// setUpManager makes a manager with the operator's controllers, console and
// health checks on it, its REST mapper from mapper (sharedMapper).
func setUpManager(cfg *rest.Config, mapper func(*rest.Config, *http.Client) (meta.RESTMapper, error), o *options,
	scheme *runtime.Scheme, metricsOpts metricsserver.Options, tlsOpts []func(*tls.Config),
	clients *builderpod.ControlClients, builders *builderclient.Client) (ctrl.Manager, error) {
	cacheOptions := controller.CacheOptions()
	cacheOptions.DefaultNamespaces = o.namespaces()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		MapperProvider:          mapper,
		Cache:                   cacheOptions,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        ebv1.LeaderLease,
		LeaderElectionNamespace: o.leaderElectionNamespace,
		LeaseDuration:           &o.leaseDuration,
		RenewDeadline:           &o.renewDeadline,
		RetryPeriod:             &o.retryPeriod,
		// Safe: on a signal the process exits right after the manager stops.
		LeaderElectionReleaseOnCancel: true,
		// A process runs one manager at a time (runReplica), each with the
		// same controllers.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := (&controller.EventBuilderRunReconciler{
		Client:                 mgr.GetClient(),
		APIReader:              mgr.GetAPIReader(),
		Recorder:               mgr.GetEventRecorder("eventbuilderrun-controller"),
		Builders:               builders,
		Control:                opmetrics.CountControl(builders),
		StatusURL:              builderpod.StatusURL,
		PollInterval:           o.pollInterval,
		NodeNotReadyGrace:      o.notReadyGrace,
		VacancyRest:            runplan.VacancyRest{First: o.reofferVacatedAfter, Max: o.reofferVacatedMax},
		UnreachableAfter:       o.unreachableAfter,
		StallAfter:             o.stallAfter,
		MaxConcurrent:          o.maxConcurrentReconciles,
		RejoinBackoff:          runplan.DefaultRejoinBackoff,
		ControlClients:         clients,
		StatusCountersInterval: o.statusCountersInterval,
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("controller EventBuilderRun: %w", err)
	}
	if err := (&controller.FabricReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("fabric-controller"),
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("controller Fabric: %w", err)
	}
	if o.consoleAddr != "0" {
		if err := addConsole(mgr, o.consoleAddr, o.consolePrometheus, tlsOpts); err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
	}
	if err := errors.Join(mgr.AddHealthzCheck("healthz", healthz.Ping), mgr.AddReadyzCheck("readyz", healthz.Ping)); err != nil {
		return nil, fmt.Errorf("health checks: %w", err)
	}
	return mgr, nil
}

// addConsole serves the web console (internal/console) at addr from the
// manager's cache, with the event rates from prometheusURL when given,
// else those it samples from the runs' status every 5 s, on every replica,
// leader or not: over HTTPS with the
// API server deciding who may look, through controller-runtime's secure
// metrics server (which also answers /metrics there).
func addConsole(mgr ctrl.Manager, addr, prometheusURL string, tlsOpts []func(*tls.Config)) error {
	history := console.NewHistory(console.Window)
	var prom *console.Prometheus
	if prometheusURL != "" {
		var err error
		if prom, err = console.NewPrometheus(prometheusURL); err != nil {
			return err
		}
	}
	server, err := metricsserver.NewServer(metricsserver.Options{
		BindAddress: addr, SecureServing: true, TLSOpts: tlsOpts,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		ExtraHandlers:  map[string]http.Handler{console.Prefix: console.Handler(mgr.GetClient(), history, prom)},
	}, mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	if err := mgr.Add(console.Sampler{History: history, Reader: mgr.GetClient(), Interval: 5 * time.Second}); err != nil {
		return err
	}
	return mgr.Add(server)
}
