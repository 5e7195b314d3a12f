package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/testenv"
)

// The LHCb-sized fabric: 18 leaves of 20 ports, two NUMA endpoints per
// server, 334 endpoints.
func farmFabric() *ebv1.Fabric {
	f := &ebv1.Fabric{ObjectMeta: metav1.ObjectMeta{Name: "farm"},
		Spec: ebv1.FabricSpec{Leaves: 18, Spines: 10, PortsPerLeaf: 20}}
	for i := range 334 {
		leaf, port := int32(i/20), int32(i%20)
		f.Spec.Endpoints = append(f.Spec.Endpoints, ebv1.FabricEndpoint{
			Name: fmt.Sprintf("srv-%03d-%d", i/2, i%2), Node: fmt.Sprintf("srv-%03d", i/2), NUMA: int32(i % 2),
			Leaf: leaf, Port: port})
	}
	return f
}

func TestLayoutDrawsEveryEndpointOnceAtItsLeafAndPort(t *testing.T) {
	fabric := farmFabric()
	m := Layout(fabric)
	if len(m.Endpoints) != len(fabric.Spec.Endpoints) {
		t.Fatalf("%d endpoints drawn, %d in the fabric", len(m.Endpoints), len(fabric.Spec.Endpoints))
	}
	seen := map[string]bool{}
	slots := map[[2]int]string{}
	for _, p := range m.Endpoints {
		e := p.Endpoint
		if seen[e.Name] {
			t.Errorf("%s drawn twice", e.Name)
		}
		seen[e.Name] = true
		if p.X < m.leafX(e.Leaf) || p.X+m.LeafWidth-8 > m.leafX(e.Leaf)+m.LeafWidth {
			t.Errorf("%s at x %d, outside leaf %d's column", e.Name, p.X, e.Leaf)
		}
		if p.Y != portY(e.Port) || p.Y+slotHeight > m.Height {
			t.Errorf("%s at y %d, not port %d's slot within the map (height %d)", e.Name, p.Y, e.Port, m.Height)
		}
		if other, taken := slots[[2]int{p.X, p.Y}]; taken {
			t.Errorf("%s drawn over %s", e.Name, other)
		}
		slots[[2]int{p.X, p.Y}] = e.Name
	}

	// Long server names (kind's) widen the leaves so that every label fits its box.
	long := &ebv1.Fabric{Spec: ebv1.FabricSpec{Leaves: 2, Spines: 1, PortsPerLeaf: 2, Endpoints: []ebv1.FabricEndpoint{
		{Name: "a", Node: "eventbuilder-e2e-worker2", NUMA: 1, Leaf: 1, Port: 1}, {Name: "b", Node: "srv", Leaf: 0, Port: 0}}}}
	lm := Layout(long)
	for _, p := range lm.Endpoints {
		if need := charWidth*len(label(p.Endpoint, maxLabelRank)) + 4; need > lm.LeafWidth-8 {
			t.Errorf("%s's label needs %d units, its box has %d", p.Endpoint.Name, need, lm.LeafWidth-8)
		}
	}
	if lm.Width != 2*margin+2*lm.LeafWidth+leafGap || lm.LeafWidth <= minLeafWidth {
		t.Errorf("map %d wide with leaves %d wide, want two widened leaves", lm.Width, lm.LeafWidth)
	}
}

func TestSVGColoursEachEndpointByWhatRunsThere(t *testing.T) {
	fabric := farmFabric()
	on := map[string]Occupant{
		"srv-000-0": {Run: "daq/physics", Rank: 0, Role: ebv1.RoleLive, State: "RUNNING"},
		"srv-000-1": {Run: "daq/physics", Rank: 1, Role: ebv1.RoleLive, State: ""},
		"srv-001-0": {Run: "daq/physics", Rank: 2, Role: ebv1.RoleSpare, State: "RUNNING"},
	}
	svg := SVG(Layout(fabric), on, map[string]string{"srv-002-0": "NodeNotReady"},
		map[string]string{"srv-003-0": "unit 7 failed here (PeerLost), epoch 4", "srv-000-0": "unit 0 failed here (PodLost), epoch 2"})
	for name, want := range map[string]string{"srv-000-0": "live", "srv-000-1": "trouble", "srv-001-0": "spare",
		"srv-002-0": "down", "srv-003-0": "failed", "srv-166-1": "free"} {
		if !strings.Contains(svg, fmt.Sprintf(`<g class="endpoint %s" id="endpoint-%s"`, want, name)) {
			t.Errorf("endpoint %s is not drawn as %s", name, want)
		}
	}
	if got := strings.Count(svg, `<g class="endpoint `); got != 334 {
		t.Errorf("%d endpoint boxes, want 334", got)
	}
	if !strings.Contains(svg, "daq/physics rank 1 (Live)") || !strings.Contains(svg, "unschedulable: NodeNotReady") ||
		!strings.Contains(svg, "last failover: unit 7 failed here (PeerLost), epoch 4") {
		t.Error("the titles lack the occupant, the reason an endpoint is down or the unit that failed there")
	}
}

// The console against a real API server: the index lists the run, the
// run's page shows every rank and the map marks a live rank whose builder
// does not run; other paths are 404, other methods 405.
func TestHandlerServesTheRunsFromTheAPIServer(t *testing.T) {
	env := testenv.StartForTest(t, filepath.Join("..", "..", ".."))
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fabric := farmFabric()
	if err := c.Create(ctx, fabric); err != nil {
		t.Fatal(err)
	}
	run := &ebv1.EventBuilderRun{ObjectMeta: metav1.ObjectMeta{Name: "physics", Namespace: "default"},
		Spec: ebv1.EventBuilderRunSpec{Units: 2, FabricRef: &ebv1.FabricReference{Name: "farm"},
			Builder: ebv1.BuilderSpec{Image: "eb-builder:dev"}}}
	if err := c.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	run.Status = ebv1.EventBuilderRunStatus{Phase: ebv1.PhaseDegraded, Epoch: 2, LiveUnits: 2, RankCount: 3,
		Ranks: []ebv1.RankStatus{
			{Rank: 0, Role: ebv1.RoleLive, Unit: ptr.To(int32(0)), Endpoint: "srv-000-0", Node: "srv-000", State: "RUNNING"},
			{Rank: 1, Role: ebv1.RoleLive, Unit: ptr.To(int32(1)), Endpoint: "srv-000-1", Node: "srv-000", State: "ERROR"},
			{Rank: 2, Role: ebv1.RoleSpare, Endpoint: "srv-001-0", Node: "srv-001", State: "RUNNING"},
		}}
	if err := c.Status().Update(ctx, run); err != nil {
		t.Fatal(err)
	}
	// Two of the operator's samples, 2 s apart, 2 000 events apart.
	history := NewHistory(Window)
	sampled := metav1.NewMicroTime(time.Now().Add(-3 * time.Second))
	run.Status.LastSampleTime, run.Status.EventsBuilt = &sampled, 10000
	if err := c.Status().Update(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := history.Sample(ctx, c); err != nil {
		t.Fatal(err)
	}
	later := metav1.NewMicroTime(sampled.Add(2 * time.Second))
	run.Status.LastSampleTime, run.Status.EventsBuilt = &later, 12000
	if err := c.Status().Update(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := history.Sample(ctx, c); err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(Handler(c, history, nil))
	t.Cleanup(server.Close)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(server.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	if code, body := get(Prefix); code != http.StatusOK || !strings.Contains(body, `href="runs/default/physics"`) ||
		!strings.Contains(body, "Degraded") {
		t.Errorf("index: %d %s", code, body)
	}
	code, body := get(Prefix + "runs/default/physics")
	if code != http.StatusOK {
		t.Fatalf("run page: %d %s", code, body)
	}
	for _, want := range []string{`<h1 id="run">default/physics: Degraded</h1>`, `http-equiv="refresh"`,
		`<g class="endpoint live" id="endpoint-srv-000-0"`, `<g class="endpoint trouble" id="endpoint-srv-000-1"`,
		`<g class="endpoint spare" id="endpoint-srv-001-0"`, "No failover recorded", `<polyline`, ">1e+03/s<"} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
	ranks := regexp.MustCompile(`(?s)<pre id="ranks">(.*?)</pre>`).FindStringSubmatch(body)
	if ranks == nil || strings.Count(ranks[1], "\n") != 4 { // the header and three ranks
		t.Errorf("ranks section: %q", ranks)
	}
	if code, _ := get(Prefix + "runs/default/nothing"); code != http.StatusNotFound {
		t.Errorf("an unknown run: %d, want 404", code)
	}
	if code, body := get(Prefix + "elsewhere"); code != http.StatusNotFound || !strings.Contains(body, "lists the runs") {
		t.Errorf("an unknown page: %d %s, want 404 saying where the pages are", code, body)
	}
	resp, err := http.Post(server.URL+Prefix, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
}
