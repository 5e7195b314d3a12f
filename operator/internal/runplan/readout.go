package runplan

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// recable is what brings unread streams back: readout is physical.
const recable = "streams are fibres into an endpoint's readout cards and do not follow a unit to a spare: " +
	"bring the node back (its unit goes home once its endpoint is a warm spare again), or re-cable the fibres to an endpoint that runs an RU and list them there in the Fabric"

// Readout is the ReadoutComplete condition of a run on fabric under table
// t, and, when streams went unread by a failure, the message that makes
// the run Degraded (empty otherwise), which says what becomes of the
// events under policy (spec.builder.incompleteEvents). lost is the
// published table's unreadStreams (LostStreams): the endpoints holding
// them are those lost since a failure (a failed server offered as a spare
// again once back among them; a spare a unit only visited not). ok is
// false for a run without a Fabric or on one that lists no streams: the
// run has no such condition.
func Readout(fabric *planner.Fabric, t planner.RankTable, lost []string, policy ebv1.IncompletePolicy, generation int64) (c metav1.Condition, degraded string, ok bool) {
	if fabric == nil {
		return metav1.Condition{}, "", false
	}
	streams := 0
	for _, ep := range fabric.Endpoints {
		streams += len(ep.Streams)
	}
	if streams == 0 {
		return metav1.Condition{}, "", false
	}
	unread := planner.UnreadStreams(*fabric, t)
	c = metav1.Condition{Type: ebv1.ConditionReadoutComplete, ObservedGeneration: generation}
	if len(unread) == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, ebv1.ReasonAllStreamsRead
		c.Message = fmt.Sprintf("RUs read all %d readout streams of the Fabric's endpoints", streams)
		return c, "", true
	}
	listed := setOf(lost)
	var failed []planner.Unread
	count := 0
	for _, u := range unread {
		count += len(u.Streams)
		if slices.ContainsFunc(u.Streams, func(s string) bool { return listed[s] }) {
			failed = append(failed, u)
		}
	}
	c.Status, c.Reason = metav1.ConditionFalse, ebv1.ReasonStreamsUnread
	c.Message = fmt.Sprintf("%d of %d readout streams are read by no RU: %s; %s", count, streams, describeUnread(unread), recable)
	if len(failed) > 0 {
		degraded = fmt.Sprintf("readout streams no RU reads since a failure: %s; %s; %s",
			describeUnread(failed), missingStreams(t, lost, policy), recable)
	}
	return c, degraded, true
}

// LostStreams are the readout streams of fabric that no live RU reads
// under t because of a failure, in the Fabric's endpoint order: the rank
// table's unreadStreams, which builders mark every MEP with. They are
// those of the endpoints a unit of t is away from (Rank.Home: a failure
// moved it off its fibres), those of before (the unreadStreams of prev,
// the table t follows) that no live rank of t reads yet, and those of the
// endpoints a unit read at home under prev that t leaves unread (a unit
// dropped with no spare left). An endpoint a unit only visited (a spare
// that took a failed unit over and lost it again) had streams the plan
// did not read: it takes none with it. With no prev (a fresh plan), the
// streams of endpoints planner.UnreadStreams finds lost (not Ready) are.
// Streams unread by the plan (idle endpoints, spares, leaves not spanned,
// BU-only ranks) are not among them: events never had them. None without
// a Fabric. A stream a live rank of t still lists as its source (a Fabric
// edited since t was planned) is left out, as is a second listing: a
// table names each stream once.
func LostStreams(fabric *planner.Fabric, t planner.RankTable, prev *planner.RankTable, before []string) []string {
	if fabric == nil {
		return nil
	}
	named, left := map[string]bool{}, map[string]bool{}
	for _, r := range t.Ranks {
		if r.Role == planner.Live {
			for _, s := range r.Streams {
				named[s] = true
			}
			left[r.Home] = r.Home != ""
		}
	}
	if prev != nil {
		for _, r := range prev.Ranks {
			if r.Role == planner.Live && r.Home == "" && len(r.Streams) > 0 {
				left[r.Endpoint] = true
			}
		}
	}
	still := setOf(before)
	var lost []string
	for _, u := range planner.UnreadStreams(*fabric, t) {
		for _, s := range u.Streams {
			if (left[u.Endpoint] || (prev == nil && u.Lost) || still[s]) && !named[s] {
				named[s] = true
				lost = append(lost, s)
			}
		}
	}
	return lost
}

func setOf(items []string) map[string]bool {
	set := make(map[string]bool, len(items))
	for _, s := range items {
		set[s] = true
	}
	return set
}

// missingStreams says what the events lack since a failure: the streams
// lost (LostStreams) and the sources of the units whose readout was lost
// (planner.Rank.SourceUnread), and what becomes of the events under
// policy.
func missingStreams(t planner.RankTable, lost []string, policy ebv1.IncompletePolicy) string {
	var missing []planner.Rank
	for _, r := range t.Ranks {
		if r.Role == planner.Live && r.SourceUnread {
			missing = append(missing, r)
		}
	}
	var lacks []string
	if len(lost) > 0 {
		lacks = append(lacks, "every event lacks streams "+shortlist.Join(lost, ", ", func(s string) string { return s })+" (the rank table's unreadStreams)")
	}
	if len(missing) > 0 {
		sources := shortlist.Join(missing, ", ", func(r planner.Rank) string { return fmt.Sprintf("rank %d (unit %d)", r.Rank, r.Unit) })
		if policy == ebv1.IncompleteFlag {
			lacks = append(lacks, "every MEP holds the source of "+sources+" as missing fragments")
		} else {
			lacks = append(lacks, "every MEP misses the source of "+sources)
		}
	}
	switch {
	case len(lacks) == 0:
		// Only where the Fabric was edited since the table was planned:
		// every stream lost is still listed as a rank's source.
		return "the rank table lists no stream as unread: the Fabric changed since it was planned"
	case policy == ebv1.IncompleteFlag:
		return strings.Join(lacks, " and ") + ", so every event is delivered flagged incomplete (spec.builder.incompleteEvents Flag)"
	}
	return strings.Join(lacks, " and ") + ", so every event is dropped (spec.builder.incompleteEvents Drop; Flag delivers them marked incomplete)"
}

// describeUnread names the endpoints (at most shortlist.Most), each with
// its node, its streams and why they are unread.
func describeUnread(unread []planner.Unread) string {
	return shortlist.Join(unread, "; ", func(u planner.Unread) string {
		return fmt.Sprintf("endpoint %s (node %s, streams %s): %s", u.Endpoint, u.Node, strings.Join(u.Streams, ","), u.Why)
	})
}
