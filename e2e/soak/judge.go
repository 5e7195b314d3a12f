package soak

import "time"

// Point is one sample of the runs taken after a fault: when, and whether
// every run was building.
type Point struct {
	At       time.Duration // since the fault
	Building bool
}

// Settle is how long after a fault ends every run must have been building
// for the fault to be over: longer than the operator takes to notice a
// silent unit (2.5 s at worst) and than a rejoin's epoch switch.
const Settle = 10 * time.Second

// Judge reads the points of a fault healed at `healed` (its end; the fault
// itself for one that is not held): done once every run has built for
// Settle since both the fault's end and the last point that found one not
// building. Disrupted says whether a point found one not building;
// detected is the first such point, recovered the first point of the
// building that followed the last.
func Judge(points []Point, healed time.Duration) (done, disrupted bool, detected, recovered time.Duration) {
	var goodSince time.Duration
	good := false
	for _, p := range points {
		switch {
		case !p.Building:
			if !disrupted {
				disrupted, detected = true, p.At
			}
			good = false
		case !good:
			good, goodSince = true, p.At
		}
	}
	if !good || len(points) == 0 {
		return false, disrupted, detected, 0
	}
	last := points[len(points)-1].At
	if last < healed+Settle || last-goodSince < Settle {
		return false, disrupted, detected, 0
	}
	if !disrupted {
		return true, false, 0, 0
	}
	return true, true, detected, goodSince
}
