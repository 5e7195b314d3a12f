// Package shiftview renders a run as the shift crew reads it: its state in
// words (Status) and its ranks with where each runs (Ranks). Pure
// functions of the objects and the time, for kubectl-eventbuilder and
// golden tests.
package shiftview

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// Status is the run in a few lines: phase, units and spares, counters and
// rates, its conditions (the failing ones first) and its last failover.
func Status(run *ebv1.EventBuilderRun, now time.Time) string {
	var out strings.Builder
	st := run.Status
	phase := string(st.Phase)
	if phase == "" {
		phase = "not observed yet"
	}
	fmt.Fprintf(&out, "Run %s/%s: %s (wanted %s), epoch %d\n", run.Namespace, run.Name, phase, orDash(string(run.Spec.State)), st.Epoch)
	if st.RunNumber != nil || st.Partition != "" {
		fmt.Fprintf(&out, "Data taking: run %s, partition %s\n", orDash(int64Text(st.RunNumber)), orDash(st.Partition))
	}
	fmt.Fprintf(&out, "Units: %d live of %d wanted, %d ranks ready of %d, %d spares left\n",
		st.LiveUnits, run.Spec.Units, st.ReadyUnits, st.RankCount, st.SparesLeft)
	fmt.Fprintf(&out, "Events: %s built, %s incomplete, %s dropped; %s events/s, %s Gb/s", grouped(st.EventsBuilt),
		grouped(st.EventsIncomplete), grouped(st.EventsDropped), grouped(st.EventRate), orDash(st.ThroughputGbps))
	if st.LastSampleTime != nil {
		fmt.Fprintf(&out, " (sampled %s ago)", since(st.LastSampleTime.Time, now))
	}
	out.WriteString("\n")
	if st.Consumed != nil {
		fmt.Fprintf(&out, "Consumers: %s events complete, %s incomplete\n", grouped(st.Consumed.EventsComplete),
			grouped(st.Consumed.EventsIncomplete))
	}
	if len(st.Conditions) > 0 {
		out.WriteString("Conditions (! asks for attention):\n")
		w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
		for _, c := range failingFirst(st.Conditions) {
			mark := " "
			if problem(c) {
				mark = "!"
			}
			fmt.Fprintf(w, "%s %s\t%s\t%s\t%s ago\t%s\n", mark, c.Type, c.Status, c.Reason,
				since(c.LastTransitionTime.Time, now), c.Message)
		}
		_ = w.Flush()
	}
	if f := st.LastFailover; f != nil {
		out.WriteString(failover("Last failover", f, now))
	}
	return out.String()
}

// failover is a failover as the run's status records it, headed title.
func failover(title string, f *ebv1.FailoverStatus, now time.Time) string {
	var out strings.Builder
	fmt.Fprintf(&out, "%s: %s at epoch %d, %s ago, took %s\n", title, f.Outcome, f.Epoch,
		since(f.ObservedTime.Time, now), f.Duration.Duration)
	for _, m := range f.Moves {
		to := "no spare left"
		if m.NoSpare != "" {
			to = m.NoSpare
		}
		if m.SpareRank != nil {
			to = fmt.Sprintf("to rank %d on %s", *m.SpareRank, m.SpareEndpoint)
		} else if f.Outcome == ebv1.OutcomeRejoined {
			to = "rejoined on its rank"
		}
		what := "unit"
		if m.Function != "" {
			what = m.Function + " of unit"
		}
		fmt.Fprintf(&out, "  %s %d (%s): rank %d on %s, %s\n", what, m.Unit, m.Reason, m.FailedRank,
			orDash(m.FailedEndpoint), to)
	}
	return out.String()
}

// Ranks is the run's rank table: each rank's role, unit, endpoint, node,
// leaf and port and readout fibres (from its Fabric, if any), NUMA
// placement, builder state and pod.
func Ranks(run *ebv1.EventBuilderRun, fabric *ebv1.Fabric) string {
	endpoints := map[string]ebv1.FabricEndpoint{}
	if fabric != nil {
		for _, e := range fabric.Spec.Endpoints {
			endpoints[e.Name] = e
		}
	}
	var out strings.Builder
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "RANK\tROLE\tUNIT\tENDPOINT\tNODE\tLEAF/PORT\tFIBRES\tNUMA\tSTATE\tPOD")
	ranks := append([]ebv1.RankStatus(nil), run.Status.Ranks...)
	sort.Slice(ranks, func(i, j int) bool { return ranks[i].Rank < ranks[j].Rank })
	for _, r := range ranks {
		place, fibres := "-", "-"
		if e, ok := endpoints[r.Endpoint]; ok {
			place = fmt.Sprintf("%d/%d", e.Leaf, e.Port)
			if len(e.Streams) > 0 {
				fibres = strings.Join(e.Streams, ",")
			}
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Rank, r.Role, orDash(int32Text(r.Unit)),
			orDash(r.Endpoint), orDash(r.Node), place, fibres, numaText(r.NUMA), orDash(r.State), orDash(r.Pod))
	}
	_ = w.Flush()
	return out.String()
}

func numaText(n *ebv1.RankNUMA) string {
	if n == nil {
		return "-"
	}
	node := "?"
	if n.Node != nil {
		node = strconv.Itoa(int(*n.Node))
	}
	if n.Aligned {
		return node + " aligned"
	}
	if n.Misplaced != "" {
		return node + " misplaced: " + n.Misplaced
	}
	return node + " not aligned"
}

// problem: the condition asks for attention. Every condition of a run
// reads True when all is well, but FabricChanged, True when the run's
// Fabric changed under it.
func problem(c metav1.Condition) bool {
	if c.Type == ebv1.ConditionFabricChanged {
		return c.Status != metav1.ConditionFalse
	}
	return c.Status != metav1.ConditionTrue
}

// failingFirst orders conditions so that the ones to act on lead, each
// group in the run's order.
func failingFirst(conditions []metav1.Condition) []metav1.Condition {
	sorted := append([]metav1.Condition(nil), conditions...)
	sort.SliceStable(sorted, func(i, j int) bool { return problem(sorted[i]) && !problem(sorted[j]) })
	return sorted
}

// since is how long ago t was, rounded for a person to read.
func since(t, now time.Time) string {
	d := max(now.Sub(t), 0)
	if d < time.Hour {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// grouped writes n in groups of three digits: 12 345 678.
func grouped(n int64) string {
	text := strconv.FormatInt(n, 10)
	negative := strings.HasPrefix(text, "-")
	text = strings.TrimPrefix(text, "-")
	var out []byte
	for i := range len(text) {
		if i > 0 && (len(text)-i)%3 == 0 {
			out = append(out, ' ')
		}
		out = append(out, text[i])
	}
	if negative {
		return "-" + string(out)
	}
	return string(out)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func int32Text(n *int32) string {
	if n == nil {
		return ""
	}
	return strconv.Itoa(int(*n))
}

func int64Text(n *int64) string {
	if n == nil {
		return ""
	}
	return strconv.FormatInt(*n, 10)
}
