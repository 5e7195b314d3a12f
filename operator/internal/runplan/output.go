package runplan

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// DefaultOutputStallAfter is spec.outputStallAfter's default.
const DefaultOutputStallAfter = 60 * time.Second

// OutputStallAfter is how long a run lets a BU's output take no MEP.
func OutputStallAfter(spec *ebv1.EventBuilderRunSpec) time.Duration {
	if spec.OutputStallAfter != nil {
		return spec.OutputStallAfter.Duration
	}
	return DefaultOutputStallAfter
}

// outputStalled says whether rank r of t runs a BU whose builder, building,
// reported (rep) that its output has taken no MEP for `after`.
func outputStalled(r planner.Rank, rep builderapi.Report, after time.Duration) bool {
	return r.Role == planner.Live && r.Function != planner.RU && rep.Activity == builderapi.ActivityBuilding &&
		rep.OutputStalledSeconds >= after.Seconds()
}

// OutputStalls finds the live ranks of t whose BU output has taken no MEP
// for `after` while building, except those in failed: planned moves of the
// BU alone (spec.outputStallPolicy MoveBU), in rank order, as Draining's:
// never every unit that still builds at once.
func OutputStalls(t planner.RankTable, reports map[int32]builderapi.Report, after time.Duration, failed []Failure) []Failure {
	moves := plannedMoves(t, failed, ebv1.ReasonOutputStalled, func(r planner.Rank) bool {
		rep, ok := reports[int32(r.Rank)]
		return ok && outputStalled(r, rep, after)
	})
	for i := range moves {
		moves[i].BUOnly = true
	}
	return moves
}

// OutputsFlowing is the OutputsFlowing condition of a run under t whose
// builders last reported reports: True when no live BU's output has
// stalled for `after`, False naming those that have. ok is false when no
// live BU reported (no poll yet): the run keeps the condition it has.
func OutputsFlowing(t planner.RankTable, reports map[int32]builderapi.Report, after time.Duration,
	policy ebv1.OutputStallPolicy, generation int64) (c metav1.Condition, ok bool) {
	var reported int
	var stalled []string
	for _, r := range t.Ranks {
		rep, ok := reports[int32(r.Rank)]
		if !ok || r.Role != planner.Live || r.Function == planner.RU {
			continue
		}
		reported++
		if outputStalled(r, rep, after) {
			stalled = append(stalled, fmt.Sprintf("rank %d (%s): no MEP taken for %.0f s, %d MEPs dropped here",
				r.Rank, orNone(r.Endpoint), rep.OutputStalledSeconds, rep.MEPsDiscarded))
		}
	}
	if reported == 0 {
		return metav1.Condition{}, false
	}
	c = metav1.Condition{Type: ebv1.ConditionOutputsFlowing, ObservedGeneration: generation}
	if len(stalled) == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, ebv1.ReasonOutputsFlowing
		c.Message = fmt.Sprintf("the outputs of %d live BUs take their MEPs", reported)
		return c, true
	}
	then := "spec.outputStallPolicy is Report: set it to MoveBU to move such a BU to a warm spare, or bring its consumer back"
	if policy == ebv1.OutputStallMoveBU {
		then = "each BU moves to a warm spare on another server (its RU reads on), or stays while no spare is left (status.lastFailover)"
	}
	c.Status, c.Reason = metav1.ConditionFalse, ebv1.ReasonOutputStalled
	c.Message = fmt.Sprintf("%d of %d BUs drop every MEP, their output having taken none for spec.outputStallAfter %s or longer "+
		"(the consumer gone or stuck): %s; %s", len(stalled), reported, after, shortlist.Join(stalled, "; ", func(s string) string { return s }), then)
	return c, true
}

func orNone(endpoint string) string {
	if endpoint == "" {
		return "no endpoint"
	}
	return "endpoint " + endpoint
}
