// Package runplan holds the reconcilers' decisions as pure functions: it
// maps Fabric and EventBuilderRun resources onto the planner's types,
// finds failed units, and applies failover, rejoins and the failure
// policy. No client calls: the reconcilers
// fetch, call these, and write.
package runplan

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderpod"
	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/planner"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// Nodes says, for every node in the cluster, whether it can run pods:
// Ready, not being deleted and not cordoned. A node missing from the map
// does not exist.
type Nodes map[string]bool

// NodeStates summarises a node list.
func NodeStates(list []corev1.Node) Nodes {
	nodes := make(Nodes, len(list))
	for i := range list {
		n := &list[i]
		nodes[n.Name] = n.DeletionTimestamp.IsZero() && NodeReady(n) && !n.Spec.Unschedulable
	}
	return nodes
}

// CordonedNodes are the nodes marked unschedulable (kubectl cordon, and
// drain before it evicts): the units on them move to spares before the
// drain may evict their pods (Draining), and no unit or spare goes there.
func CordonedNodes(list []corev1.Node) map[string]bool {
	out := map[string]bool{}
	for i := range list {
		if list[i].Spec.Unschedulable {
			out[list[i].Name] = true
		}
	}
	return out
}

// NodeReady is the node's Ready condition.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeHealth says, for failure detection, which nodes still count as up at
// now: Ready ones, and ones whose Ready condition has been False for less
// than grace (a kubelet blip, or a short network partition, must not move
// units). A node being deleted, with Ready Unknown (the node lifecycle
// controller lost it) or no Ready condition fails at once; a missing node
// is absent. wait is the shortest time left until a node in its grace
// period would fail (0 if none is): the reconcile looks again then.
func NodeHealth(list []corev1.Node, now time.Time, grace time.Duration) (nodes Nodes, wait time.Duration) {
	nodes = make(Nodes, len(list))
	for i := range list {
		n := &list[i]
		up := false
		if n.DeletionTimestamp.IsZero() {
			for _, c := range n.Status.Conditions {
				if c.Type != corev1.NodeReady {
					continue
				}
				switch c.Status {
				case corev1.ConditionTrue:
					up = true
				case corev1.ConditionFalse:
					if left := c.LastTransitionTime.Add(grace).Sub(now); left > 0 {
						up = true
						if wait == 0 || left < wait {
							wait = left
						}
					}
				}
			}
		}
		nodes[n.Name] = up
	}
	return nodes, wait
}

// Fabric maps a Fabric's spec onto the planner's fabric; an endpoint is
// schedulable when its node exists and is Ready and its leaf is not listed
// unavailable.
func Fabric(spec *ebv1.FabricSpec, nodes Nodes) planner.Fabric {
	f := planner.Fabric{
		Leaves: int(spec.Leaves), Spines: int(spec.Spines), PortsPerLeaf: int(spec.PortsPerLeaf),
		LinksPerPair: int(spec.LinksPerPair), Routing: planner.Routing(spec.Routing),
		Endpoints: make([]planner.Endpoint, len(spec.Endpoints)),
	}
	for i, e := range spec.Endpoints {
		f.Endpoints[i] = planner.Endpoint{
			Name: e.Name, Node: e.Node, NUMA: int(e.NUMA), RDMADevice: e.RDMADevice, Netdev: e.Netdev,
			Leaf: int(e.Leaf), Port: int(e.Port), Streams: e.Streams,
			Schedulable: nodes[e.Node] && !slices.Contains(spec.UnavailableLeaves, e.Leaf),
		}
	}
	return f
}

// Endpoints indexes a fabric's endpoints by name (planner.Fabric.ByName).
func Endpoints(f planner.Fabric) map[string]planner.Endpoint { return f.ByName() }

// FabricStatus is the status of fabric given the cluster's nodes: the
// planner's checks the schema cannot make (Valid), and which endpoints'
// nodes are missing or not Ready (NodesReady) rather than dropped silently.
func FabricStatus(fabric *ebv1.Fabric, nodes Nodes, cordoned map[string]bool) ebv1.FabricStatus {
	st := ebv1.FabricStatus{
		ObservedGeneration: fabric.Generation,
		Conditions:         slices.Clone(fabric.Status.Conditions),
		Endpoints:          int32(len(fabric.Spec.Endpoints)),
	}
	for _, e := range fabric.Spec.Endpoints {
		ready, known := nodes[e.Node]
		switch {
		case slices.Contains(fabric.Spec.UnavailableLeaves, e.Leaf):
			st.Unschedulable = append(st.Unschedulable, ebv1.UnschedulableEndpoint{Name: e.Name, Node: e.Node, Reason: ebv1.EndpointLeafUnavailable})
		case !known:
			st.Unschedulable = append(st.Unschedulable, ebv1.UnschedulableEndpoint{Name: e.Name, Node: e.Node, Reason: ebv1.EndpointNodeNotFound})
		case cordoned[e.Node]:
			st.Unschedulable = append(st.Unschedulable, ebv1.UnschedulableEndpoint{Name: e.Name, Node: e.Node, Reason: ebv1.EndpointNodeCordoned})
		case !ready:
			st.Unschedulable = append(st.Unschedulable, ebv1.UnschedulableEndpoint{Name: e.Name, Node: e.Node, Reason: ebv1.EndpointNodeNotReady})
		default:
			st.SchedulableEndpoints++
		}
	}

	valid := metav1.Condition{Type: ebv1.FabricValid, Status: metav1.ConditionTrue, Reason: ebv1.ReasonFabricValid,
		Message: fmt.Sprintf("%d endpoints on %d leaves of %d ports", st.Endpoints, fabric.Spec.Leaves, fabric.Spec.PortsPerLeaf), ObservedGeneration: fabric.Generation}
	if err := Fabric(&fabric.Spec, nodes).Validate(); err != nil {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, ebv1.ReasonFabricInvalid, "spec."+strings.ReplaceAll(err.Error(), "\n", "; spec.")
	}
	meta.SetStatusCondition(&st.Conditions, valid)

	nodesReady := metav1.Condition{Type: ebv1.FabricNodesReady, Status: metav1.ConditionTrue, Reason: ebv1.ReasonAllNodesReady,
		Message: fmt.Sprintf("all %d endpoints' nodes are Ready", st.Endpoints), ObservedGeneration: fabric.Generation}
	if n := len(st.Unschedulable); n > 0 {
		listed := shortlist.Join(st.Unschedulable, ", ", func(u ebv1.UnschedulableEndpoint) string {
			return fmt.Sprintf("%s (node %s: %s)", u.Name, u.Node, u.Reason)
		})
		nodesReady.Status, nodesReady.Reason = metav1.ConditionFalse, ebv1.ReasonNodesUnavailable
		nodesReady.Message = fmt.Sprintf("%d of %d endpoints cannot run units: %s", n, st.Endpoints, listed)
	}
	meta.SetStatusCondition(&st.Conditions, nodesReady)
	return st
}

// Request is what a run asks of the planner.
func Request(spec *ebv1.EventBuilderRunSpec) planner.Request {
	return planner.Request{Units: int(spec.Units), Spares: int(spec.Spares), Layout: planner.Layout(spec.Layout)}
}

// RequestKey identifies what a table was planned for; a run whose key
// differs from its published table's is replanned at the next epoch.
func RequestKey(spec *ebv1.EventBuilderRunSpec) string {
	fabric := ""
	if spec.FabricRef != nil {
		fabric = spec.FabricRef.Name
	}
	return fmt.Sprintf("fabric=%s,units=%d,spares=%d,layout=%s", fabric, spec.Units, spec.Spares, spec.Layout)
}

// Plan makes a fresh table for the run at epoch prevEpoch+1: from the
// fabric when it has one (fabric non-nil), else every rank live: Folded,
// unit u on rank u (RU+BU); Unfolded, as the planner splits live ranks,
// unit u's RU on rank u and its BU on rank units+u.
func Plan(spec *ebv1.EventBuilderRunSpec, fabric *planner.Fabric, prevEpoch int64) (planner.RankTable, error) {
	var t planner.RankTable
	if fabric == nil {
		units := int(spec.Units)
		t = planner.RankTable{Layout: planner.Folded, Ranks: make([]planner.Rank, units)}
		if spec.Layout == ebv1.LayoutUnfolded {
			t = planner.RankTable{Layout: planner.Unfolded, Ranks: make([]planner.Rank, 2*units)}
		}
		for i := range t.Ranks {
			f := planner.RUBU
			switch {
			case t.Layout == planner.Folded:
			case i < units:
				f = planner.RU
			default:
				f = planner.BU
			}
			t.Ranks[i] = planner.Rank{Rank: i, Port: i, Role: planner.Live, Unit: planner.UnitID(i % units), Function: f}
		}
	} else {
		var err error
		if t, err = planner.Plan(*fabric, Request(spec)); err != nil {
			return planner.RankTable{}, err
		}
	}
	t.Epoch = prevEpoch + 1
	return t, nil
}

// Failure is a live rank whose unit has failed, or must move (Planned).
type Failure struct {
	Rank   int
	Reason string
	// Planned: the unit still runs, but its node is going away (Draining).
	// With no spare to move to it stays where it is (Recovery.Held)
	// rather than leave the run short of a unit.
	Planned bool
	// BUOnly: only the unit's BU moves (planner.MoveBU); its RU reads on
	// where it is (OutputStalls).
	BUOnly bool
}

// Draining finds the live ranks of t whose endpoint's node is cordoned,
// except those in failed (already failing for another reason): planned
// moves, in rank order. A planned move is a clean switch: the units that
// stay carry the set's place in the event stream to the spares that join.
// So it never moves every unit that still builds at once: the last of them
// waits for the next table (after this one's switch), when the units it
// joins carry that place on. A set of one unit has no one to carry it: that
// unit moves, and its spare goes on from the table's resumeEvent.
func Draining(t planner.RankTable, endpoints map[string]planner.Endpoint, cordoned map[string]bool, failed []Failure) []Failure {
	return plannedMoves(t, failed, ebv1.EndpointNodeCordoned, func(r planner.Rank) bool {
		ep, ok := endpoints[r.Endpoint]
		return ok && cordoned[ep.Node]
	})
}

// plannedMoves are the live ranks of t that moves picks, except those in
// failed, as planned moves for reason, in rank order; never every unit
// that still builds at once (Draining says why).
func plannedMoves(t planner.RankTable, failed []Failure, reason string, moves func(planner.Rank) bool) []Failure {
	var out []Failure
	staying := 0
	for _, r := range t.Ranks {
		if r.Role != planner.Live || slices.ContainsFunc(failed, func(f Failure) bool { return f.Rank == r.Rank }) {
			continue
		}
		if !moves(r) {
			staying++
			continue
		}
		out = append(out, Failure{Rank: r.Rank, Reason: reason, Planned: true})
	}
	if staying == 0 && len(out) > 1 {
		out = out[:len(out)-1]
	}
	return out
}

// Switched says whether every live rank of t runs t's epoch, as the
// builders last reported (units: the run's status.units): the set
// switched to the table, nothing pending.
func Switched(t planner.RankTable, units []ebv1.UnitStatus) bool {
	for _, r := range t.Ranks {
		if r.Role != planner.Live {
			continue
		}
		i := slices.IndexFunc(units, func(u ebv1.UnitStatus) bool { return u.Rank == int32(r.Rank) })
		if i < 0 || units[i].Epoch != t.Epoch || units[i].PendingEpoch != 0 {
			return false
		}
	}
	return true
}

// SwitchPending says whether the set may still be switching to t, the
// table the last failover published: less than holdFor ago, and not every
// live unit runs it yet.
func SwitchPending(t planner.RankTable, last *ebv1.FailoverStatus, units []ebv1.UnitStatus, now time.Time,
	holdFor time.Duration) bool {
	return last != nil && last.Epoch == t.Epoch && now.Sub(last.CompletedTime.Time) < holdFor && !Switched(t, units)
}

// HeldForSwitch are the ranks a planned move of t's epoch took out (last:
// the run's last failover) whose pods stay until the set switched to t: up
// to then they build with it, and the switch at a cycle boundary loses no
// event. Past holdFor after the move they go anyway, so that a set that
// does not switch cannot hold a drain for good.
func HeldForSwitch(t planner.RankTable, last *ebv1.FailoverStatus, units []ebv1.UnitStatus, now time.Time,
	holdFor time.Duration) map[int32]bool {
	if !SwitchPending(t, last, units, now, holdFor) {
		return nil
	}
	held := map[int32]bool{}
	for _, m := range last.Moves {
		if m.Reason == ebv1.EndpointNodeCordoned && m.SpareRank != nil {
			held[m.FailedRank] = true
		}
	}
	return held
}

// ReasonPeerLost is the failure reason of a unit its peers report lost.
const ReasonPeerLost = "PeerLost"

// Failures finds the live ranks of t whose unit failed: its endpoint's
// node is gone or not Ready, its pod failed (evicted, or refused by the
// kubelet's admission, e.g. TopologyAffinityError when the Topology
// Manager cannot align the unit on its NUMA node), or its peers report it
// lost (LostPeers; reports are the builders' last answers, nil when not
// polled). A missing pod is not a failure: it is recreated in place. Nor
// is a pod left from an earlier table: one being deleted, or one on
// another endpoint than the rank's (the rank's unit moved, its new pod is
// not created yet). nodes is NodeHealth's view: a node NotReady for less
// than the grace period is up.
func Failures(t planner.RankTable, endpoints map[string]planner.Endpoint, nodes Nodes, pods map[int32]*corev1.Pod,
	reports map[int32]builderapi.Report) []Failure {
	lost := LostPeers(t, reports)
	var out []Failure
	for _, r := range t.Ranks {
		if r.Role != planner.Live || r.Endpoint == "" {
			continue // without a fabric there is no spare: a pod is recreated in place, a lost unit rejoins (Rejoins)
		}
		ready, known := nodes[endpoints[r.Endpoint].Node]
		pod := pods[int32(r.Rank)]
		switch {
		case !known:
			out = append(out, Failure{Rank: r.Rank, Reason: ebv1.EndpointNodeNotFound})
		case !ready:
			out = append(out, Failure{Rank: r.Rank, Reason: ebv1.EndpointNodeNotReady})
		case pod != nil && pod.Status.Phase == corev1.PodFailed &&
			pod.DeletionTimestamp.IsZero() && pod.Labels[builderpod.LabelEndpoint] == r.Endpoint:
			out = append(out, Failure{Rank: r.Rank, Reason: podFailureReason(pod)})
		case lost[r.Rank]:
			out = append(out, Failure{Rank: r.Rank, Reason: ReasonPeerLost})
		}
	}
	return out
}

// currentReport is rank's report when it speaks of t: of its epoch, from a
// builder past its start.
func currentReport(t planner.RankTable, reports map[int32]builderapi.Report, rank int32) (builderapi.Report, bool) {
	rep, ok := reports[rank]
	return rep, ok && rep.Epoch == t.Epoch && rep.State != builderapi.StateNotReady
}

// ReasonUnreachable is the failure reason of a unit whose builder answered
// none of the operator's polls for a while, which no majority of its peers
// reports up: its server may be gone with every peer that could report it.
const ReasonUnreachable = "Unreachable"

// MinUnreachablePolls is how many polls in a row a builder must leave
// unanswered before Unreachable fails its unit: never on one missed poll.
const MinUnreachablePolls = 2

// Unreachable finds the live ranks of t whose builder has answered no poll
// for at least after (and MinUnreachablePolls polls in a row, silences as
// Silences keeps them), unless a majority of its peers reports it up
// (UpPeers: only the operator's path to it is down). after 0 finds none.
func Unreachable(t planner.RankTable, silences map[int32]builderstatus.Silence, now time.Time, after time.Duration,
	up map[int]bool) []Failure {
	var out []Failure
	for _, r := range t.Ranks {
		if r.Role == planner.Live && silentFor(silences, r.Rank, now, after) && !up[r.Rank] {
			out = append(out, Failure{Rank: r.Rank, Reason: ReasonUnreachable})
		}
	}
	return out
}

// LostPeers finds the live ranks of t that their peers report lost: rank X
// is lost when a strict majority of the live builders (other than X) that
// answered while running t's epoch list X in lost_peers. Reports of other
// epochs do not count: a builder's list is of its epoch's peers, and a
// new epoch resets it. The majority keeps one builder that lost its own
// network, and so reports every peer lost, from failing them all; its
// peers report it, and it is the one that fails. About a unit that still
// answers the operator, the majority is of all its live peers, not only of
// those that answered: with half the set gone (a stopped server), one
// survivor that timed another out while its sends to the dead stalled is
// no majority.
func LostPeers(t planner.RankTable, reports map[int32]builderapi.Report) map[int]bool {
	return byMajority(t, reports, func(rep builderapi.Report) []int32 { return rep.LostPeers }, true)
}

// UpPeers finds the live ranks of t that their peers report up (peers[].state),
// by the same majority as LostPeers: the set builds with them. A rank
// joining at the epoch is neither lost nor up while it connects.
func UpPeers(t planner.RankTable, reports map[int32]builderapi.Report) map[int]bool {
	return byMajority(t, reports, func(rep builderapi.Report) []int32 {
		var up []int32
		for _, p := range rep.Peers {
			if p.State == builderapi.PeerUp {
				up = append(up, p.Rank)
			}
		}
		return up
	}, false)
}

// byMajority finds the live ranks X of t that a strict majority of the
// live builders (other than X) that answered while running t's epoch name
// in names(report); with wholeSet, about an X that answered too, a strict
// majority of all of X's live peers in t.
func byMajority(t planner.RankTable, reports map[int32]builderapi.Report, names func(builderapi.Report) []int32,
	wholeSet bool) map[int]bool {
	current := func(rank int32) (builderapi.Report, bool) { return currentReport(t, reports, rank) }
	reporters, live := 0, 0
	votes := map[int]int{}
	for _, r := range t.Ranks {
		if r.Role != planner.Live {
			continue
		}
		live++
		rep, ok := current(int32(r.Rank))
		if !ok {
			continue
		}
		reporters++
		for _, x := range names(rep) {
			if x != int32(r.Rank) {
				votes[int(x)]++
			}
		}
	}
	named := map[int]bool{}
	for x, n := range votes {
		if x < 0 || x >= len(t.Ranks) || t.Ranks[x].Role != planner.Live {
			continue
		}
		others := reporters
		_, answered := current(int32(x))
		if answered {
			others-- // X's own report is no vote about X
			if wholeSet {
				others = live - 1
			}
		}
		if 2*n > others {
			named[x] = true
		}
	}
	return named
}

// FailedSpares finds the spare ranks of t whose pod failed on the spare's
// endpoint (refused by the kubelet's admission, or evicted), or that the
// scheduler cannot place there (its node short of a resource: a device
// plugin down), by endpoint, with the reason: such a spare cannot take a
// unit over. Its pod is kept (so the reason stays visible) until someone
// deletes it, or, unschedulable, until the node can take it, or, refused
// for a reason that passes, until RetryAdmission.
func FailedSpares(t planner.RankTable, pods map[int32]*corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, r := range t.Ranks {
		pod := pods[int32(r.Rank)]
		if r.Role != planner.Spare || pod == nil || !pod.DeletionTimestamp.IsZero() || pod.Labels[builderpod.LabelEndpoint] != r.Endpoint {
			continue
		}
		switch {
		case pod.Status.Phase == corev1.PodFailed:
			out[r.Endpoint] = podFailureReason(pod)
		case isUnschedulable(pod):
			out[r.Endpoint] = corev1.PodReasonUnschedulable
		}
	}
	return out
}

// SilentSpares are the spare ranks of t whose builder, heard before, has
// answered none of the operator's polls for at least after (and
// MinUnreachablePolls polls in a row), by endpoint, with why: its server
// lost, or back with its pods refused while their status still says
// Running. Such a spare cannot take a unit over (the unit would fail
// again at once, Unreachable, and be dropped). A builder still starting
// is not silent (builderstatus.Silences). after 0 finds none.
func SilentSpares(t planner.RankTable, silences map[int32]builderstatus.Silence, now time.Time, after time.Duration) map[string]string {
	out := map[string]string{}
	for _, r := range t.Ranks {
		if r.Role == planner.Spare && silentFor(silences, r.Rank, now, after) {
			out[r.Endpoint] = fmt.Sprintf("builder not answering for %s", now.Sub(silences[int32(r.Rank)].Since).Round(100*time.Millisecond))
		}
	}
	return out
}

// silentFor says whether rank's builder has answered no poll for at least
// after, MinUnreachablePolls polls in a row or more; never when after <= 0.
func silentFor(silences map[int32]builderstatus.Silence, rank int, now time.Time, after time.Duration) bool {
	s, silent := silences[int32(rank)]
	return after > 0 && silent && s.Polls >= MinUnreachablePolls && now.Sub(s.Since) >= after
}

// ColdSpares are the spare ranks of t whose pod is not Ready on the
// spare's endpoint (none yet, pending, failed, or one of an older table),
// by endpoint, with why. A unit restored onto a spare (planner.Restore)
// waits for a warm one: unlike a failover, nothing is gained by taking a
// spare whose builder may never start. In a table with no live rank left
// (every unit failed with no spare left) a spare with its pod counts as
// warm, Ready or not: no builder or readout driver takes a table in which
// no rank runs an RU, so none would ever turn Ready, and there is no
// running set for a slow one to hold up.
func ColdSpares(t planner.RankTable, pods map[int32]*corev1.Pod) map[string]string {
	noneLive := t.Count(planner.Live) == 0
	out := map[string]string{}
	for _, r := range t.Ranks {
		if r.Role != planner.Spare {
			continue
		}
		switch pod := pods[int32(r.Rank)]; {
		case pod == nil || pod.Labels[builderpod.LabelEndpoint] != r.Endpoint || !pod.DeletionTimestamp.IsZero():
			out[r.Endpoint] = "no pod yet"
		case !PodReady(pod) && !noneLive:
			out[r.Endpoint] = "pod not Ready"
		}
	}
	return out
}

// PodReady says whether pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// AdmissionRetryAfter is how long a pod refused at admission for a reason
// that passes (UnexpectedAdmissionError: a node restarted re-admits its
// pods before its device plugins register again) is kept, showing why,
// before it is made again: at most one new pod per spare that often.
const AdmissionRetryAfter = 30 * time.Second

// RetryAdmission says whether pod, failed, is to be made again: refused at
// admission for a reason that passes, and older than AdmissionRetryAfter.
// Other failures (TopologyAffinityError, an eviction) are kept until
// someone deletes the pod: trying again would fail again.
func RetryAdmission(pod *corev1.Pod, now time.Time) bool {
	return pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == "UnexpectedAdmissionError" &&
		now.Sub(pod.CreationTimestamp.Time) >= AdmissionRetryAfter
}

// podFailureReason is why a pod failed (Evicted, TopologyAffinityError,
// ...), or PodFailed when the kubelet gave no reason.
func podFailureReason(pod *corev1.Pod) string {
	if pod.Status.Reason != "" {
		return pod.Status.Reason
	}
	return "PodFailed"
}

// WithoutEndpoints returns f with the named endpoints unschedulable: the
// planner then neither plans on them nor fails units over to them.
func WithoutEndpoints(f planner.Fabric, names map[string]string) planner.Fabric {
	if len(names) == 0 {
		return f
	}
	f.Endpoints = slices.Clone(f.Endpoints)
	for i := range f.Endpoints {
		if _, ok := names[f.Endpoints[i].Name]; ok {
			f.Endpoints[i].Schedulable = false
		}
	}
	return f
}

// Recovery is the table after failures were handled, and what was done.
type Recovery struct {
	Table   planner.RankTable
	Moves   []ebv1.UnitMove
	Outcome string // an ebv1.Outcome*
	// Held are the planned moves that found no spare: those units stay.
	Held []ebv1.UnitMove
}

// Recover moves every failed unit to a warm spare (planner.Failover; its
// BU alone for a BUOnly failure, planner.MoveBU). A
// unit with no usable spare left loses its rank (it becomes a dummy) and
// the run runs degraded or stops, by policy; a planned move with no spare
// is held instead. All moves land in one new table, at the epoch after
// t's; with no move (every one held) there is no new table (len(Moves) 0).
func Recover(fabric planner.Fabric, t planner.RankTable, failures []Failure, policy ebv1.FailurePolicy) (Recovery, error) {
	rec := Recovery{Table: t, Outcome: ebv1.OutcomeMovedToSpare}
	for _, f := range failures {
		failed := rec.Table.Ranks[f.Rank]
		record := ebv1.UnitMove{Unit: int32(failed.Unit), FailedRank: int32(f.Rank), FailedEndpoint: failed.Endpoint, Reason: f.Reason}
		move := planner.Failover
		if f.BUOnly {
			move, record.Function = planner.MoveBU, string(planner.BU)
		}
		next, res, err := move(fabric, rec.Table, f.Rank)
		noSpare := errors.Is(err, planner.ErrNoSpare) || errors.Is(err, planner.ErrSpareWouldConflict)
		switch {
		case err == nil:
			rec.Table = next
			record.SpareRank, record.SpareEndpoint = ptrTo(int32(res.SpareRank)), res.SpareEndpoint
		case noSpare && f.Planned:
			record.NoSpare = planner.NoSpareReason(err)
			rec.Held = append(rec.Held, record)
			continue
		case noSpare:
			record.NoSpare = planner.NoSpareReason(err)
			if rec.Table, err = planner.DropUnit(fabric, rec.Table, f.Rank); err != nil {
				return Recovery{}, err
			}
			rec.Outcome = ebv1.OutcomeDegraded
			if policy == ebv1.FailureStop {
				rec.Outcome = ebv1.OutcomeStopped
			}
		default:
			return Recovery{}, err
		}
		rec.Moves = append(rec.Moves, record)
	}
	rec.Table.Epoch = t.Epoch + 1
	return rec, nil
}

// Ranks is the rank table as the run's status shows it.
func Ranks(t planner.RankTable, endpoints map[string]planner.Endpoint) []ebv1.RankStatus {
	out := make([]ebv1.RankStatus, len(t.Ranks))
	for i, r := range t.Ranks {
		out[i] = ebv1.RankStatus{Rank: int32(r.Rank), Role: ebv1.RankRole(r.Role), Endpoint: r.Endpoint, Node: endpoints[r.Endpoint].Node}
		if r.Role == planner.Live {
			out[i].Unit = ptrTo(int32(r.Unit))
		}
	}
	return out
}

// LiveUnits counts the units that build their share: RU+BU (Folded), both
// RU and BU (Unfolded), or, in a Folded table, a BU alone (a partly
// unfolded unit on an endpoint without fibres: its events miss no share,
// only the sources nobody reads, which ReadoutComplete names). A unit that
// lost its RU or its BU with no spare left is not building its share.
func LiveUnits(t planner.RankTable) int32 {
	ru, bu := map[planner.UnitID]bool{}, map[planner.UnitID]bool{}
	for _, r := range t.Ranks {
		if r.Role == planner.Live {
			ru[r.Unit] = ru[r.Unit] || r.Function != planner.BU
			bu[r.Unit] = bu[r.Unit] || r.Function != planner.RU
		}
	}
	var n int32
	for unit, builds := range bu {
		if builds && (ru[unit] || t.Layout == planner.Folded) {
			n++
		}
	}
	return n
}

// SparesLeft counts the spares whose endpoint can still take a unit over:
// schedulable (its node Ready, its pod not failed).
func SparesLeft(t planner.RankTable, endpoints map[string]planner.Endpoint) int32 {
	var n int32
	for _, r := range t.Ranks {
		if r.Role == planner.Spare && endpoints[r.Endpoint].Schedulable {
			n++
		}
	}
	return n
}

// NodesBackSince are the nodes whose Ready condition turned True after
// since (a failover): servers that were lost and came back. Transition
// times have whole seconds, so a node back within since's own second is
// not taken for one that came back (nor is a node that turned Ready
// then, just before the failover).
func NodesBackSince(list []corev1.Node, since time.Time) map[string]bool {
	back := map[string]bool{}
	for i := range list {
		for _, c := range list[i].Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && c.LastTransitionTime.Time.After(since) {
				back[list[i].Name] = true
			}
		}
	}
	return back
}

// Uncordoned are the nodes that the last failover (fo) moved units off
// because they were cordoned, and that are not cordoned any more: drained
// servers put back into service, whose endpoints may be spares again.
func Uncordoned(fo *ebv1.FailoverStatus, endpoints map[string]planner.Endpoint, cordoned map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, m := range fo.Moves {
		if ep, ok := endpoints[m.FailedEndpoint]; ok && m.Reason == ebv1.EndpointNodeCordoned && !cordoned[ep.Node] {
			out[ep.Node] = true
		}
	}
	return out
}

// Replenish makes dummy ranks warm spares again where the endpoint cabled
// to their switch port is on a node in back (a server that came back
// after the run's last failover), schedulable (Ready, its spare pod not
// failed) and runs no other rank, lowest rank first, until the table
// holds `spares` usable spares (spec.spares). An endpoint whose node never
// went away (a unit failed there for its pod or its process) is in back
// only once it rested (Rested): it may fail the same way. It returns the table at the
// next epoch and the endpoints made spares; the table unchanged and none
// when there is nothing to do.
func Replenish(f planner.Fabric, t planner.RankTable, spares int32, back map[string]bool) (planner.RankTable, []string) {
	endpoints := Endpoints(f)
	missing := spares - SparesLeft(t, endpoints)
	if missing <= 0 || len(back) == 0 {
		return t, nil
	}
	type port struct{ leaf, port int }
	cabled := map[port]planner.Endpoint{}
	for _, ep := range f.Endpoints {
		cabled[port{ep.Leaf, ep.Port}] = ep
	}
	used := map[string]bool{}
	for _, r := range t.Ranks {
		used[r.Endpoint] = r.Endpoint != ""
	}
	next := t
	next.Ranks = slices.Clone(t.Ranks)
	var added []string
	for i, r := range next.Ranks {
		ep, ok := cabled[port{r.Leaf, r.Port}]
		if missing == 0 || r.Role != planner.Dummy || !ok || !ep.Schedulable || !back[ep.Node] || used[ep.Name] {
			continue
		}
		next.Ranks[i].Role, next.Ranks[i].Endpoint = planner.Spare, ep.Name
		used[ep.Name] = true
		added = append(added, ep.Name)
		missing--
	}
	if len(added) == 0 {
		return t, nil
	}
	next.Epoch = t.Epoch + 1
	return next, added
}

// Summary says what a recovery did, for events and logs; it names a few
// moves (shortlist).
func (r Recovery) Summary() string {
	return shortlist.Join(r.Moves, "; ", func(m ebv1.UnitMove) string {
		to := "no spare left"
		switch {
		case m.NoSpare != "":
			to = m.NoSpare
		case m.SpareRank != nil && m.Function == string(planner.BU):
			to = "its BU moved to spare " + m.SpareEndpoint + " (rank " + strconv.Itoa(int(*m.SpareRank)) + "), its RU reads on"
		case m.SpareRank != nil:
			to = "moved to spare " + m.SpareEndpoint + " (rank " + strconv.Itoa(int(*m.SpareRank)) + ")"
		case r.Outcome == ebv1.OutcomeRejoined:
			to = "its builder answers again and rejoins on its rank"
		}
		on := ""
		if m.FailedEndpoint != "" {
			on = " (" + m.FailedEndpoint + ")"
		}
		return fmt.Sprintf("unit %d on rank %d%s failed: %s; %s", m.Unit, m.FailedRank, on, m.Reason, to)
	})
}

func ptrTo[T any](v T) *T { return &v }

// ResumeEvent is where a set that starts afresh under a table published
// now goes on (the table's resumeEvent): past every event the run's units
// may have built. Each unit's last reported next event is pushed on by
// what the run's last rate could have built since that event was seen to
// move (a unit silent since is counted from then), plus resumeSlack for
// the switch itself; the time is capped at resumeHorizon, so that a stale
// status cannot send the set far beyond its data. 0 before any report.
// An estimate: a lost unit that built faster than the run's rate may have
// built past it.
func ResumeEvent(st ebv1.EventBuilderRunStatus, now time.Time) int64 {
	var resume int64
	for _, u := range st.Units {
		if u.NextEvent == 0 {
			continue
		}
		since := resumeSlack
		if u.ProgressTime != nil {
			since += max(now.Sub(u.ProgressTime.Time), 0)
		}
		since = min(since, resumeHorizon)
		resume = max(resume, u.NextEvent+int64(math.Ceil(float64(st.EventRate)*since.Seconds())))
	}
	return resume
}

// resumeSlack and resumeHorizon bound ResumeEvent's estimate of the events
// built since the last report.
const (
	resumeSlack   = 2 * time.Second
	resumeHorizon = time.Minute
)
