package main

import (
	"flag"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"daq.io/eventbuilder/operator/internal/testenv"
)

// helmTemplate renders the operator's chart with the given --set values.
func helmTemplate(t *testing.T, set ...string) string {
	t.Helper()
	return testenv.HelmTemplate(t, filepath.Join("..", ".."), set...)
}

// renderedFlag is the value of --name=value in the rendered manifests.
func renderedFlag(t *testing.T, manifests, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*- --` + regexp.QuoteMeta(name) + `=(\S+)$`).FindStringSubmatch(manifests)
	if m == nil {
		t.Errorf("the chart does not pass --%s to the manager", name)
		return ""
	}
	return m[1]
}

// Every flag a farm tunes has a chart value that the Deployment passes,
// whose default is the manager's, and that a user can set.
func TestChartPassesTunedFlags(t *testing.T) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	bindFlags(fs)
	defaults := helmTemplate(t)
	values := map[string]string{
		"builder-poll-interval":       "builderPollInterval",
		"builder-poll-timeout":        "builderPollTimeout",
		"builder-control-timeout":     "builderControlTimeout",
		"node-not-ready-grace":        "nodeNotReadyGrace",
		"reoffer-vacated-after":       "reofferVacatedAfter",
		"reoffer-vacated-max":         "reofferVacatedMax",
		"builder-unreachable-after":   "builderUnreachableAfter",
		"builder-stall-after":         "builderStallAfter",
		"max-concurrent-reconciles":   "maxConcurrentReconciles",
		"status-counters-interval":    "statusCountersInterval",
		"leader-elect-lease-duration": "leaderElection.leaseDuration",
		"leader-elect-renew-deadline": "leaderElection.renewDeadline",
		"leader-elect-retry-period":   "leaderElection.retryPeriod",
	}
	for i, name := range tunedFlags {
		value, ok := values[name]
		if !ok {
			t.Errorf("flag --%s is tuned but the test knows no chart value for it", name)
			continue
		}
		def := fs.Lookup(name).DefValue
		if got := renderedFlag(t, defaults, name); got != def {
			t.Errorf("chart default --%s=%s, the manager's is %s", name, got, def)
		}
		set := strconv.Itoa(i + 7) // a count, or seconds
		if _, err := time.ParseDuration(def); err == nil {
			set = (time.Duration(i+7) * time.Second).String()
		}
		if got := renderedFlag(t, helmTemplate(t, value+"="+set), name); got != set {
			t.Errorf("--set %s=%s rendered --%s=%s", value, set, name, got)
		}
	}
}

// The console is off unless the chart enables it; enabled, the manager is
// told its port (a flag it knows), the pod names the port, and the crew
// gets a ClusterRole for its pages while the manager may ask the API
// server who is looking.
func TestChartServesTheConsoleOnlyWhenEnabled(t *testing.T) {
	if off := helmTemplate(t); strings.Contains(off, "--console-bind-address") || strings.Contains(off, "-console-viewer") {
		t.Error("the chart's defaults serve the console, which is off by default")
	}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	bindFlags(fs)
	if def := fs.Lookup("console-bind-address").DefValue; def != "0" {
		t.Errorf("the manager serves the console by default (--console-bind-address=%s)", def)
	}
	on := helmTemplate(t, "console.enabled=true", "console.port=9444", "metrics.enabled=false")
	if got := renderedFlag(t, on, "console-bind-address"); got != ":9444" {
		t.Errorf("--console-bind-address=%s, want :9444", got)
	}
	for _, want := range []string{"containerPort: 9444", "-console-viewer", `nonResourceURLs: ["/console", "/console/*"]`,
		`resources: ["tokenreviews"]`, `resources: ["subjectaccessreviews"]`} {
		if !strings.Contains(on, want) {
			t.Errorf("with the console enabled (metrics off) the chart lacks %q", want)
		}
	}
	if strings.Contains(on, "--console-prometheus-url") {
		t.Error("the chart names a Prometheus to the console without console.prometheusURL")
	}
	withProm := helmTemplate(t, "console.enabled=true", "console.prometheusURL=http://prometheus-operated.monitoring:9090")
	if got := renderedFlag(t, withProm, "console-prometheus-url"); got != "http://prometheus-operated.monitoring:9090" {
		t.Errorf("--console-prometheus-url=%s, want the chart's console.prometheusURL", got)
	}
	if fs.Lookup("console-prometheus-url") == nil {
		t.Error("the manager has no --console-prometheus-url flag for the chart's console.prometheusURL")
	}
}

// The leader election's durations are checked against each other at
// start, the message naming the flag to change; the defaults pass.
func TestLeaseTimesAreChecked(t *testing.T) {
	for _, tc := range []struct {
		name                string
		lease, renew, retry time.Duration
		wantErr             string
	}{
		{name: "defaults"},
		{name: "renew deadline at the lease", lease: 3 * time.Second, wantErr: "--leader-elect-lease-duration 3s must exceed --leader-elect-renew-deadline 3s"},
		{name: "retry too slow for the deadline", retry: 3 * time.Second, wantErr: "--leader-elect-renew-deadline 3s must exceed 1.2 x --leader-elect-retry-period (3s)"},
		{name: "no retry period", retry: -time.Second, wantErr: "--leader-elect-retry-period -1s: must be above 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("manager", flag.ContinueOnError)
			o := bindFlags(fs)
			for name, d := range map[string]time.Duration{"leader-elect-lease-duration": tc.lease,
				"leader-elect-renew-deadline": tc.renew, "leader-elect-retry-period": tc.retry} {
				if d != 0 {
					if err := fs.Set(name, d.String()); err != nil {
						t.Fatal(err)
					}
				}
			}
			err := o.leaseTimes()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("leaseTimes() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
