package runplan

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/planner"
)

func TestReadout(t *testing.T) {
	// Two leaves of 4 ports: servers a and b read a stream per endpoint,
	// s (leaf 1) has no fibres: the spare.
	fabric := func(streams bool) *planner.Fabric {
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
	plan := func(f *planner.Fabric, units int) planner.RankTable {
		t.Helper()
		table, err := planner.Plan(*f, planner.Request{Units: units, Spares: 1})
		if err != nil {
			t.Fatal(err)
		}
		return table
	}
	withStreams := fabric(true)
	all := plan(withStreams, 4)
	failedRank, _ := all.RankOf("b-numa0")
	failedOver, _, err := planner.Failover(*withStreams, all, failedRank)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		fabric   *planner.Fabric
		table    planner.RankTable
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
				"every MEP misses the source of rank ", "so its events are dropped (spec.builder.incompleteEvents Drop"}},
		{name: "the same under Flag: the events are delivered flagged", fabric: withStreams, table: failedOver, policy: ebv1.IncompleteFlag,
			want:     metav1.ConditionFalse,
			saying:   []string{"2 of 8"},
			degraded: []string{"every MEP holds the source of rank ", "as missing fragments, and its events are delivered flagged incomplete"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, degraded, ok := Readout(tc.fabric, tc.table, tc.policy, 3)
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
