package opmetrics

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"
)

// The chart's alert rules (charts/eventbuilder-operator/files/alerts.yaml),
// tested for behaviour by promtool (make test-chart).
const alertsFile = "../../../charts/eventbuilder-operator/files/alerts.yaml"

// builderMetrics is eb-builder's /metrics as its tests write it
// (builder/tests/golden.hpp).
const builderMetrics = "../builderstatus/testdata/builder/metrics.txt"

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
	metric := regexp.MustCompile(`\beb_[a-z_]+\b`)
	checked := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			names := metric.FindAllString(r.Expr, -1)
			if len(names) == 0 {
				t.Errorf("alert %s names no eb_ metric: %s", r.Alert, r.Expr)
			}
			for _, name := range names {
				if !known[name] {
					t.Errorf("alert %s uses %s, which neither eb-builder nor the operator exports", r.Alert, name)
				}
			}
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
