package main

import (
	"flag"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"daq.io/eventbuilder/operator/internal/builderclient"
	"daq.io/eventbuilder/operator/internal/testenv"
)

// countingTransport counts the discovery requests (GET /api, /apis and
// their group versions) that pass it.
type countingTransport struct {
	next      http.RoundTripper
	discovery *atomic.Int64
}

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	path := strings.Trim(req.URL.Path, "/")
	parts := strings.Split(path, "/")
	if req.Method == http.MethodGet && (path == "api" || path == "apis" ||
		(parts[0] == "api" && len(parts) == 2) || (parts[0] == "apis" && len(parts) <= 3)) {
		c.discovery.Add(1)
	}
	return c.next.RoundTrip(req)
}

// A manager made again in the same process (runReplica, after a lost
// lease) asks the API server for no discovery: the REST mapper, and what it
// learnt making the first one, are the process's.
func TestAFreshManagerNeedsNoDiscovery(t *testing.T) {
	env := testenv.StartForTest(t, filepath.Join("..", ".."))
	var discovery atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(next http.RoundTripper) http.RoundTripper {
		return countingTransport{next: next, discovery: &discovery}
	}
	o := bindFlags(flag.NewFlagSet("operator", flag.ContinueOnError))
	o.probeAddr = "0"
	clients, err := o.controlClients()
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := sharedMapper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	builders := builderclient.New(builderclient.Timeouts{Poll: o.pollTimeout, Control: o.controlTimeout})
	for made := range 2 {
		before := discovery.Load()
		if _, err := setUpManager(cfg, mapper, o, env.Scheme, metricsserver.Options{BindAddress: "0"}, nil, clients, builders); err != nil {
			t.Fatalf("manager %d: %v", made+1, err)
		}
		asked := discovery.Load() - before
		t.Logf("manager %d: %d discovery requests", made+1, asked)
		switch {
		case made == 0 && asked == 0:
			t.Fatal("the first manager asked for no discovery: the test counts nothing")
		case made == 1 && asked != 0:
			t.Errorf("the second manager asked for %d discovery requests, want 0 (the first one's mapper)", asked)
		}
	}
}
