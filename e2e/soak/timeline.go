package soak

import (
	"fmt"
	"image/color"
	"io"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Sample is the runs' event rates at a time of the soak.
type Sample struct {
	At   time.Duration
	Rate map[string]float64 // events per second, by run
}

// Mark is a fault on the timeline.
type Mark struct {
	At    time.Duration
	Class string
}

// Timeline draws each run's event rate over the soak, a line per run,
// with a vertical line at each fault, as a PNG.
func Timeline(samples []Sample, marks []Mark, w io.Writer) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("event rate per run, %d faults marked", len(marks))
	p.X.Label.Text = "minutes into the soak"
	p.Y.Label.Text = "events/s"
	var runs []string
	top := 1.0
	for _, s := range samples {
		for run, rate := range s.Rate {
			if !slices.Contains(runs, run) {
				runs = append(runs, run)
			}
			top = max(top, rate)
		}
	}
	slices.Sort(runs)
	palette := []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}}
	for i, run := range runs {
		points := make(plotter.XYs, 0, len(samples))
		for _, s := range samples {
			if rate, ok := s.Rate[run]; ok {
				points = append(points, plotter.XY{X: s.At.Minutes(), Y: rate})
			}
		}
		line, err := plotter.NewLine(points)
		if err != nil {
			return fmt.Errorf("run %s: %w", run, err)
		}
		line.Color = palette[i%len(palette)]
		p.Add(line)
		p.Legend.Add(run, line)
	}
	for _, m := range marks {
		fault, err := plotter.NewLine(plotter.XYs{{X: m.At.Minutes(), Y: 0}, {X: m.At.Minutes(), Y: top}})
		if err != nil {
			return err
		}
		fault.Color = color.Gray{Y: 0x99}
		fault.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(fault)
	}
	p.Legend.Top = true
	out, err := p.WriterTo(12*vg.Inch, 4*vg.Inch, "png")
	if err != nil {
		return err
	}
	_, err = out.WriteTo(w)
	return err
}
