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
		name                string
		points              []Point
		healed              time.Duration
		done, disrupted     bool
		detected, recovered time.Duration
	}{
		{"no points yet", nil, 0, false, false, 0, 0},
		{"ridden out, not settled", points(5, -1, -1), 0, false, false, 0, 0},
		{"ridden out", points(11, -1, -1), 0, true, false, 0, 0},
		{"ridden out past a long hold", points(15, -1, -1), 8 * s, false, false, 0, 0},
		{"noticed after 2 s, back at 6 s, not settled", points(12, 2, 6), 0, false, true, 2 * s, 0},
		{"noticed after 2 s, back at 6 s", points(17, 2, 6), 0, true, true, 2 * s, 6 * s},
		{"a second stop after being back (a rejoin's switch)", append(points(9, 2, 5), Point{At: 9 * s}, Point{At: 10 * s, Building: false},
			Point{At: 11 * s, Building: true}, Point{At: 21 * s, Building: true}), 0, true, true, 2 * s, 11 * s},
		{"still stopped", points(30, 2, 40), 0, false, true, 2 * s, 0},
	} {
		done, disrupted, detected, recovered := Judge(tc.points, tc.healed)
		if done != tc.done || disrupted != tc.disrupted || detected != tc.detected || recovered != tc.recovered {
			t.Errorf("%s: done %v disrupted %v detected %s recovered %s; want %v %v %s %s", tc.name, done, disrupted, detected, recovered,
				tc.done, tc.disrupted, tc.detected, tc.recovered)
		}
	}
}
