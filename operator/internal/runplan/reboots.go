package runplan

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"daq.io/eventbuilder/operator/internal/planner"
)

// Endpoints vacated by a failure (their unit moved to a spare or was
// dropped) are offered as spares again once their server is back. A
// server may come back faster than the node controller marks its node
// NotReady (its lease outlives a quick reboot, a hang, a network blip):
// its Ready condition never changes, and NodesBackSince cannot see it. A
// rebooted one reports a new boot ID (status.nodeInfo.bootID): Rebooted.
// One that hung and woke up reports nothing new: after a rest (Rested) its
// endpoints are offered again all the same; a spare must be warm (its
// pod Ready) before a unit is restored onto it, and one that fails again
// when used is failed over again.

// Vacancy is what is kept of a vacated endpoint: the boot ID its node
// reported, and when, as it was first found vacated.
type Vacancy struct {
	BootID string    `json:"bootID,omitempty"`
	Since  time.Time `json:"since"`
}

// Vacancies is the record of the vacated endpoints of t (planner.Vacated)
// at now: kept from prev, taken from boots (by node) for one newly
// vacated. Endpoints that are not vacated any more (spares again, or
// live) are left out.
func Vacancies(f planner.Fabric, t planner.RankTable, boots map[string]string, prev map[string]Vacancy, now time.Time) map[string]Vacancy {
	out := map[string]Vacancy{}
	for _, ep := range planner.Vacated(f, t) {
		if v, ok := prev[ep.Name]; ok {
			out[ep.Name] = v
		} else {
			out[ep.Name] = Vacancy{BootID: boots[ep.Node], Since: now}
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
		if v, ok := vacancies[ep.Name]; ok && v.BootID != "" && now[ep.Node] != "" && now[ep.Node] != v.BootID {
			out[ep.Node] = true
		}
	}
	return out
}

// Rested are the nodes of f that are Ready in nodes and have an endpoint
// vacated for at least after at now; none when after is 0 (never).
func Rested(f planner.Fabric, vacancies map[string]Vacancy, nodes []corev1.Node, now time.Time, after time.Duration) map[string]bool {
	out := map[string]bool{}
	if after <= 0 {
		return out
	}
	ready := map[string]bool{}
	for i := range nodes {
		ready[nodes[i].Name] = NodeReady(&nodes[i])
	}
	for _, ep := range f.Endpoints {
		if v, ok := vacancies[ep.Name]; ok && ready[ep.Node] && now.Sub(v.Since) >= after {
			out[ep.Node] = true
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
