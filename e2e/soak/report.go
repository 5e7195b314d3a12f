package soak

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Outcome is what one fault came to.
type Outcome struct {
	Class string
	// Victim names what was hit (a pod, a node).
	Victim string
	// At is when the fault began.
	At time.Time
	// Disrupted: some run stopped building after the fault (else it was
	// ridden out, and Detected and Recovered are zero).
	Disrupted bool
	// Detected is how long after the fault the first run was seen not
	// building; Recovered, how long until every run built again (first
	// seen so: Verdict.Building); Settled, from when every run built on
	// (later where one stopped again while the fault was not over); Down,
	// how long some run was seen not building in all.
	Detected, Recovered, Settled, Down time.Duration
	// Held is how long the fault lasted (a process stopped, a worker
	// down); zero for one that is over as it happens (a pod killed).
	Held time.Duration
	// Back: every run built again (false: the soak gave up waiting).
	Back bool
	// Whole is how long after the fault every run was whole again: each
	// unit live on its home endpoint reading its streams, each spare
	// standing by; a soak's next fault waits for it (zero where nothing
	// waited). NotWhole: the wait gave up, and the next fault found a run
	// short of a spare or a stream.
	Whole    time.Duration
	NotWhole bool
	// Runs is what the fault did to each run on its own, by name (judged
	// on that run's samples): a run with spares fails over while the
	// fault lasts; one without waits for it to end.
	Runs map[string]RunOutcome
}

// RunOutcome is what a fault did to one run.
type RunOutcome struct {
	Disrupted bool
	// Recovered is how long after the fault the run built again, Settled
	// from when it built on, Down how long it was seen not building (as
	// in Outcome).
	Recovered, Settled, Down time.Duration
	// Lost is what its builders counted not delivered whole from the
	// fault to the next one (or the soak's end); PerCycle, the events a
	// set cycle builds at the fault (live units times packingFactor), the
	// unit it is judged in.
	Lost     Lost
	PerCycle int64
}

// Cycles is r.Lost in set cycles.
func (r RunOutcome) Cycles() float64 {
	if r.PerCycle == 0 {
		return 0
	}
	return float64(r.Lost.Dropped+r.Lost.Incomplete) / float64(r.PerCycle)
}

// AfterEnd is how long after the fault ended every run built again: what
// a run without a spare can do, which must wait for its unit to return.
// Zero where the runs built again while it lasted (a failover).
func (o Outcome) AfterEnd() time.Duration {
	return max(0, o.Recovered-o.Held)
}

// Summary is the soak's figures beside its outcomes.
type Summary struct {
	Seed     uint64
	Length   time.Duration
	Outcomes []Outcome
	// Building is, per run, the share of the samples that read its status
	// in which it was building; Read, the share that could read it (not
	// while the API server was down).
	Building, Read map[string]float64
	// Problems are what must never happen (a unit live twice, an event
	// delivered as complete that was not), as found; none is the aim.
	Problems []string
	// Counts are the runs' event counters at the end, by run.
	Counts map[string]string
}

// FarmFaultsPerDay is the fault rate a farm's share is projected to.
const FarmFaultsPerDay = 1

// Report is the summary as a text table: per fault class the count, how
// many disrupted a run, median and worst time to detection and to every
// run building again, the worst time to every run building on for good,
// the most time some run was not building and the worst time to every
// run whole again; then each run's building
// share, projected to a farm that sees FarmFaultsPerDay faults a day (from
// the mean time not building per fault).
func Report(s Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: seed %d, %s, %d faults\n", s.Seed, s.Length.Round(time.Second), len(s.Outcomes))
	fmt.Fprintf(&b, "%-17s %5s %9s %12s %12s %14s %14s %15s %13s %10s %9s %10s %10s\n", "fault", "count", "disrupted", "detect med", "detect max",
		"building med", "building max", "after end max", "settled max", "down max", "not back", "whole max", "not whole")
	var downtime time.Duration
	for _, class := range Classes {
		var detect, recover, afterEnd, settled, down, whole []time.Duration
		count, disrupted, lost, notWhole := 0, 0, 0, 0
		for _, o := range s.Outcomes {
			if o.Class != class {
				continue
			}
			count++
			switch {
			case o.NotWhole:
				notWhole++
			case o.Whole > 0:
				whole = append(whole, o.Whole)
			}
			if !o.Back {
				lost++
				continue
			}
			if o.Disrupted {
				disrupted++
				detect = append(detect, o.Detected)
				recover, afterEnd = append(recover, o.Recovered), append(afterEnd, o.AfterEnd())
				settled, down = append(settled, o.Settled), append(down, o.Down)
				downtime += o.Down
			}
		}
		if count == 0 {
			continue
		}
		fmt.Fprintf(&b, "%-17s %5d %9d %12s %12s %14s %14s %15s %13s %10s %9d %10s %10d\n", class, count, disrupted,
			median(detect), worst(detect), median(recover), worst(recover), worst(afterEnd), worst(settled), worst(down), lost,
			worst(whole), notWhole)
	}
	runs := make([]string, 0, len(s.Building))
	for run := range s.Building {
		runs = append(runs, run)
	}
	slices.Sort(runs)
	for _, run := range runs {
		perRun(&b, run, s.Outcomes)
	}
	perFault := time.Duration(0)
	if n := len(s.Outcomes); n > 0 {
		perFault = downtime / time.Duration(n)
	}
	for _, run := range runs {
		fmt.Fprintf(&b, "run %s: building in %.2f%% of the samples that read its status (%.2f%% of all); %s\n", run,
			100*s.Building[run], 100*s.Read[run], s.Counts[run])
	}
	fmt.Fprintf(&b, "mean time not building per fault: %s; at %d fault a day a farm's run would build %.4f%% of the time\n",
		perFault.Round(time.Millisecond), FarmFaultsPerDay, 100*Projected(perFault, FarmFaultsPerDay))
	if len(s.Problems) == 0 {
		b.WriteString("problems: none (no unit live on two ranks, no event delivered as complete that was not)\n")
	}
	for _, p := range s.Problems {
		fmt.Fprintf(&b, "PROBLEM: %s\n", p)
	}
	return b.String()
}

// perRun writes, per fault class that disrupted run, how often and the
// worst time to its building again, from the fault and from its end; and
// per class that cost it events, the most one fault cost.
func perRun(b *strings.Builder, run string, outcomes []Outcome) {
	fmt.Fprintf(b, "run %s alone:\n", run)
	for _, class := range Classes {
		var recover, afterEnd, settled, down []time.Duration
		var most RunOutcome
		for _, o := range outcomes {
			r, ok := o.Runs[run]
			if !ok || o.Class != class {
				continue
			}
			if r.Cycles() > most.Cycles() {
				most = r
			}
			if o.Back && r.Disrupted {
				recover, afterEnd = append(recover, r.Recovered), append(afterEnd, max(0, r.Recovered-o.Held))
				settled, down = append(settled, r.Settled), append(down, r.Down)
			}
		}
		if len(recover) > 0 {
			fmt.Fprintf(b, "  %-17s %9d disrupted, building again at worst %s after the fault, %s after its end; "+
				"building on from %s at worst, not building %s at most\n",
				class, len(recover), worst(recover), worst(afterEnd), worst(settled), worst(down))
		}
		if most.Cycles() > 0 {
			fmt.Fprintf(b, "  %-17s lost at most %d dropped + %d flagged incomplete events in one fault: %.1f set cycles of %d\n",
				class, most.Lost.Dropped, most.Lost.Incomplete, most.Cycles(), most.PerCycle)
		}
	}
}

// Projected is the share of a day a run builds when each of faultsPerDay
// faults stops it for perFault.
func Projected(perFault time.Duration, faultsPerDay int) float64 {
	day := 24 * time.Hour
	return 1 - float64(perFault*time.Duration(faultsPerDay))/float64(day)
}

func median(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(100 * time.Millisecond).String()
}

func worst(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	return slices.Max(d).Round(100 * time.Millisecond).String()
}
