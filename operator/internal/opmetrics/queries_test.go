package opmetrics

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"
)

// The chart's alert rules (tested for behaviour by promtool, make
// test-chart) and Grafana dashboard.
const (
	alertsFile    = "../../../charts/eventbuilder-operator/files/alerts.yaml"
	dashboardFile = "../../../charts/eventbuilder-operator/files/dashboard.json"
)

// metricName is an eb_ metric's name in a PromQL expression.
var metricName = regexp.MustCompile(`\beb_[a-z_]+\b`)

// builderScrapeLabel is the run label the chart's PodMonitor puts on
// every series of a builder pod's target, up included (podTargetLabels
// eventbuilder.daq.io/run): a query of the scrape itself selects by it.
const builderScrapeLabel = "eventbuilder_daq_io_run"

// checkQuery fails the test unless expr names at least one eb_ metric (or
// selects builder targets by builderScrapeLabel) and every one it names is
// exported.
func checkQuery(t *testing.T, known map[string]bool, what, expr string) {
	t.Helper()
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 && !strings.Contains(expr, builderScrapeLabel) {
		t.Errorf("%s names no eb_ metric: %s", what, expr)
	}
	for _, name := range names {
		if !known[name] {
			t.Errorf("%s uses %s, which neither eb-builder nor the operator exports", what, name)
		}
	}
}

// builderMetrics is eb-builder's /metrics as its tests write it
// (builder/tests/golden.hpp).
const builderMetrics = "../builderapi/testdata/builder/metrics.txt"

// exported are the metric names the builder and the operator export: the
// builder's from its golden /metrics body (histograms with their _bucket,
// _sum and _count series), the operator's from its registry.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	f, err := os.Open(builderMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if fields := strings.Fields(lines.Text()); len(fields) >= 3 && fields[0] == "#" && fields[1] == "TYPE" {
			names[fields[2]] = true
			if fields[3] == "histogram" {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					names[fields[2]+suffix] = true
				}
			}
		}
	}
	// The operator's, series or not yet (a vector without series does not gather).
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range collectors {
		descs := make(chan *prometheus.Desc, 16)
		c.Describe(descs)
		close(descs)
		for d := range descs {
			if m := fqName.FindStringSubmatch(d.String()); m != nil {
				names[m[1]] = true
				names[m[1]+"_bucket"], names[m[1]+"_sum"], names[m[1]+"_count"] = true, true, true // a histogram's
			}
		}
	}
	return names
}

// Every metric an alert names is one the builder or the operator exports:
// a rule on a renamed or imagined metric would never fire.
func TestAlertsNameExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	known := exported(t)
	checked := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			checkQuery(t, known, "alert "+r.Alert, r.Expr)
			checked++
		}
	}
	if checked < 6 {
		t.Errorf("checked %d alerts, want every one of the file's (at least 6)", checked)
	}
	for _, name := range []string{"eb_peers_lost_total", "eb_phase_duration_seconds_bucket", "eb_operator_run_epoch", "eb_operator_failover_duration_seconds_count"} {
		if !known[name] {
			t.Errorf("%s is missing from the exported names: they look incomplete (%d names)", name, len(known))
		}
	}
}

// Every panel of the dashboard queries metrics the builder or the operator
// exports: a panel on a renamed metric would show nothing.
func TestDashboardQueriesNameExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if dashboard.UID == "" || dashboard.Title == "" || len(dashboard.Panels) == 0 {
		t.Fatalf("dashboard uid %q title %q with %d panels: want all three", dashboard.UID, dashboard.Title, len(dashboard.Panels))
	}
	known := exported(t)
	for _, p := range dashboard.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			checkQuery(t, known, "panel "+strconv.Quote(p.Title), q.Expr)
		}
	}
}

// The alerts that select builder targets by builderScrapeLabel rely on the
// chart's PodMonitor copying the pod's run label onto them.
func TestPodMonitorLabelsBuilderTargetsByRun(t *testing.T) {
	raw, err := os.ReadFile("../../../charts/eventbuilder-operator/templates/podmonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`podTargetLabels:\s*\n(\s*- .*\n)*\s*- eventbuilder\.daq\.io/run\n`).Match(raw) {
		t.Errorf("the PodMonitor's podTargetLabels lack eventbuilder.daq.io/run (which Prometheus names %s): alerts on builder targets select by it", builderScrapeLabel)
	}
}
