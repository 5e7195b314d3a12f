package runplan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/planner"
)

func stallTable() planner.RankTable {
	return planner.RankTable{Layout: planner.Folded, Ranks: []planner.Rank{
		{Rank: 0, Role: planner.Live, Endpoint: "a", Function: planner.RUBU},
		{Rank: 1, Role: planner.Live, Endpoint: "b", Function: planner.RUBU},
		{Rank: 2, Role: planner.Live, Endpoint: "c", Function: planner.RU},
		{Rank: 3, Role: planner.Spare, Endpoint: "d"},
		{Rank: 4, Role: planner.Live, Endpoint: "e", Function: planner.BU},
		{Rank: 5, Role: planner.Live, Endpoint: "f", Function: planner.RUBU},
	}}
}

func stalled(seconds float64) builderapi.Report {
	return builderapi.Report{Activity: builderapi.ActivityBuilding, OutputStalledSeconds: seconds, MEPsDiscarded: int64(seconds)}
}

func TestOutputStallsAreBUMoves(t *testing.T) {
	reports := map[int32]builderapi.Report{
		0: stalled(0),
		1: stalled(61),
		2: stalled(500), // an RU alone: no output to stall
		3: stalled(500), // a spare: not a unit
		4: stalled(60),
		5: stalled(90), // failing already
	}
	paused := stalled(120)
	paused.Activity = builderapi.ActivityPaused
	reports[0] = paused // a paused set drops nothing
	got := OutputStalls(stallTable(), reports, time.Minute, []Failure{{Rank: 5, Reason: ReasonPeerLost}})
	want := []Failure{{Rank: 1, Reason: ebv1.ReasonOutputStalled, Planned: true, BUOnly: true},
		{Rank: 4, Reason: ebv1.ReasonOutputStalled, Planned: true, BUOnly: true}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("OutputStalls = %v, want %v", got, want)
	}
}

func TestOutputsFlowingNamesTheStalledBUsAndWhatFollows(t *testing.T) {
	if _, ok := OutputsFlowing(stallTable(), nil, time.Minute, ebv1.OutputStallReport, 1); ok {
		t.Errorf("no report: want no condition")
	}
	flowing := map[int32]builderapi.Report{0: stalled(0), 1: stalled(59), 2: stalled(500), 4: stalled(0)}
	c, ok := OutputsFlowing(stallTable(), flowing, time.Minute, ebv1.OutputStallReport, 1)
	if !ok || c.Status != metav1.ConditionTrue || c.Reason != ebv1.ReasonOutputsFlowing || !strings.Contains(c.Message, "3 live BUs") {
		t.Errorf("flowing: %+v, want True over the 3 BUs that reported", c)
	}
	flowing[1] = stalled(75)
	for policy, then := range map[ebv1.OutputStallPolicy]string{
		ebv1.OutputStallReport: "set it to MoveBU",
		ebv1.OutputStallMoveBU: "moves to a warm spare on another server (its RU reads on)",
	} {
		c, ok := OutputsFlowing(stallTable(), flowing, time.Minute, policy, 1)
		named := "rank 1 (endpoint b): no MEP taken for 75 s, 75 MEPs dropped here"
		if !ok || c.Status != metav1.ConditionFalse || c.Reason != ebv1.ReasonOutputStalled || !strings.Contains(c.Message, named) ||
			!strings.Contains(c.Message, "1 of 3 BUs") || !strings.Contains(c.Message, then) {
			t.Errorf("%s: %+v, want False naming %q and %q", policy, c, named, then)
		}
	}
}

// Recover moves a stalled BU alone; its RU reads on at the failed rank.
func TestRecoverMovesAStalledBUAlone(t *testing.T) {
	f := planner.Fabric{Leaves: 2, Spines: 2, PortsPerLeaf: 2, LinksPerPair: 1}
	for i, name := range []string{"s0-numa0", "s1-numa0", "s2-numa0", "s3-numa0"} {
		f.Endpoints = append(f.Endpoints, planner.Endpoint{Name: name, Node: strings.TrimSuffix(name, "-numa0"), Leaf: i / 2, Port: i % 2, Schedulable: true})
	}
	table, err := planner.Plan(f, planner.Request{Units: 3, Spares: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Recover(f, table, []Failure{{Rank: 0, Reason: ebv1.ReasonOutputStalled, Planned: true, BUOnly: true}}, ebv1.FailureRunDegraded)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Moves) != 1 || rec.Moves[0].Function != "BU" || rec.Moves[0].SpareRank == nil {
		t.Fatalf("moves %+v, want rank 0's BU moved to the spare", rec.Moves)
	}
	spare := int(*rec.Moves[0].SpareRank)
	if ru, bu := rec.Table.Ranks[0], rec.Table.Ranks[spare]; ru.Function != planner.RU || bu.Function != planner.BU || ru.Unit != bu.Unit {
		t.Errorf("after: rank 0 %+v, spare rank %d %+v; want the unit's RU and BU", ru, spare, bu)
	}
	if !strings.Contains(rec.Summary(), "its BU moved to spare") || LiveUnits(rec.Table) != 3 {
		t.Errorf("summary %q, live units %d; want the BU move said, 3 units", rec.Summary(), LiveUnits(rec.Table))
	}
}
