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

// Verdict is what Judge reads in the points of one fault.
type Verdict struct {
	// Done: every run has built for Settle since both the fault's end
	// and the last point that found one not building.
	Done bool
	// Disrupted: a point found one not building; Detected is the first.
	Disrupted bool
	Detected  time.Duration
	// Building is the first point after Detected that found every run
	// building again: the recovery from the fault itself.
	Building time.Duration
	// Settled is the first point of the building that followed the last
	// point that found one not building: later than Building where a run
	// stopped again before the fault was over (a poll unanswered while
	// the restarted server boots, a unit going home to its readout).
	Settled time.Duration
	// Down is how long the points found one not building in all: from
	// each such point to the next.
	Down time.Duration
}

// Judge reads the points of a fault healed at `healed` (its end; the fault
// itself for one that is not held). Building, Settled and Down are known
// once Done; Detected once Disrupted.
func Judge(points []Point, healed time.Duration) Verdict {
	var v Verdict
	var goodSince time.Duration
	good, returned := false, false
	for i, p := range points {
		switch {
		case !p.Building:
			if !v.Disrupted {
				v.Disrupted, v.Detected = true, p.At
			}
			if i+1 < len(points) {
				v.Down += points[i+1].At - p.At
			}
			good = false
		case !good:
			good, goodSince = true, p.At
			if v.Disrupted && !returned {
				returned, v.Building = true, p.At
			}
		}
	}
	if !good || len(points) == 0 {
		return Verdict{Disrupted: v.Disrupted, Detected: v.Detected}
	}
	last := points[len(points)-1].At
	if last < healed+Settle || last-goodSince < Settle {
		return Verdict{Disrupted: v.Disrupted, Detected: v.Detected}
	}
	v.Done = true
	if v.Disrupted {
		v.Settled = goodSince
	}
	return v
}
