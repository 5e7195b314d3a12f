package console

import (
	"bytes"
	"fmt"
	"html/template"
	"time"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/shiftview"
)

// RefreshSeconds is how often a page reloads itself.
const RefreshSeconds = 5

// Each state's colour is set once (--c) and used by the map's boxes and
// the legend alike.
const style = `body{font-family:sans-serif;margin:1em}pre{background:#f4f4f4;padding:.5em;overflow-x:auto}
svg.fabric .leaf rect{fill:#fafafa;stroke:#999}svg.fabric text{font:11px monospace}
.live{--c:#8fd18f}.trouble{--c:#f0a040}.spare{--c:#8fb8e8}.dummy{--c:#ccc}.free,.failed{--c:#fff}.down{--c:#e06060}
svg.fabric .endpoint rect{stroke:#333;fill:var(--c)}svg.fabric .endpoint.failed rect{stroke:#d00;stroke-width:3;stroke-dasharray:5 3}
.legend span{padding:0 .5em;margin-right:.5em;border:1px solid #333;background:var(--c)}.legend .failed{border:2px dashed #d00}`

var pages = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{{.Refresh}}">
<title>Event builder runs</title><style>{{.Style}}</style></head><body>
<h1>Event builder runs</h1>
<table id="runs"><tr><th>run</th><th>phase</th><th>live units</th><th>events/s</th><th>Gb/s</th></tr>
{{range .Runs}}<tr><td><a href="runs/{{.Namespace}}/{{.Name}}">{{.Namespace}}/{{.Name}}</a></td><td>{{.Status.Phase}}</td>
<td>{{.Status.LiveUnits}} of {{.Spec.Units}}</td><td>{{.Status.EventRate}}</td><td>{{.Status.ThroughputGbps}}</td></tr>
{{else}}<tr><td colspan="5">no EventBuilderRun</td></tr>{{end}}</table>
</body></html>`))

var runPage = template.Must(template.New("run").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{{.Refresh}}">
<title>{{.Run.Namespace}}/{{.Run.Name}}</title><style>{{.Style}}</style></head><body>
<p><a href="../../">all runs</a> · shown {{.Now}}, reloads every {{.Refresh}} s</p>
<h1 id="run">{{.Run.Namespace}}/{{.Run.Name}}: {{.Phase}}</h1>
<pre id="status">{{.Status}}</pre>
<h2>Event rate, last {{.Window}}</h2>
<p id="rate-source">from {{.RateSource}}</p>
<div id="rate">{{.RateChart}}</div>
{{if .Map}}<h2>Fabric {{.FabricName}}</h2>
<p class="legend"><span class="live">building</span><span class="trouble">live, not building</span>
<span class="spare">spare</span><span class="dummy">dummy</span><span class="free">free</span><span class="down">unschedulable</span>
<span class="failed">a unit failed here (last failover)</span></p>
{{.Map}}{{end}}
<h2>Ranks</h2>
<pre id="ranks">{{.Ranks}}</pre>
<h2>Failovers</h2>
<pre id="failovers">{{.Failovers}}</pre>
</body></html>`))

// IndexPage lists the runs with their phase and rates.
func IndexPage(runs []ebv1.EventBuilderRun) ([]byte, error) {
	var b bytes.Buffer
	err := pages.Execute(&b, struct {
		Refresh int
		Style   template.CSS
		Runs    []ebv1.EventBuilderRun
	}{RefreshSeconds, template.CSS(style), runs})
	return b.Bytes(), err
}

// RunView is what a run's page shows: the run, its event rate over the
// last Window (Rates, read from RateSource), its failovers (the timeline
// History kept; none: the status's last one), its Fabric (nil: a run
// without one) with the runs on it (OnFabric, whose ranks the map shows
// too), as of Now.
type RunView struct {
	Run        *ebv1.EventBuilderRun
	Rates      []RatePoint
	RateSource string
	Failovers  []ebv1.FailoverStatus
	Fabric     *ebv1.Fabric
	OnFabric   []ebv1.EventBuilderRun
	Now        time.Time
}

// RunPage is one run: its status, event rate, fabric map with what runs
// where, ranks and failovers.
func RunPage(v RunView) ([]byte, error) {
	run, fabric, now := v.Run, v.Fabric, v.Now
	data := struct {
		Refresh                  int
		Style                    template.CSS
		Run                      *ebv1.EventBuilderRun
		Phase, Now, FabricName   string
		Status, Ranks, Failovers string
		RateSource               string
		Map, RateChart           template.HTML
		Window                   time.Duration
	}{Refresh: RefreshSeconds, Style: template.CSS(style), Run: run, Phase: string(run.Status.Phase),
		Now: now.UTC().Format(time.RFC3339), Status: shiftview.Status(run, now), Ranks: shiftview.Ranks(run, fabric),
		Failovers: shiftview.Timeline(v.Failovers, run, now), Window: Window, RateSource: v.RateSource,
		// RateSVG writes numbers and its own labels only.
		RateChart: template.HTML(RateSVG(v.Rates, now, Window))} //nolint:gosec // numbers only
	if data.Phase == "" {
		data.Phase = "not observed yet"
	}
	if fabric != nil {
		on := map[string]Occupant{}
		for _, r := range v.OnFabric {
			for _, rank := range r.Status.Ranks {
				if rank.Endpoint != "" {
					on[rank.Endpoint] = Occupant{Run: r.Namespace + "/" + r.Name, Rank: rank.Rank, Role: rank.Role, State: rank.State}
				}
			}
		}
		down := map[string]string{}
		for _, u := range fabric.Status.Unschedulable {
			down[u.Name] = u.Reason
		}
		failed := map[string]string{}
		if f := run.Status.LastFailover; f != nil {
			for _, m := range f.Moves {
				if m.FailedEndpoint != "" {
					failed[m.FailedEndpoint] = fmt.Sprintf("unit %d failed here (%s), epoch %d", m.Unit, m.Reason, f.Epoch)
				}
			}
		}
		// SVG escapes every name and text it writes itself.
		data.Map = template.HTML(SVG(Layout(fabric), on, down, failed)) //nolint:gosec // built from escaped parts
		data.FabricName = fabric.Name
	}
	var b bytes.Buffer
	err := runPage.Execute(&b, data)
	return b.Bytes(), err
}
