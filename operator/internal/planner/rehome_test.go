package planner

import (
	"reflect"
	"slices"
	"testing"
)

// withoutStreams is f with the named endpoints' fibres removed.
func withoutStreams(f Fabric, names ...string) Fabric {
	f.Endpoints = slices.Clone(f.Endpoints)
	for i, ep := range f.Endpoints {
		if slices.Contains(names, ep.Name) || len(names) == 0 {
			f.Endpoints[i].Streams = nil
		}
	}
	return f
}

func TestAFailoverRecordsWhereTheUnitsReadoutIs(t *testing.T) {
	folded := Request{Units: 6, Spares: 2} // fig8: LSLSLLLL
	table := mustPlan(t, fig8(), folded)
	once, res, err := Failover(fig8(), table, 0)
	if err != nil || res.SpareRank != 3 {
		t.Fatalf("rank 0 fails: onto rank %d, %v; want rank 3", res.SpareRank, err)
	}
	if got := once.Ranks[3].Home; got != "t0" {
		t.Errorf("unit 0 on rank 3 has home %q, want t0, where its streams end", got)
	}
	twice, res, err := Failover(fig8(), once, 3)
	if err != nil || res.SpareRank != 1 {
		t.Fatalf("rank 3 fails: onto rank %d, %v; want rank 1", res.SpareRank, err)
	}
	if got := twice.Ranks[1].Home; got != "t0" {
		t.Errorf("unit 0 moved twice, on rank 1, has home %q, want still t0", got)
	}
	// t0 is back as a spare when rank 3 fails: the unit fails over onto
	// its own endpoint, and is home.
	back := deepCopy(once)
	back.Ranks[0].Role, back.Ranks[0].Endpoint = Spare, "t0"
	home, res, err := Failover(fig8(), back, 3)
	if err != nil || res.SpareRank != 0 {
		t.Fatalf("rank 3 fails with t0 a spare again: onto rank %d, %v; want rank 0", res.SpareRank, err)
	}
	if got := home.Ranks[0].Home; got != "" {
		t.Errorf("unit 0 failed over onto its own endpoint, home %q, want none", got)
	}
	noStreams := withoutStreams(fig8())
	plain, _, err := Failover(noStreams, mustPlan(t, noStreams, folded), 0)
	if err != nil || plain.Ranks[3].Home != "" {
		t.Errorf("a unit that read no streams moved: home %q (%v), want none", plain.Ranks[3].Home, err)
	}
	dropped, err := DropUnit(fig8(), once, 3)
	if err != nil || slices.ContainsFunc(dropped.Ranks, func(r Rank) bool { return r.Home != "" }) {
		t.Errorf("unit 0 dropped: %v, ranks %+v, want no rank with a home", err, dropped.Ranks)
	}
}

func TestRehome(t *testing.T) {
	folded := Request{Units: 6, Spares: 2}                     // fig8: LSLSLLLL
	unfolded := Request{Units: 3, Spares: 2, Layout: Unfolded} // RUs on 0, 2, 4, BUs on 5, 6, 7
	bareSpares := withoutStreams(fig8(), "t1", "t3")
	tests := []struct {
		name     string
		fabric   Fabric
		table    RankTable
		left     []int // ranks the units leave, in order
		home     []int // their home ranks
		function Function
		roles    string
	}{
		{name: "a unit goes home once its endpoint is a spare again", fabric: fig8(),
			table: dropped(t, fig8(), folded, []int{0}, "t0"), left: []int{3}, home: []int{0}, function: RUBU, roles: "LSLSLLLL"},
		{name: "two units home in one table", fabric: fig8(),
			table: dropped(t, fig8(), folded, []int{0, 2}, "t0", "t2"), left: []int{1, 3}, home: []int{2, 0}, function: RUBU, roles: "LSLSLLLL"},
		{name: "a unit moved twice goes home from where it is", fabric: fig8(),
			table: dropped(t, fig8(), folded, []int{0, 3}, "t0"), left: []int{1}, home: []int{0}, function: RUBU, roles: "LSLDLLLL"},
		{name: "a unit that ran its BU alone on a spare without fibres reads again", fabric: bareSpares,
			table: dropped(t, bareSpares, folded, []int{0}, "t0"), left: []int{3}, home: []int{0}, function: RUBU, roles: "LSLSLLLL"},
		{name: "unfolded: an RU goes home", fabric: fig8(),
			table: dropped(t, fig8(), unfolded, []int{0}, "t0"), left: []int{3}, home: []int{0}, function: RU},
		{name: "its endpoint not back: nothing", fabric: fig8(),
			table: dropped(t, fig8(), folded, []int{0}), roles: "DSLLLLLL"},
		{name: "its endpoint back but not schedulable (its spare pod not Ready): nothing", fabric: unschedulable(fig8(), "t0"),
			table: dropped(t, fig8(), folded, []int{0}, "t0"), roles: "SSLLLLLL"},
		{name: "no unit moved: nothing", fabric: fig8(), table: mustPlan(t, fig8(), folded), roles: "LSLSLLLL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kept := deepCopy(tc.table)
			after, done, err := Rehome(tc.fabric, tc.table)
			if err != nil {
				t.Fatalf("Rehome() error: %v", err)
			}
			if !reflect.DeepEqual(tc.table, kept) {
				t.Error("Rehome changed its input table")
			}
			if tc.roles != "" {
				if got := roles(after); got != tc.roles {
					t.Errorf("roles %s, want %s", got, tc.roles)
				}
			}
			var left, home []int
			for _, d := range done {
				left, home = append(left, d.FailedRank), append(home, d.SpareRank)
			}
			if !slices.Equal(left, tc.left) || !slices.Equal(home, tc.home) {
				t.Fatalf("units left ranks %v for %v, want %v for %v (results %+v)", left, home, tc.left, tc.home, done)
			}
			if !atOneEpochAfter(t, kept, after, done) {
				return
			}
			for _, d := range done {
				r, from := after.Ranks[d.SpareRank], tc.table.Ranks[d.FailedRank]
				if r.Role != Live || r.Unit != from.Unit || r.Function != tc.function || r.Home != "" || r.SourceUnread ||
					r.Endpoint != from.Home || !slices.Equal(r.Streams, endpointNamed(tc.fabric, from.Home).Streams) || d.Epoch != after.Epoch {
					t.Errorf("unit %d home on rank %d: %+v (result %+v), want it live there as %s reading %v", from.Unit, d.SpareRank, r, d,
						tc.function, endpointNamed(tc.fabric, from.Home).Streams)
				}
				if l := after.Ranks[d.FailedRank]; l.Role != Spare || l.Endpoint != from.Endpoint || l.Unit != NoUnit || l.Home != "" || l.Streams != nil {
					t.Errorf("rank %d left: %+v, want a warm spare on %s", d.FailedRank, l, from.Endpoint)
				}
			}
			for _, u := range UnreadStreams(tc.fabric, after) {
				if slices.ContainsFunc(done, func(d FailoverResult) bool { return d.SpareEndpoint == u.Endpoint }) {
					t.Errorf("the streams of %s, home again, are unread: %+v", u.Endpoint, u)
				}
			}
			assertNoOverload(t, tc.fabric, after)
		})
	}
}

func TestRehomeRefusesAFabricThatDoesNotDescribeTheTable(t *testing.T) {
	table := dropped(t, fig8(), Request{Units: 6, Spares: 2}, []int{0}, "t0")
	f := fig8()
	f.Endpoints = f.Endpoints[1:] // t0 no longer cabled
	if _, _, err := Rehome(f, table); err == nil {
		t.Fatal("Rehome on a Fabric without the unit's home: no error")
	}
}

// endpointNamed is f's endpoint of that name.
func endpointNamed(f Fabric, name string) Endpoint {
	i := slices.IndexFunc(f.Endpoints, func(ep Endpoint) bool { return ep.Name == name })
	return f.Endpoints[i]
}
