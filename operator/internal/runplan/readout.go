package runplan

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// recable is what brings unread streams back: readout is physical.
const recable = "streams are fibres into an endpoint's readout cards and do not follow a unit to a spare: " +
	"bring the node back, or re-cable the fibres to an endpoint that runs an RU and list them there in the Fabric"

// Readout is the ReadoutComplete condition of a run on fabric under table
// t, and, when streams went unread by a failure, the message that makes
// the run Degraded (empty otherwise), which says what becomes of the
// events under policy (spec.builder.incompleteEvents). ok is false for a
// run without a Fabric or on one that lists no streams: the run has no
// such condition.
func Readout(fabric *planner.Fabric, t planner.RankTable, policy ebv1.IncompletePolicy, generation int64) (c metav1.Condition, degraded string, ok bool) {
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
	var lost []planner.Unread
	count := 0
	for _, u := range unread {
		count += len(u.Streams)
		if u.Lost {
			lost = append(lost, u)
		}
	}
	c.Status, c.Reason = metav1.ConditionFalse, ebv1.ReasonStreamsUnread
	c.Message = fmt.Sprintf("%d of %d readout streams are read by no RU: %s; %s", count, streams, describeUnread(unread), recable)
	if len(lost) > 0 {
		degraded = fmt.Sprintf("readout streams no RU reads since a failure: %s; %s; %s",
			describeUnread(lost), missingSources(t, policy), recable)
	}
	return c, degraded, true
}

// missingSources says what the MEPs hold of the units whose readout was
// lost (planner.Rank.SourceUnread) and what becomes of their events.
func missingSources(t planner.RankTable, policy ebv1.IncompletePolicy) string {
	var missing []planner.Rank
	for _, r := range t.Ranks {
		if r.Role == planner.Live && r.SourceUnread {
			missing = append(missing, r)
		}
	}
	if len(missing) == 0 {
		return "events are built from the sources the set reads"
	}
	sources := shortlist.Join(missing, ", ", func(r planner.Rank) string { return fmt.Sprintf("rank %d (unit %d)", r.Rank, r.Unit) })
	if policy == ebv1.IncompleteFlag {
		return "every MEP holds the source of " + sources + " as missing fragments, and its events are delivered flagged incomplete (spec.builder.incompleteEvents Flag)"
	}
	return "every MEP misses the source of " + sources + ", so its events are dropped (spec.builder.incompleteEvents Drop; Flag delivers them marked incomplete)"
}

// describeUnread names the endpoints (at most shortlist.Most), each with
// its node, its streams and why they are unread.
func describeUnread(unread []planner.Unread) string {
	return shortlist.Join(unread, "; ", func(u planner.Unread) string {
		return fmt.Sprintf("endpoint %s (node %s, streams %s): %s", u.Endpoint, u.Node, strings.Join(u.Streams, ","), u.Why)
	})
}
