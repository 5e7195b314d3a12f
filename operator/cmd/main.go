// Command manager runs the event-builder operator.
package main

import (
	"crypto/tls"
	"flag"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/buildercontrol"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/controller"
)

func main() {
	var (
		metricsAddr, probeAddr     string
		secureMetrics, enableHTTP2 bool
		leaderElect                bool
		pollInterval, pollTimeout  time.Duration
		controlTimeout             time.Duration
		notReadyGrace              time.Duration
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0",
		"Address the metrics endpoint binds to, e.g. :8443 (HTTPS) or :8080 (HTTP); 0 disables it.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS, authenticated and authorized against the API server.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false,
		"Allow HTTP/2 on the metrics server; off by default against the HTTP/2 Stream Cancellation and Rapid Reset CVEs.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", false,
		"Elect a leader, so that only one of several replicas reconciles.")
	flag.DurationVar(&pollInterval, "builder-poll-interval", 2*time.Second, "How often each run's builders are polled for status.")
	flag.DurationVar(&pollTimeout, "builder-poll-timeout", time.Second, "Timeout of one builder status request.")
	flag.DurationVar(&controlTimeout, "builder-control-timeout", 2*time.Second,
		"Timeout of one builder control command (configure, start, pause, resume, stop).")
	flag.DurationVar(&notReadyGrace, "node-not-ready-grace", 10*time.Second,
		"How long a node's Ready condition may be False before the units on it fail over to spares. "+
			"A node whose Ready is Unknown, that is being deleted or that is gone fails them at once.")
	var opts zap.Options
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(ebv1.AddToScheme(scheme))

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics, TLSOpts: tlsOpts}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controller.CacheOptions(),
		Metrics:                metricsOpts,
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "eventbuilder-operator.eventbuilder.daq.io",
		// Safe: the process exits right after the manager stops.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Error(err, "unable to create manager")
		os.Exit(1)
	}

	if err := (&controller.EventBuilderRunReconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Recorder:          mgr.GetEventRecorder("eventbuilderrun-controller"),
		Builders:          builderstatus.NewClient(pollTimeout),
		Control:           buildercontrol.NewClient(controlTimeout),
		StatusURL:         builderpod.StatusURL,
		PollInterval:      pollInterval,
		NodeNotReadyGrace: notReadyGrace,
	}).SetupWithManager(mgr); err != nil {
		log.Error(err, "unable to create controller", "controller", "EventBuilderRun")
		os.Exit(1)
	}
	if err := (&controller.FabricReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("fabric-controller"),
	}).SetupWithManager(mgr); err != nil {
		log.Error(err, "unable to create controller", "controller", "Fabric")
		os.Exit(1)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "unable to set up health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "unable to set up ready check")
		os.Exit(1)
	}

	log.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "problem running manager")
		os.Exit(1)
	}
}
