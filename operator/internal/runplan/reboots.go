package runplan

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/planner"
)

// Endpoints vacated by a failure (their unit moved to a spare or was
// dropped) are offered as spares again once their server is back. A
// server may come back faster than the node controller marks its node
// NotReady (its lease outlives a quick reboot, a hang, a network blip):
// its Ready condition never changes, and NodesBackSince cannot see it. A
// rebooted one reports a new boot ID (status.nodeInfo.bootID): Rebooted.
// One whose unit failed for its pod or process, or that hung and woke up,
// reports nothing new: after a rest (Rested) its endpoints are offered
// again all the same; a spare must be warm (its pod Ready) before a unit
// is restored onto it, and one that fails again when used is failed over
// again, and rests longer (VacancyRest).

// Vacancy is what is kept of a vacated endpoint: the boot ID its node
// reported, and when, as it was first found vacated; how many times in a
// row it was; and, once offered again, when (kept for a while, so that an
// endpoint that fails again soon rests longer).
type Vacancy struct {
	BootID string    `json:"bootID,omitempty"`
	Since  time.Time `json:"since"`
	// Times: the vacancies in a row, each within the longest rest of the
	// offer before it; 1 (or 0, in an older record) for the first.
	Times int `json:"times,omitempty"`
	// Offered: when it was found offered again (a spare, or live); nil
	// while it is vacated.
	Offered *time.Time `json:"offered,omitempty"`
}

// VacancyRest is how long a vacated endpoint rests, its node Ready, before
// it is offered again: First after its first vacancy, twice as long after
// each vacancy in a row, at most Max. An endpoint that held for Max since
// its offer starts again at First. A zero First never offers one again.
type VacancyRest struct {
	First time.Duration
	Max   time.Duration
}

// For is the rest after times vacancies in a row; 0 when First is 0
// (never).
func (r VacancyRest) For(times int) time.Duration {
	d := r.First
	for i := 1; i < times && d < r.Max; i++ {
		d *= 2
	}
	return min(d, max(r.Max, r.First))
}

// Vacancies is the record of the vacated endpoints of t (planner.Vacated)
// at now: kept from prev while vacated, taken from boots (by node) for one
// newly vacated, counted as one more in a row if it was offered again
// less than rest.Max ago. An endpoint offered again since prev (a spare,
// or live) keeps its record, with when, for rest.Max.
func Vacancies(f planner.Fabric, t planner.RankTable, boots map[string]string, prev map[string]Vacancy, now time.Time, rest VacancyRest) map[string]Vacancy {
	out := map[string]Vacancy{}
	recent := func(v Vacancy) bool { return v.Offered != nil && now.Sub(*v.Offered) < rest.Max }
	for _, ep := range planner.Vacated(f, t) {
		v, ok := prev[ep.Name]
		switch {
		case ok && v.Offered == nil:
			out[ep.Name] = v
		case ok && recent(v):
			out[ep.Name] = Vacancy{BootID: boots[ep.Node], Since: now, Times: max(v.Times, 1) + 1}
		default:
			out[ep.Name] = Vacancy{BootID: boots[ep.Node], Since: now, Times: 1}
		}
	}
	for name, v := range prev {
		if _, vacated := out[name]; vacated {
			continue
		}
		if v.Offered == nil {
			v.Offered = &now
		}
		if recent(v) {
			out[name] = v
		}
	}
	return out
}

// Rebooted are the nodes of f that are Ready in nodes and report another
// boot ID than the one recorded for one of their vacated endpoints:
// servers restarted since their units failed away.
func Rebooted(f planner.Fabric, vacancies map[string]Vacancy, nodes []corev1.Node) map[string]bool {
	now := map[string]string{}
	for i := range nodes {
		if NodeReady(&nodes[i]) {
			now[nodes[i].Name] = nodes[i].Status.NodeInfo.BootID
		}
	}
	out := map[string]bool{}
	for _, ep := range f.Endpoints {
		if v, ok := vacancies[ep.Name]; ok && v.Offered == nil && v.BootID != "" && now[ep.Node] != "" && now[ep.Node] != v.BootID {
			out[ep.Node] = true
		}
	}
	return out
}

// Rested are the nodes of f that are Ready in nodes and have an endpoint
// vacated for at least its rest at now: rest.For its vacancies in a row
// on a server where a builder of the run answered the last poll (heard:
// alive, so its endpoint failed for its own pod or process), the longest
// rest on one where none did (it may be dead though its node still reads
// Ready: the node controller takes tens of seconds to see that, and a
// spare there would never start). None when rest.First is 0 (never).
func Rested(f planner.Fabric, vacancies map[string]Vacancy, nodes []corev1.Node, heard map[string]bool, now time.Time, rest VacancyRest) map[string]bool {
	out := map[string]bool{}
	if rest.First <= 0 {
		return out
	}
	ready := map[string]bool{}
	for i := range nodes {
		ready[nodes[i].Name] = NodeReady(&nodes[i])
	}
	for _, ep := range f.Endpoints {
		v, ok := vacancies[ep.Name]
		if !ok || v.Offered != nil || !ready[ep.Node] {
			continue
		}
		wait := max(rest.Max, rest.First)
		if heard[ep.Node] {
			wait = rest.For(v.Times)
		}
		if now.Sub(v.Since) >= wait {
			out[ep.Node] = true
		}
	}
	return out
}

// Heard are the nodes where a builder of the run (pods by rank) answered
// the poll whose reports are given: servers alive at that poll.
func Heard(pods map[int32]*corev1.Pod, reports map[int32]builderapi.Report) map[string]bool {
	out := map[string]bool{}
	for rank := range reports {
		if pod := pods[rank]; pod != nil && pod.Spec.NodeName != "" {
			out[pod.Spec.NodeName] = true
		}
	}
	return out
}

// BootIDs are the boot IDs the nodes report, by node.
func BootIDs(nodes []corev1.Node) map[string]string {
	out := map[string]string{}
	for i := range nodes {
		if id := nodes[i].Status.NodeInfo.BootID; id != "" {
			out[nodes[i].Name] = id
		}
	}
	return out
}
