package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/ranktable"
)

const (
	sampleFabric = "../../../config/samples/eventbuilder_v1alpha1_fabric.yaml"
	sampleRun    = "../../../config/samples/eventbuilder_v1alpha1_eventbuilderrun_fabric.yaml"
)

// The sample run (6 units, 2 spares on the 4-server sample Fabric) as the
// operator plans it, then as its failovers leave it.
func TestPlanAndFailovers(t *testing.T) {
	tests := []struct {
		name           string
		fail           string
		wantLive       int
		wantMoved      int
		wantDropped    int
		wantUnreadFrom string
	}{
		{name: "planned", wantLive: 6},
		{name: "a server lost: both units on the spare server", fail: "eb0", wantLive: 6, wantMoved: 2, wantUnreadFrom: "eb0-"},
		{name: "two servers lost: no spare left for the second", fail: "eb0,eb1", wantLive: 4, wantMoved: 2, wantDropped: 2, wantUnreadFrom: "eb0-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(sampleFabric, sampleRun, tt.fail)
			if err != nil {
				t.Fatal(err)
			}
			live := 0
			for _, r := range out.Table.Ranks {
				if r.State == ranktable.Live {
					live++
					if tt.fail != "" && strings.Contains(","+tt.fail+",", ","+r.Node+",") {
						t.Errorf("rank %d still live on lost node %s", r.Rank, r.Node)
					}
				}
			}
			moved, dropped := 0, 0
			for _, m := range out.Moves {
				if m.Dropped {
					dropped++
				} else if m.SpareEndpoint != "" {
					moved++
				}
			}
			if live != tt.wantLive || moved != tt.wantMoved || dropped != tt.wantDropped {
				t.Errorf("live %d, moved %d, dropped %d; want %d, %d, %d (moves %+v)", live, moved, dropped, tt.wantLive, tt.wantMoved, tt.wantDropped, out.Moves)
			}
			if tt.wantUnreadFrom != "" && (len(out.Table.UnreadStreams) == 0 || !strings.HasPrefix(out.Table.UnreadStreams[0], tt.wantUnreadFrom)) {
				t.Errorf("unread streams %v, want the lost server's first", out.Table.UnreadStreams)
			}
			if out.Fabric.Leaves != 2 || out.Fabric.Spines != 2 || out.Fabric.Routing != "PortModSpines" {
				t.Errorf("fabric shape %+v", out.Fabric)
			}
		})
	}
}

func TestPlanRefusesBadInput(t *testing.T) {
	tests := []struct{ name, fabric, run, fail, want string }{
		{name: "no manifests", want: "-fabric and -run are required"},
		{name: "kinds swapped", fabric: sampleRun, run: sampleFabric, want: `kind "EventBuilderRun", want Fabric`},
		{name: "unknown node", fabric: sampleFabric, run: sampleRun, fail: "eb9", want: `"eb9" is no endpoint's node`},
		{name: "missing file", fabric: filepath.Join(t.TempDir(), "none.yaml"), run: sampleRun, want: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := run(tt.fabric, tt.run, tt.fail)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// The farm simulator's tests read eb-plan's output for their manifests
// (builder/sim/testdata): it must stay what eb-plan prints.
func TestSimulatorTestdataIsEbPlansOutput(t *testing.T) {
	dir := "../../../builder/sim/testdata"
	for _, run := range []string{"all-live", "with-spares"} {
		t.Run(run, func(t *testing.T) {
			out, err := Plan(mustRead(t, filepath.Join(dir, "two-leaves-fabric.yaml"), run+"-run.yaml", dir))
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, run+"-plan.json"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got)+"\n" != string(want) {
				t.Errorf("%s-plan.json is not eb-plan's output; regenerate it:\n  eb-plan -fabric %s/two-leaves-fabric.yaml -run %s/%s-run.yaml > %s/%s-plan.json",
					run, dir, dir, run, dir, run)
			}
		})
	}
}

func mustRead(t *testing.T, fabricFile, runFile, dir string) (*ebv1.Fabric, *ebv1.EventBuilderRun, []string) {
	t.Helper()
	var fabric ebv1.Fabric
	var run ebv1.EventBuilderRun
	if err := readManifest(fabricFile, "Fabric", &fabric); err != nil {
		t.Fatal(err)
	}
	if err := readManifest(filepath.Join(dir, runFile), "EventBuilderRun", &run); err != nil {
		t.Fatal(err)
	}
	return &fabric, &run, nil
}
