package planner

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

// dropped fails the given live ranks of a plan of req on f in turn, each
// onto a spare while one is left and dropped once none is (as the
// operator does under RunDegraded), then offers the endpoints back as
// spares on their own ranks (as a server that came back is).
func dropped(t *testing.T, f Fabric, req Request, failed []int, back ...string) RankTable {
	t.Helper()
	table := mustPlan(t, f, req)
	for _, rank := range failed {
		next, _, err := Failover(f, table, rank)
		if errors.Is(err, ErrNoSpare) {
			next, err = DropUnit(f, table, rank)
		}
		if err != nil {
			t.Fatalf("failing rank %d: %v", rank, err)
		}
		table = next
	}
	for _, name := range back {
		for i, ep := range f.Endpoints {
			if ep.Name == name {
				table.Ranks[i].Role, table.Ranks[i].Endpoint = Spare, name // fig8: endpoint i on rank i
			}
		}
	}
	return table
}

func TestRestore(t *testing.T) {
	// Fig. 8, 6 units and 2 spares: roles LSLSLLLL. Ranks 0 and 2 fail
	// onto spares 3 and 1; rank 4 (unit 2) finds none and is dropped;
	// rank 6 (unit 4) too, where it fails as well.
	folded := Request{Units: 6, Spares: 2}
	// Unfolded, 3 units, same spares: RUs on ranks 0, 2, 4, BUs on 5, 6, 7.
	unfolded := Request{Units: 3, Spares: 2, Layout: Unfolded}
	bare := fig8()
	bare.Endpoints = slices.Clone(bare.Endpoints)
	bare.Endpoints[0].Streams = nil // t0 comes back without fibres
	tests := []struct {
		name     string
		fabric   Fabric
		table    RankTable
		restored []UnitID
		onto     []string
		function []Function
		streams  []string // of the first restored rank
		roles    string
	}{
		{name: "a dropped unit onto the server that came back", fabric: fig8(),
			table: dropped(t, fig8(), folded, []int{0, 2, 4}, "t0"), restored: []UnitID{2}, onto: []string{"t0"},
			function: []Function{RUBU}, streams: []string{"st0"}, roles: "LLDLDLLL"},
		{name: "two dropped, one spare back: the lowest unit", fabric: fig8(),
			table: dropped(t, fig8(), folded, []int{0, 2, 4, 6}, "t4"), restored: []UnitID{2}, onto: []string{"t4"},
			function: []Function{RUBU}, streams: []string{"st4"}, roles: "DLDLLLDL"},
		{name: "two dropped, two back: both, lowest spare first", fabric: fig8(),
			table: dropped(t, fig8(), folded, []int{0, 2, 4, 6}, "t4", "t0"), restored: []UnitID{2, 4}, onto: []string{"t0", "t4"},
			function: []Function{RUBU, RUBU}, streams: []string{"st0"}, roles: "LLDLLLDL"},
		{name: "a spare without fibres runs the unit's BU", fabric: bare,
			table: dropped(t, bare, folded, []int{2, 0, 4}, "t0"), restored: []UnitID{2}, onto: []string{"t0"},
			function: []Function{BU}, roles: "LLDLDLLL"},
		{name: "no spare back: nothing", fabric: fig8(),
			table: dropped(t, fig8(), folded, []int{0, 2, 4}), roles: "DLDLDLLL"},
		{name: "a spare back but not schedulable: nothing", fabric: unschedulable(fig8(), "t0"),
			table: dropped(t, fig8(), folded, []int{0, 2, 4}, "t0"), roles: "SLDLDLLL"},
		{name: "unfolded: a dropped RU reads again, its BU no longer misses its source", fabric: fig8(),
			table: dropped(t, fig8(), unfolded, []int{0, 2, 4}, "t0"), restored: []UnitID{2}, onto: []string{"t0"},
			function: []Function{RU}, streams: []string{"st0"}, roles: "LLDLDLLL"},
		{name: "unfolded: a dropped BU onto any spare", fabric: fig8(),
			table: dropped(t, fig8(), unfolded, []int{0, 2, 7}, "t0"), restored: []UnitID{2}, onto: []string{"t0"},
			function: []Function{BU}, roles: "LLDLLLLD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			units := folded.Units
			if tc.table.Layout == Unfolded {
				units = unfolded.Units
			}
			kept := deepCopy(tc.table)
			after, done, err := Restore(tc.fabric, tc.table, units)
			if err != nil {
				t.Fatalf("Restore() error: %v", err)
			}
			if !reflect.DeepEqual(tc.table, kept) {
				t.Error("Restore changed its input table")
			}
			if got := roles(after); got != tc.roles {
				t.Errorf("roles %s, want %s", got, tc.roles)
			}
			var gotUnits, onto []string
			for _, d := range done {
				gotUnits, onto = append(gotUnits, string(rune('0'+d.Unit))), append(onto, d.SpareEndpoint)
				r := after.Ranks[d.SpareRank]
				if r.Role != Live || r.Unit != d.Unit || r.Endpoint != d.SpareEndpoint || d.Epoch != after.Epoch {
					t.Errorf("result %+v, but rank %d is %+v at epoch %d", d, d.SpareRank, r, after.Epoch)
				}
			}
			var want []string
			for _, u := range tc.restored {
				want = append(want, string(rune('0'+u)))
			}
			if !slices.Equal(gotUnits, want) || !slices.Equal(onto, tc.onto) {
				t.Fatalf("restored units %v onto %v, want %v onto %v", gotUnits, onto, want, tc.onto)
			}
			if !atOneEpochAfter(t, kept, after, done) {
				return
			}
			for i, d := range done {
				if got := after.Ranks[d.SpareRank].Function; got != tc.function[i] {
					t.Errorf("unit %d runs %s, want %s", d.Unit, got, tc.function[i])
				}
			}
			if first := after.Ranks[done[0].SpareRank]; !slices.Equal(first.Streams, tc.streams) || first.SourceUnread {
				t.Errorf("restored rank %d reads %v (source unread %t), want %v", first.Rank, first.Streams, first.SourceUnread, tc.streams)
			}
			for _, r := range after.Ranks {
				if r.SourceUnread {
					t.Errorf("rank %d (unit %d %s) still misses its source: every unit has its RU", r.Rank, r.Unit, r.Function)
				}
			}
			assertNoOverload(t, tc.fabric, after)
		})
	}
}

func TestRestoreRefusesAFabricThatDoesNotDescribeTheTable(t *testing.T) {
	table := dropped(t, fig8(), Request{Units: 6, Spares: 2}, []int{0, 2, 4}, "t0")
	f := fig8()
	f.Endpoints = f.Endpoints[1:] // t0 no longer cabled
	if _, _, err := Restore(f, table, 6); err == nil {
		t.Fatal("Restore on a Fabric without the spare's endpoint: no error")
	}
}

// A unit dropped because the only spare left was its failed endpoint's
// sibling is not put there by Restore either: that server is suspect until
// the failed half is back (a spare again).
func TestRestoreKeepsOffAServerThatLostAHalf(t *testing.T) {
	f := servers(4, 1, 2) // one leaf: s0's halves live (ranks 0, 1), s1's spares (2, 3)
	table := mustPlan(t, f, Request{Units: 2, Spares: 2})
	table, res, err := Failover(f, table, 0)
	if err != nil || res.SpareRank != 2 {
		t.Fatalf("rank 0 fails: onto rank %d, %v; want rank 2", res.SpareRank, err)
	}
	if _, _, err := Failover(f, table, 2); !errors.Is(err, ErrNoSpare) {
		t.Fatalf("rank 2 (s1-numa0) fails with only its sibling left: %v, want ErrNoSpare", err)
	}
	if table, err = DropUnit(f, table, 2); err != nil {
		t.Fatal(err)
	}
	after, done, err := Restore(f, table, 2)
	if err != nil || len(done) != 0 || roles(after) != "DLDS" {
		t.Fatalf("Restore onto the failed half's sibling: %v, %v, roles %s; want nothing (DLDS)", done, err, roles(after))
	}
	// s1-numa0 is back: a spare again, s1 is whole.
	table.Ranks[2].Role, table.Ranks[2].Endpoint = Spare, "s1-numa0"
	after, done, err = Restore(f, table, 2)
	if err != nil || len(done) != 1 || done[0].Unit != 0 || done[0].SpareEndpoint != "s1-numa0" || roles(after) != "DLLS" {
		t.Fatalf("Restore once s1 is whole: %+v, %v, roles %s; want unit 0 on s1-numa0 (DLLS)", done, err, roles(after))
	}
}

// atOneEpochAfter checks what Restore or Rehome returned for table kept:
// with nothing done, kept itself; else one table at the epoch after
// kept's for every move. It says whether anything was done.
func atOneEpochAfter(t *testing.T, kept, after RankTable, done []FailoverResult) bool {
	t.Helper()
	if len(done) == 0 {
		if !reflect.DeepEqual(after, kept) {
			t.Errorf("nothing done, but the table changed: %+v", after)
		}
		return false
	}
	if after.Epoch != kept.Epoch+1 {
		t.Errorf("epoch %d, want %d (one epoch for every move)", after.Epoch, kept.Epoch+1)
	}
	return true
}
