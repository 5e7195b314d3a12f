package soak

import (
	"bytes"
	"image/png"
	"strings"
	"testing"
	"time"
)

// The same seed plans the same faults; every class and the bounds are met
// over a long plan.
func TestAPlanIsItsSeeds(t *testing.T) {
	a, b, c := NewPlan(7), NewPlan(7), NewPlan(8)
	same, differs := true, false
	seen := map[string]bool{}
	for range 200 {
		x, y, z := a.Next(), b.Next(), c.Next()
		same = same && x == y
		differs = differs || x != z
		seen[x.Class] = true
		if x.Gap < MinGap || x.Gap >= MaxGap || x.Hold < MinHold || x.Hold >= MaxHold || x.Pick < 0 {
			t.Errorf("fault %+v out of bounds", x)
		}
	}
	if !same || !differs {
		t.Errorf("same seed, same plan: %v; another seed, another plan: %v", same, differs)
	}
	if len(seen) != len(Classes) {
		t.Errorf("classes planned %v, want all of %v", seen, Classes)
	}
}

func TestTheReportSaysPerClassHowLongAndHowOften(t *testing.T) {
	s := Summary{Seed: 42, Length: time.Hour, Building: map[string]float64{"production": 0.99, "plain": 0.995},
		Read:   map[string]float64{"production": 0.98, "plain": 0.98},
		Counts: map[string]string{"production": "built 10", "plain": "built 20"},
		Outcomes: []Outcome{
			{Class: PodKilled, Disrupted: true, Detected: time.Second, Recovered: 3 * time.Second, Settled: 3 * time.Second, Down: 2 * time.Second, Back: true,
				Whole: 2 * time.Minute},
			// Back at 5 s, stopped again for a second at 6 s (a unit going home).
			{Class: PodKilled, Disrupted: true, Detected: 2 * time.Second, Recovered: 5 * time.Second, Settled: 7 * time.Second, Down: 4 * time.Second, Back: true},
			{Class: PodKilled, Disrupted: true, Detected: 3 * time.Second, Recovered: 9 * time.Second, Settled: 9 * time.Second, Down: 6 * time.Second, Back: true,
				Whole: 2*time.Minute + 10*time.Second},
			// Not whole again: the next fault found a spare missing.
			{Class: PodKilled, Back: true, NotWhole: true},
			{Class: BuilderStopped, Back: true},
			// A worker down 10 s under a run without a spare: back 14 s
			// after the stop is 4 s after its start.
			{Class: WorkerStopped, Disrupted: true, Detected: 2 * time.Second, Recovered: 14 * time.Second, Settled: 14 * time.Second,
				Down: 12 * time.Second, Held: 10 * time.Second, Back: true,
				Runs: map[string]RunOutcome{"production": {Disrupted: true, Recovered: 3 * time.Second, Settled: 20 * time.Second, Down: 2 * time.Second,
					Lost: Lost{Incomplete: 1500}, PerCycle: 1000},
					"plain": {Disrupted: true, Recovered: 14 * time.Second, Settled: 14 * time.Second, Down: 12 * time.Second, Lost: Lost{Dropped: 4000}, PerCycle: 4000}}},
			{Class: WorkerStopped, Back: false},
		}}
	r := Report(s)
	for _, want := range []string{
		"soak: seed 42, 1h0m0s, 7 faults",
		"pod-killed            4         3           2s           3s             5s             9s              9s            9s         6s         0      2m10s          1",
		"builder-stopped       1         0            -            -              -              -               -             -          -         0          -          0",
		"worker-stopped        2         1           2s           2s            14s            14s              4s           14s        12s         1          -          0",
		"run plain: building in 99.50% of the samples that read its status (98.00% of all); built 20",
		"run plain alone:\n  worker-stopped            1 disrupted, building again at worst 14s after the fault, 4s after its end; " +
			"building on from 14s at worst, not building 12s at most\n" +
			"  worker-stopped    lost at most 4000 dropped + 0 flagged incomplete events in one fault: 1.0 set cycles of 4000\n",
		"run production alone:\n  worker-stopped            1 disrupted, building again at worst 3s after the fault, 0s after its end; " +
			"building on from 20s at worst, not building 2s at most\n" +
			"  worker-stopped    lost at most 0 dropped + 1500 flagged incomplete events in one fault: 1.5 set cycles of 1000\n",
		"mean time not building per fault: 3.429s",
		"problems: none",
	} {
		if !strings.Contains(r, want) {
			t.Errorf("report lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r, "operator-killed") {
		t.Errorf("a class with no fault is listed:\n%s", r)
	}
	if p := Projected(10*time.Second, 1); p < 0.99988 || p > 0.99989 {
		t.Errorf("10 s a day: %f", p)
	}
	if r := Report(Summary{Problems: []string{"unit 0 live on ranks 0, 2"}}); !strings.Contains(r, "PROBLEM: unit 0 live on ranks 0, 2") {
		t.Errorf("problems not reported:\n%s", r)
	}
}

// The timeline is a PNG of the size asked, with something drawn on it.
func TestTheTimelineIsAPNG(t *testing.T) {
	var samples []Sample
	for i := range 120 {
		rate := 1e6
		if i > 40 && i < 50 {
			rate = 0
		}
		samples = append(samples, Sample{At: time.Duration(i) * time.Second, Rate: map[string]float64{"production": rate, "plain": rate / 2}})
	}
	var buf bytes.Buffer
	if err := Timeline(samples, []Mark{{At: 40 * time.Second, Class: PodKilled}}, &buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 250 {
		t.Errorf("timeline %v, want about 12 x 4 inches", b)
	}
}
