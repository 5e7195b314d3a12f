package soak

import (
	"testing"
	"time"
)

func TestJudgeTimesAFaultFromItsPoints(t *testing.T) {
	s := time.Second
	// points every second from 0 to n-1, not building in [from, to)
	points := func(n int, from, to int) []Point {
		var out []Point
		for i := range n {
			out = append(out, Point{At: time.Duration(i) * s, Building: i < from || i >= to})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		points []Point
		healed time.Duration
		want   Verdict
	}{
		{"no points yet", nil, 0, Verdict{}},
		{"ridden out, not settled", points(5, -1, -1), 0, Verdict{}},
		{"ridden out", points(11, -1, -1), 0, Verdict{Done: true}},
		{"ridden out past a long hold", points(15, -1, -1), 8 * s, Verdict{}},
		{"noticed after 2 s, back at 6 s, not settled", points(12, 2, 6), 0, Verdict{Disrupted: true, Detected: 2 * s}},
		{"noticed after 2 s, back at 6 s", points(17, 2, 6), 0,
			Verdict{Done: true, Disrupted: true, Detected: 2 * s, Building: 6 * s, Settled: 6 * s, Down: 4 * s}},
		{"a second stop after being back (a unit going home)", append(points(9, 2, 5), Point{At: 9 * s}, Point{At: 10 * s, Building: false},
			Point{At: 11 * s, Building: true}, Point{At: 21 * s, Building: true}), 0,
			Verdict{Done: true, Disrupted: true, Detected: 2 * s, Building: 5 * s, Settled: 11 * s, Down: 5 * s}},
		{"still stopped", points(30, 2, 40), 0, Verdict{Disrupted: true, Detected: 2 * s}},
	} {
		if got := Judge(tc.points, tc.healed); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
