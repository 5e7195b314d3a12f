package shiftview

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// failoverAction is the action of the operator's Events about failovers
// (Failover, UnitRejoined, FailoverConfigured, DrainHeld).
const failoverAction = "Failover"

// Failovers is the run's failover history, oldest first: the operator's
// Failover Events about it (as long as the API server keeps them, an hour
// by default), then the last failover as its status records it, which
// outlives them.
func Failovers(run *ebv1.EventBuilderRun, events []eventsv1.Event, now time.Time) string {
	var out strings.Builder
	mine := make([]eventsv1.Event, 0, len(events))
	for _, e := range events {
		if e.Action == failoverAction && e.Regarding.UID == run.UID {
			mine = append(mine, e)
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return eventTime(mine[i]).Before(eventTime(mine[j])) })
	if len(mine) == 0 {
		out.WriteString("No failover Events (the API server keeps them an hour by default).\n")
	} else {
		w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "AGO\tTYPE\tREASON\tWHAT")
		for _, e := range mine {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", since(eventTime(e), now), e.Type, e.Reason, e.Note)
		}
		_ = w.Flush()
	}
	out.WriteString(LastFailover(run, now))
	return out.String()
}

// LastFailover is the last failover as the run's status records it.
func LastFailover(run *ebv1.EventBuilderRun, now time.Time) string {
	if run.Status.LastFailover == nil {
		return "No failover recorded in the run's status.\n"
	}
	return failover("Last failover", run.Status.LastFailover, now)
}

// Timeline is the failovers an operator saw, oldest first (the console's
// history of the status's last failover), or the status's last one when it
// saw none (it started since).
func Timeline(seen []ebv1.FailoverStatus, run *ebv1.EventBuilderRun, now time.Time) string {
	if len(seen) == 0 {
		return LastFailover(run, now)
	}
	var out strings.Builder
	for i := range seen {
		out.WriteString(failover(fmt.Sprintf("Failover %d of %d", i+1, len(seen)), &seen[i], now))
	}
	return out.String()
}

func eventTime(e eventsv1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	if e.DeprecatedLastTimestamp.Time.After(e.DeprecatedFirstTimestamp.Time) {
		return e.DeprecatedLastTimestamp.Time
	}
	return e.DeprecatedFirstTimestamp.Time
}

// Why says what keeps the run from building at full strength: nothing,
// or its conditions that ask for attention and its pods that do not run,
// with the scheduler's or the kubelet's reason.
func Why(run *ebv1.EventBuilderRun, pods []corev1.Pod) string {
	var out strings.Builder
	var problems []string
	for _, c := range failingFirst(run.Status.Conditions) {
		if problem(c) {
			problems = append(problems, fmt.Sprintf("%s is %s (%s): %s", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	var stuck []string
	pods = append([]corev1.Pod(nil), pods...)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	for _, p := range pods {
		if why := podTrouble(p); why != "" {
			stuck = append(stuck, p.Name+": "+why)
		}
	}
	if run.Status.Phase == ebv1.PhaseRunning && len(problems) == 0 && len(stuck) == 0 {
		return fmt.Sprintf("Run %s/%s is Running with every unit building; nothing to fix.\n", run.Namespace, run.Name)
	}
	phase := string(run.Status.Phase)
	if phase == "" {
		phase = "not observed by the operator yet (is it running? kubectl -n <operator namespace> get pods)"
	}
	fmt.Fprintf(&out, "Run %s/%s is %s.\n", run.Namespace, run.Name, phase)
	for _, p := range problems {
		out.WriteString("- " + p + "\n")
	}
	for _, s := range stuck {
		out.WriteString("- pod " + s + "\n")
	}
	return out.String()
}

// podTrouble is why a pod does not run its builder, or "".
func podTrouble(p corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "being deleted"
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			return fmt.Sprintf("not scheduled (%s): %s", c.Reason, c.Message)
		}
	}
	for _, s := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := s.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" {
			return fmt.Sprintf("container %s waiting (%s): %s", s.Name, w.Reason, w.Message)
		}
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("container %s exited %d (%s): %s", s.Name, t.ExitCode, t.Reason, t.Message)
		}
	}
	switch p.Status.Phase {
	case corev1.PodRunning, corev1.PodSucceeded:
		return ""
	case "":
		return "no status yet (no kubelet has taken it)"
	default:
		return fmt.Sprintf("phase %s: %s", p.Status.Phase, p.Status.Message)
	}
}

// Fabric is the fabric as a text map, leaf by leaf and port by port: each
// endpoint's server, NUMA node and fibres, the run and rank on it, and the
// endpoints the scheduler cannot use.
func Fabric(fabric *ebv1.Fabric, runs []ebv1.EventBuilderRun) string {
	type holder struct{ run, rank, role, state string }
	on := map[string]holder{}
	for _, r := range runs {
		if r.Spec.FabricRef == nil || r.Spec.FabricRef.Name != fabric.Name {
			continue
		}
		for _, rank := range r.Status.Ranks {
			if rank.Endpoint != "" {
				on[rank.Endpoint] = holder{r.Namespace + "/" + r.Name, fmt.Sprint(rank.Rank), string(rank.Role), rank.State}
			}
		}
	}
	unusable := map[string]string{}
	for _, u := range fabric.Status.Unschedulable {
		unusable[u.Name] = u.Reason
	}
	var out strings.Builder
	s := fabric.Spec
	fmt.Fprintf(&out, "Fabric %s: leaves %d, spines %d, ports per leaf %d; endpoints %d, schedulable %d\n", fabric.Name,
		s.Leaves, s.Spines, s.PortsPerLeaf, len(s.Endpoints), fabric.Status.SchedulableEndpoints)
	endpoints := append([]ebv1.FabricEndpoint(nil), s.Endpoints...)
	sort.Slice(endpoints, func(i, j int) bool {
		if endpoints[i].Leaf != endpoints[j].Leaf {
			return endpoints[i].Leaf < endpoints[j].Leaf
		}
		return endpoints[i].Port < endpoints[j].Port
	})
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "LEAF\tPORT\tENDPOINT\tNODE\tNUMA\tFIBRES\tRUN\tRANK\tROLE\tSTATE")
	leaf := int32(-1)
	for _, e := range endpoints {
		leafText := ""
		if e.Leaf != leaf {
			leaf, leafText = e.Leaf, fmt.Sprint(e.Leaf)
		}
		h, taken := on[e.Name]
		if !taken {
			h = holder{"free", "-", "-", "-"}
		}
		if reason, ok := unusable[e.Name]; ok {
			h.state = "unschedulable: " + reason
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", leafText, e.Port, e.Name, e.Node, e.NUMA,
			orDash(strings.Join(e.Streams, ",")), h.run, h.rank, h.role, orDash(h.state))
	}
	_ = w.Flush()
	return out.String()
}
