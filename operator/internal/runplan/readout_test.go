package runplan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/planner"
)

func TestReadout(t *testing.T) {
	fabric := readoutFabric
	plan := func(f *planner.Fabric, units int) planner.RankTable { return planOn(t, f, units, 1) }
	withStreams := fabric(true)
	all := plan(withStreams, 4)
	failedOver := failOver(t, withStreams, all, "b-numa0")
	// Every server reads fibres, the spare (b-numa1) too: the unit reads
	// the spare's there, and every event lacks the failed endpoint's.
	spareReads := readoutFabric(true)
	for i := range spareReads.Endpoints {
		spareReads.Endpoints[i].Streams = []string{spareReads.Endpoints[i].Name + "-mfp0", spareReads.Endpoints[i].Name + "-mfp1"}
	}
	ontoReadingSpare := failOver(t, spareReads, plan(spareReads, 4), "a-numa0")
	// b comes back after the failover: b-numa0 is a spare again, its
	// streams no more read than before (the table lists them unread still).
	backAsSpare, added := Replenish(*withStreams, failedOver, 1, map[string]bool{"b": true})
	if !slices.Equal(added, []string{"b-numa0"}) {
		t.Fatalf("replenished %v, want b-numa0 a spare again", added)
	}
	for _, tc := range []struct {
		name     string
		fabric   *planner.Fabric
		table    planner.RankTable
		lost     []string               // the table's unreadStreams, if not LostStreams(fabric, table, nil, nil)
		want     metav1.ConditionStatus // "" for no condition
		saying   []string
		policy   ebv1.IncompletePolicy
		degraded []string // none for not degraded
	}{
		{name: "no fabric: no condition", table: all},
		{name: "no streams listed: no condition", fabric: fabric(false), table: plan(fabric(false), 4)},
		{name: "every stream read", fabric: withStreams, table: all, want: metav1.ConditionTrue, saying: []string{"all 8 readout streams"}},
		{name: "fewer units than readout endpoints: the spare's unread, not degraded", fabric: withStreams, table: plan(withStreams, 3),
			want: metav1.ConditionFalse, saying: []string{"2 of 8 readout streams", "endpoint b-numa1 (node b, streams b-numa1-mfp0,b-numa1-mfp1): held as a warm spare"}},
		{name: "a failover leaves the failed endpoint's streams unread: degraded", fabric: withStreams, table: failedOver,
			want:   metav1.ConditionFalse,
			saying: []string{"2 of 8", "endpoint b-numa0 (node b, streams b-numa0-mfp0,b-numa0-mfp1): no rank runs it: its unit moved to a spare", "re-cable the fibres"},
			degraded: []string{"since a failure: endpoint b-numa0 (node b, streams b-numa0-mfp0,b-numa0-mfp1): no rank runs it",
				"; every event lacks streams b-numa0-mfp0, b-numa0-mfp1 (the rank table's unreadStreams) and every MEP misses the source of rank 5 (unit 2), " +
					"so every event is dropped (spec.builder.incompleteEvents Drop; Flag delivers them marked incomplete); "}},
		{name: "the same under Flag: the events are delivered flagged", fabric: withStreams, table: failedOver, policy: ebv1.IncompleteFlag,
			want:   metav1.ConditionFalse,
			saying: []string{"2 of 8"},
			degraded: []string{"; every event lacks streams b-numa0-mfp0, b-numa0-mfp1 (the rank table's unreadStreams) and every MEP holds the source of rank 5 (unit 2) " +
				"as missing fragments, so every event is delivered flagged incomplete (spec.builder.incompleteEvents Flag); "}},
		{name: "onto a spare with fibres: no source unread, the streams still lost", fabric: spareReads, table: ontoReadingSpare,
			want: metav1.ConditionFalse,
			saying: []string{"4 of 12", "endpoint a-numa0 (node a, streams a-numa0-mfp0,a-numa0-mfp1): no rank runs it",
				"endpoint b-numa0 (node b, streams b-numa0-mfp0,b-numa0-mfp1): idle"},
			degraded: []string{"since a failure: endpoint a-numa0 (node a, streams a-numa0-mfp0,a-numa0-mfp1): no rank runs it: its unit moved to a spare or, with none left, was dropped (a failure or a drain); " +
				"every event lacks streams a-numa0-mfp0, a-numa0-mfp1 (the rank table's unreadStreams), " +
				"so every event is dropped (spec.builder.incompleteEvents Drop; Flag delivers them marked incomplete); "}},
		{name: "the same under Flag", fabric: spareReads, table: ontoReadingSpare, policy: ebv1.IncompleteFlag,
			want: metav1.ConditionFalse,
			degraded: []string{"; every event lacks streams a-numa0-mfp0, a-numa0-mfp1 (the rank table's unreadStreams), " +
				"so every event is delivered flagged incomplete (spec.builder.incompleteEvents Flag); "}},
		{name: "the failed server back as a spare: its streams lost still", fabric: withStreams, table: backAsSpare,
			lost: []string{"b-numa0-mfp0", "b-numa0-mfp1"}, want: metav1.ConditionFalse,
			saying: []string{"2 of 8", "endpoint b-numa0 (node b, streams b-numa0-mfp0,b-numa0-mfp1): held as a warm spare"},
			degraded: []string{"since a failure: endpoint b-numa0 (node b, streams b-numa0-mfp0,b-numa0-mfp1): held as a warm spare (rank 2); " +
				"every event lacks streams b-numa0-mfp0, b-numa0-mfp1 (the rank table's unreadStreams) and every MEP misses the source of rank 5 (unit 2), so every event is dropped"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost := tc.lost
			if lost == nil {
				lost = LostStreams(tc.fabric, tc.table, nil, nil)
			}
			c, degraded, ok := Readout(tc.fabric, tc.table, lost, tc.policy, 3)
			if tc.want == "" {
				if ok {
					t.Fatalf("condition %+v, want none", c)
				}
				return
			}
			if !ok || c.Type != ebv1.ConditionReadoutComplete || c.Status != tc.want || c.ObservedGeneration != 3 {
				t.Fatalf("condition %+v (ok %v), want ReadoutComplete %s", c, ok, tc.want)
			}
			for _, s := range tc.saying {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q does not say %q", c.Message, s)
				}
			}
			if (len(tc.degraded) == 0) != (degraded == "") {
				t.Errorf("degraded %q, want it to say %q", degraded, tc.degraded)
			}
			for _, s := range tc.degraded {
				if !strings.Contains(degraded, s) {
					t.Errorf("degraded %q does not say %q", degraded, s)
				}
			}
		})
	}
}

// readoutFabric is two leaves of 4 ports: servers a and b on leaf 0, s
// on leaf 1. With streams, a's and b's endpoints read two each and s has
// no fibres (where a run keeps its spare).
func readoutFabric(streams bool) *planner.Fabric {
	f := &planner.Fabric{Leaves: 2, Spines: 2, PortsPerLeaf: 4, LinksPerPair: 2}
	for i, node := range []string{"a", "a", "b", "b", "s", "s"} {
		ep := planner.Endpoint{Name: fmt.Sprintf("%s-numa%d", node, i%2), Node: node, NUMA: i % 2, Leaf: i / 4, Port: i % 4, Schedulable: true}
		if streams && node != "s" {
			ep.Streams = []string{ep.Name + "-mfp0", ep.Name + "-mfp1"}
		}
		f.Endpoints = append(f.Endpoints, ep)
	}
	return f
}

// planOn plans units and spares on f.
func planOn(t *testing.T, f *planner.Fabric, units, spares int) planner.RankTable {
	t.Helper()
	table, err := planner.Plan(*f, planner.Request{Units: units, Spares: spares})
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// failOver fails the unit on endpoint over to a spare.
func failOver(t *testing.T, f *planner.Fabric, table planner.RankTable, endpoint string) planner.RankTable {
	t.Helper()
	rank, ok := table.RankOf(endpoint)
	if !ok {
		t.Fatalf("no rank runs %s", endpoint)
	}
	next, _, err := planner.Failover(*f, table, rank)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// LostStreams is the rank table's unreadStreams: the streams a failure
// left unread, not those the plan leaves unread.
func TestLostStreams(t *testing.T) {
	f := readoutFabric(true)
	all := planOn(t, f, 4, 1)
	failed := failOver(t, f, all, "b-numa0")
	twice := failOver(t, f, failOver(t, f, planOn(t, f, 4, 2), "b-numa0"), "a-numa1")
	// b comes back: b-numa0 a spare again; then a-numa0 fails onto it,
	// whose unit reads b-numa0's streams there.
	back, _ := Replenish(*f, failed, 1, map[string]bool{"b": true})
	ontoBack := failOver(t, f, back, "a-numa0")
	down := *f
	down.Endpoints = slices.Clone(f.Endpoints)
	down.Endpoints[2].Schedulable = false // b-numa0's node, NotReady
	// 2 units: b-numa0 idle, b-numa1 the spare; then b NotReady.
	two := planOn(t, f, 2, 1)
	idleDown := *f
	idleDown.Endpoints = slices.Clone(f.Endpoints)
	for i, ep := range idleDown.Endpoints {
		if ep.Node == "b" {
			idleDown.Endpoints[i].Schedulable = false
		}
	}
	// Every server reads fibres, the spare (b-numa1) too: a-numa0's unit
	// fails over onto b-numa1, a guest there; then the guest fails, onto
	// a-numa0 back as a spare (home), or with no spare left (dropped).
	fibred := readoutFabric(true)
	for i := range fibred.Endpoints {
		fibred.Endpoints[i].Streams = []string{fibred.Endpoints[i].Name + "-mfp0"}
	}
	guest := failOver(t, fibred, planOn(t, fibred, 4, 1), "a-numa0")
	aBack, _ := Replenish(*fibred, guest, 1, map[string]bool{"a": true})
	guestHome := failOver(t, fibred, aBack, "b-numa1")
	guestRank, _ := guest.RankOf("b-numa1")
	guestDropped, err := planner.DropUnit(*fibred, guest, guestRank)
	if err != nil {
		t.Fatal(err)
	}
	// A Fabric edited since the table was planned: a-numa0's fibre is
	// listed on the failed endpoint too, and still read where it was.
	edited := *f
	edited.Endpoints = slices.Clone(f.Endpoints)
	edited.Endpoints[2].Streams = []string{"b-numa0-mfp0", "a-numa0-mfp0"}
	edited.Endpoints[0].Streams = []string{"a-numa0-mfp1"}
	for _, tc := range []struct {
		name   string
		fabric *planner.Fabric
		table  planner.RankTable
		prev   *planner.RankTable
		before []string
		want   []string
	}{
		{name: "no fabric", table: failed},
		{name: "every stream read", fabric: f, table: all},
		{name: "fewer units: the spare's and the idle endpoints' unread by plan", fabric: f, table: two},
		{name: "the idle endpoint's and the spare's node NotReady: still unread by plan", fabric: &idleDown, table: two},
		{name: "unfolded: the BU-only endpoints' unread by plan", fabric: f, table: func() planner.RankTable {
			table, err := planner.Plan(*f, planner.Request{Units: 2, Layout: planner.Unfolded})
			if err != nil {
				t.Fatal(err)
			}
			return table
		}()},
		{name: "a failover", fabric: f, table: failed, want: []string{"b-numa0-mfp0", "b-numa0-mfp1"}},
		{name: "the failed node NotReady", fabric: &down, table: failed, want: []string{"b-numa0-mfp0", "b-numa0-mfp1"}},
		{name: "two failovers, in the Fabric's endpoint order", fabric: f, table: twice,
			want: []string{"a-numa1-mfp0", "a-numa1-mfp1", "b-numa0-mfp0", "b-numa0-mfp1"}},
		{name: "a stream a rank still reads is not listed", fabric: &edited, table: failed, want: []string{"b-numa0-mfp0"}},
		{name: "the failed server back as a spare: lost still", fabric: f, table: back, before: []string{"b-numa0-mfp0", "b-numa0-mfp1"},
			want: []string{"b-numa0-mfp0", "b-numa0-mfp1"}},
		{name: "the same, the table alone: the home of the unit that left it", fabric: f, table: back,
			want: []string{"b-numa0-mfp0", "b-numa0-mfp1"}},
		{name: "a failover, after the table it follows", fabric: f, table: failed, prev: &all, want: []string{"b-numa0-mfp0", "b-numa0-mfp1"}},
		{name: "a unit away from home", fabric: fibred, table: guest, prev: ptrTo(planOn(t, fibred, 4, 1)), want: []string{"a-numa0-mfp0"}},
		{name: "the guest fails over onto its home: every planned stream read, the visited spare's take nothing",
			fabric: fibred, table: guestHome, prev: &aBack, before: []string{"a-numa0-mfp0"}},
		{name: "the guest dropped: its home's lost still, the visited spare's not", fabric: fibred, table: guestDropped, prev: &guest,
			before: []string{"a-numa0-mfp0"}, want: []string{"a-numa0-mfp0"}},
		{name: "the guest dropped, judged without the table it follows: the visited spare's too", fabric: fibred, table: guestDropped,
			before: []string{"a-numa0-mfp0"}, want: []string{"a-numa0-mfp0", "b-numa1-mfp0"}},
		{name: "a unit moved onto it reads them again", fabric: f, table: ontoBack, before: []string{"b-numa0-mfp0", "b-numa0-mfp1"},
			want: []string{"a-numa0-mfp0", "a-numa0-mfp1"}},
		{name: "before without a fabric", table: back, before: []string{"b-numa0-mfp0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LostStreams(tc.fabric, tc.table, tc.prev, tc.before); !slices.Equal(got, tc.want) {
				t.Errorf("lost streams %q, want %q", got, tc.want)
			}
		})
	}
}
