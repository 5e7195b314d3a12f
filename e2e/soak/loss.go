package soak

// Lost is what a run's builders counted as not delivered whole: events
// dropped (a MEP missing a lost unit's data, or a lost BU's chunks, under
// --incomplete drop) and events delivered flagged incomplete (--incomplete
// flag). Every event a set does not build whole is counted in one of them
// (builder/docs/control-api.md, "One set").
type Lost struct {
	Dropped, Incomplete int64
}

// Add is l plus m.
func (l Lost) Add(m Lost) Lost { return Lost{l.Dropped + m.Dropped, l.Incomplete + m.Incomplete} }

// Sub is l less m.
func (l Lost) Sub(m Lost) Lost { return Lost{l.Dropped - m.Dropped, l.Incomplete - m.Incomplete} }

// Tally totals a run's lost events over a soak from its units' counters
// as its status shows them, per pod, across pods replaced under the same
// name (a new builder counts from 0: a counter that went down started
// again, and all it holds is new), as Prometheus's increase() does. The
// first reading is the baseline.
type Tally struct {
	last  map[string]Lost
	Total Lost
}

// Observe takes the counters of the run's pods as read now.
func (t *Tally) Observe(now map[string]Lost) {
	baseline := t.last == nil
	if baseline {
		t.last = map[string]Lost{}
	}
	for pod, n := range now {
		prev, seen := t.last[pod]
		t.last[pod] = n
		switch {
		case baseline:
		case !seen, n.Dropped < prev.Dropped || n.Incomplete < prev.Incomplete:
			t.Total = t.Total.Add(n) // a new pod, or a new builder in one: it counted from 0
		default:
			t.Total = t.Total.Add(n.Sub(prev))
		}
	}
}
