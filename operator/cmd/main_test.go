package main

import (
	"flag"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chart is the operator's Helm chart, relative to this package.
var chart = filepath.Join("..", "..", "charts", "eventbuilder-operator")

// helmTemplate renders the chart with the given --set values; it skips
// the test, saying why, when the repository's helm is not built.
func helmTemplate(t *testing.T, set ...string) string {
	t.Helper()
	bins, _ := filepath.Glob(filepath.Join("..", "..", "bin", "helm-*", "helm"))
	if len(bins) == 0 {
		t.Skip("no helm in ../bin/helm-*/ (make test-chart builds it)")
	}
	args := []string{"template", "eb", chart}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(bins[0], args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
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
		"builder-poll-interval":     "builderPollInterval",
		"builder-poll-timeout":      "builderPollTimeout",
		"builder-control-timeout":   "builderControlTimeout",
		"node-not-ready-grace":      "nodeNotReadyGrace",
		"builder-unreachable-after": "builderUnreachableAfter",
		"builder-stall-after":       "builderStallAfter",
		"max-concurrent-reconciles": "maxConcurrentReconciles",
		"status-counters-interval":  "statusCountersInterval",
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
