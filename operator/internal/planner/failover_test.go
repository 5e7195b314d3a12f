package planner

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// deepCopy copies a table so a test can tell whether Failover changed it.
func deepCopy(t RankTable) RankTable {
	t.Ranks = slices.Clone(t.Ranks)
	for i := range t.Ranks {
		t.Ranks[i].Streams = slices.Clone(t.Ranks[i].Streams)
	}
	return t
}

func TestFailover(t *testing.T) {
	// Fig. 8 with 6 units and 2 spares: roles LSLSLLLL, spares t1 (rank
	// 1, leaf 0) and t3 (rank 3, leaf 1). Unfolded, 3 units: RUs on ranks
	// 0, 2 and 4, their BUs on 5, 6 and 7, the same spares.
	folded := Request{Units: 6, Spares: 2}
	unfolded := Request{Units: 3, Spares: 2, Layout: Unfolded}
	tests := []struct {
		name     string
		req      Request
		fabric   Fabric
		failed   int
		spare    int
		roles    string
		function Function
		reason   string
	}{
		{name: "spare on another leaf", req: folded, fabric: fig8(), failed: 0, spare: 3, roles: "DSLLLLLL", function: RUBU,
			reason: "spare t3 (rank 3) is the lowest-ranked one on another leaf (1) than the failed unit's (0); link check: 0 overloads in 8 phases"},
		{name: "spare on another leaf, from leaf 1", req: folded, fabric: fig8(), failed: 2, spare: 1, roles: "LLDSLLLL", function: RUBU,
			reason: "spare t1 (rank 1) is the lowest-ranked one on another leaf (0) than the failed unit's (1)"},
		{name: "both on other leaves: the lowest-ranked", req: folded, fabric: fig8(), failed: 6, spare: 1, roles: "LLLSLLDL", function: RUBU,
			reason: "spare t1 (rank 1) is the lowest-ranked one on another leaf (0) than the failed unit's (3)"},
		{name: "other-leaf spare no longer schedulable: the same leaf's", req: folded, fabric: unschedulable(fig8(), "t3"), failed: 0, spare: 1,
			roles: "DLLSLLLL", function: RUBU, reason: "no usable spare on another leaf than 0; spare t1 (rank 1) is on the failed unit's leaf"},
		{name: "unfolded: an RU's spare runs the RU", req: unfolded, fabric: fig8(), failed: 0, spare: 3, roles: "DSLLLLLL", function: RU,
			reason: "spare t3 (rank 3) is the lowest-ranked one on another leaf (1)"},
		{name: "unfolded: a BU's spare runs the BU", req: unfolded, fabric: fig8(), failed: 6, spare: 1, roles: "LLLSLLDL", function: BU,
			reason: "spare t1 (rank 1) is the lowest-ranked one on another leaf (0)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := mustPlan(t, fig8(), tc.req)
			kept := deepCopy(before)
			after, res, err := Failover(tc.fabric, before, tc.failed)
			if err != nil {
				t.Fatalf("Failover() error: %v", err)
			}
			if !reflect.DeepEqual(before, kept) {
				t.Error("Failover changed its input table")
			}
			if res.SpareRank != tc.spare || roles(after) != tc.roles || after.Ranks[tc.spare].Function != tc.function {
				t.Errorf("spare rank %d, roles %s, function %s; want %d, %s, %s", res.SpareRank, roles(after),
					after.Ranks[tc.spare].Function, tc.spare, tc.roles, tc.function)
			}
			if !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", res.Reason, tc.reason)
			}
			failed, spare := before.Ranks[tc.failed], before.Ranks[tc.spare]
			want := FailoverResult{
				FailedRank: tc.failed, FailedEndpoint: failed.Endpoint,
				SpareRank: tc.spare, SpareEndpoint: spare.Endpoint,
				Unit: failed.Unit, Function: failed.Function, Epoch: 2, Reason: res.Reason,
			}
			if res != want {
				t.Errorf("result %+v, want %+v", res, want)
			}
			if after.Epoch != 2 {
				t.Errorf("epoch %d, want 2", after.Epoch)
			}
			if r := after.Ranks[tc.failed]; r.Endpoint != "" || r.Unit != NoUnit || r.Function != "" || r.Streams != nil {
				t.Errorf("failed rank still carries %+v", r)
			}
			// Readout is physical: an RU on the spare reads the spare's
			// own streams; the failed endpoint's stay unread.
			var spareStreams []string
			if failed.Function != BU {
				spareStreams = []string{"s" + spare.Endpoint}
			}
			if r := after.Ranks[tc.spare]; r.Endpoint != spare.Endpoint || r.Unit != failed.Unit || r.Function != failed.Function || !slices.Equal(r.Streams, spareStreams) {
				t.Errorf("spare rank is %+v, want endpoint %s running unit %d with its streams %v", r, spare.Endpoint, failed.Unit, spareStreams)
			}
			assertNoOverload(t, tc.fabric, after)
		})
	}
}

func TestFailoverErrors(t *testing.T) {
	table := mustPlan(t, fig8(), Request{Units: 6, Spares: 2})
	tests := []struct {
		name   string
		fabric Fabric
		failed int
		is     error
		says   string
		reason string // NoSpareReason: what the run's lastFailover and event say
	}{
		{name: "rank out of range", fabric: fig8(), failed: 8, says: "not in the table (ranks 0..7)"},
		{name: "negative rank", fabric: fig8(), failed: -1, says: "not in the table"},
		{name: "a spare is not live", fabric: fig8(), failed: 1, says: "rank 1 is Spare, not live"},
		{name: "no schedulable spare", fabric: unschedulable(fig8(), "t1", "t3"), failed: 0, is: ErrNoSpare,
			says:   "rank 0 (t0) failed: no warm spare left (spares not schedulable: t1, t3)",
			reason: "no warm spare left (spares not schedulable: t1, t3)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Failover(tc.fabric, table, tc.failed)
			if err == nil || !strings.Contains(err.Error(), tc.says) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("Failover() = %v, want an error saying %q (is %v)", err, tc.says, tc.is)
			}
			if tc.reason != "" && NoSpareReason(err) != tc.reason {
				t.Errorf("NoSpareReason() = %q, want %q", NoSpareReason(err), tc.reason)
			}
		})
	}
}

func TestFailoverUntilNoSpareLeft(t *testing.T) {
	f := fig8()
	table := mustPlan(t, f, Request{Units: 6, Spares: 2})
	for _, failed := range []int{0, 2} {
		var err error
		if table, _, err = Failover(f, table, failed); err != nil {
			t.Fatalf("failing rank %d: %v", failed, err)
		}
	}
	if _, _, err := Failover(f, table, 4); !errors.Is(err, ErrNoSpare) {
		t.Fatalf("third failover: %v, want ErrNoSpare", err)
	}
}

// TestFailoverLinkCheck: 4 ports per leaf over 2 spines and one link is
// oversubscribed, so which spare goes live matters. Ranks 0 and 2 share
// spine 0, as do 4 and 6: with 0, 2, 4, 6 live, phase 4 sends two flows up
// and down spine 0 each way.
func TestFailoverLinkCheck(t *testing.T) {
	base := Fabric{Leaves: 2, Spines: 2, PortsPerLeaf: 4, LinksPerPair: 1}
	tests := []struct {
		name   string
		roles  string
		failed int
		spare  int
		is     error
		says   string
	}{
		{name: "passes over a spare that would overload a link", roles: "LLSS" + "LDLD", failed: 1, spare: 3,
			says: "passed over e2 (rank 2) would add 4 link overloads (phase 4: leaf 0 -> spine 0 carries 2 flows over 1 links)"},
		{name: "every spare would overload a link", roles: "LLSD" + "LDLD", failed: 1, is: ErrSpareWouldConflict,
			says: "e2 (rank 2) would add 4 link overloads"},
		// The table overloads 4 links already, and the move would overload
		// 4 others instead: as many overloads, but new ones.
		{name: "on an overloading table, a spare that moves the overloads to other links", roles: "LLLS" + "DLLL", failed: 0,
			is: ErrSpareWouldConflict, says: "e3 (rank 3) would add 4 link overloads"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, table := tableFromRoles(base, []int{0, 1}, tc.roles)
			after, res, err := Failover(f, table, tc.failed)
			if tc.is != nil {
				if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("Failover() = %v, want %v saying %q", err, tc.is, tc.says)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.SpareRank != tc.spare || !strings.Contains(res.Reason, tc.says) {
				t.Errorf("spare rank %d (%s), want %d saying %q", res.SpareRank, res.Reason, tc.spare, tc.says)
			}
			assertNoOverload(t, f, after)
		})
	}
}

func TestFailoverLHCb(t *testing.T) {
	f := lhcb()
	initial := mustPlan(t, f, Request{Units: 318, Spares: 8})
	streams := map[string][]string{}
	for _, ep := range f.Endpoints {
		streams[ep.Name] = ep.Streams
	}
	// Spares: eb009 on leaf 0 (ranks 18, 19), eb019 on leaf 1 (38, 39),
	// eb029 on leaf 2 (58, 59), eb039 on leaf 3 (78, 79).
	steps := []struct {
		failed, spare int
	}{
		{failed: 0, spare: 38},   // leaf 0: the lowest-ranked spare on another leaf, leaf 1's
		{failed: 300, spare: 18}, // leaf 15 has none: the lowest-ranked
		{failed: 21, spare: 19},  // leaf 1: leaf 0's last
		{failed: 40, spare: 39},  // leaf 2: leaf 1's last
		{failed: 355, spare: 58}, // leaf 17: the lowest-ranked left
		{failed: 58, spare: 78},  // the unit moved to leaf 2 fails again: not 59, its server's other half on its leaf
		{failed: 61, spare: 59},  // leaf 3: leaf 2's last
		{failed: 1, spare: 79},   // the last spare, on leaf 3
	}
	table := initial
	var failed []string
	for i, s := range steps {
		failed = append(failed, table.Ranks[s.failed].Endpoint)
		var res FailoverResult
		var err error
		table, res, err = Failover(f, table, s.failed)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if res.SpareRank != s.spare {
			t.Fatalf("step %d: rank %d failed over to %d (%s), want %d", i, s.failed, res.SpareRank, res.Reason, s.spare)
		}
		assertNoOverload(t, f, table)
	}
	if table.Epoch != 9 || table.Count(Live) != 318 || table.Count(Spare) != 0 {
		t.Fatalf("epoch %d, %d live, %d spares; want 9, 318, 0", table.Epoch, table.Count(Live), table.Count(Spare))
	}
	for _, r := range table.Ranks {
		if r.Role == Live && !slices.Equal(r.Streams, streams[r.Endpoint]) {
			t.Fatalf("unit %d on rank %d (%s) reads %v, want its endpoint's streams %v", r.Unit, r.Rank, r.Endpoint, r.Streams, streams[r.Endpoint])
		}
	}
	// Every LHCb endpoint reads streams, spares too: the 8 failed
	// endpoints' streams are unread, the spares' are read again.
	var unread []string
	for _, u := range UnreadStreams(f, table) {
		unread = append(unread, u.Endpoint)
	}
	slices.Sort(failed)
	if !slices.Equal(unread, failed) {
		t.Fatalf("unread %v, want the failed endpoints %v", unread, failed)
	}
	if _, _, err := Failover(f, table, 2); !errors.Is(err, ErrNoSpare) {
		t.Fatalf("ninth failover: %v, want ErrNoSpare", err)
	}
}

// A unit never fails over to its failed endpoint's sibling NUMA half: the
// two share a server (power, cabling, the node). With no other spare, it
// is left without one.
func TestFailoverNeverOnASibling(t *testing.T) {
	f := Fabric{Leaves: 1, Spines: 1, PortsPerLeaf: 4, LinksPerPair: 1}
	for i, name := range []string{"s0-numa0", "s0-numa1", "s1-numa0", "s1-numa1"} {
		f.Endpoints = append(f.Endpoints, Endpoint{Name: name, Node: name[:2], NUMA: i % 2, Leaf: 0, Port: i, Schedulable: true})
	}
	table := RankTable{Epoch: 1, Layout: Folded, LeavesInUse: []int{0}, Ranks: []Rank{
		{Rank: 0, Leaf: 0, Port: 0, Role: Live, Endpoint: "s0-numa0", Unit: 0, Function: RUBU},
		{Rank: 1, Leaf: 0, Port: 1, Role: Spare, Endpoint: "s0-numa1", Unit: NoUnit},
		{Rank: 2, Leaf: 0, Port: 2, Role: Live, Endpoint: "s1-numa0", Unit: 1, Function: RUBU},
		{Rank: 3, Leaf: 0, Port: 3, Role: Spare, Endpoint: "s1-numa1", Unit: NoUnit},
	}}
	after, res, err := Failover(f, table, 0)
	if err != nil || res.SpareRank != 3 || roles(after) != "DSLL" {
		t.Errorf("failover of rank 0: spare %d, roles %s, %v; want rank 3 on the other server, DSLL", res.SpareRank, roles(after), err)
	}
	table.Ranks[3].Role, table.Ranks[3].Endpoint = Dummy, ""
	_, _, err = Failover(f, table, 0)
	if !errors.Is(err, ErrNoSpare) || !strings.Contains(err.Error(), "spares on the failed endpoint's server, never used for it: s0-numa1") {
		t.Errorf("only the sibling left: %v; want ErrNoSpare naming it", err)
	}
}

// Failover, MoveBU and DropUnit refuse a Fabric that is invalid or no
// longer describes the table, naming the field: the cases on the
// LHCb plan with 8 spares (eb019-numa0 is spare rank 38, on leaf 1 port
// 18; port 6 of leaf 17 is free).
func TestMovesRefuseAFabricThatDoesNotDescribeTheTable(t *testing.T) {
	table := mustPlan(t, lhcb(), Request{Units: 318, Spares: 8})
	at := func(f Fabric, name string) int {
		return slices.IndexFunc(f.Endpoints, func(ep Endpoint) bool { return ep.Name == name })
	}
	tests := []struct {
		name  string
		edit  func(f *Fabric)
		field string
		says  string
	}{
		{name: "two endpoints on one port", edit: func(f *Fabric) { f.Endpoints[1].Port = 0 },
			field: "endpoints[1].port", says: `"eb000-numa1" is cabled to leaf 0 port 0, as is endpoints[0]`},
		{name: "a spare re-cabled", edit: func(f *Fabric) {
			i := at(*f, "eb019-numa0")
			f.Endpoints[i].Leaf, f.Endpoints[i].Port = 17, 6
		}, field: "endpoints[38].leaf", says: `endpoint "eb019-numa0" is cabled to leaf 17 port 6, but rank 38 runs it on leaf 1 port 18`},
		{name: "the failed endpoint's entry removed", edit: func(f *Fabric) { f.Endpoints = slices.Delete(f.Endpoints, 0, 1) },
			field: "endpoints", says: `rank 0 runs endpoint "eb000-numa0", which is not listed`},
	}
	moves := map[string]func(Fabric) error{
		"Failover": func(f Fabric) error { _, _, err := Failover(f, table, 0); return err },
		"MoveBU":   func(f Fabric) error { _, _, err := MoveBU(f, table, 0); return err },
		"DropUnit": func(f Fabric) error { _, err := DropUnit(f, table, 0); return err },
	}
	for _, tc := range tests {
		for name, move := range moves {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				f := lhcb()
				tc.edit(&f)
				err := move(f)
				var fields []string
				for _, fe := range fieldErrors(t, err) {
					fields = append(fields, fe.Field)
				}
				if !slices.Equal(fields, []string{tc.field}) || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("%s() = %v; want it refused naming %s, saying %q", name, err, tc.field, tc.says)
				}
			})
		}
	}
}

// The two halves of a failed server go to two spare servers while a spare
// server that runs no unit is left; with one spare server, both go there.
func TestFailoverKeepsAFailedServersHalvesApart(t *testing.T) {
	tests := []struct {
		name   string
		spares int
		failed [2]int // the two halves of one server, failing in turn
		want   [2]string
		reason string
	}{
		{name: "eb000's halves to eb019 and eb029", spares: 8, failed: [2]int{0, 1}, want: [2]string{"eb019-numa0", "eb029-numa0"},
			reason: "its server runs no unit (the failed endpoint's server lost its other half before)"},
		{name: "one spare server: eb010's halves both to eb009", spares: 2, failed: [2]int{20, 21}, want: [2]string{"eb009-numa0", "eb009-numa1"},
			reason: "no usable spare on a server that runs no unit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := lhcb()
			table := mustPlan(t, f, Request{Units: 318, Spares: tc.spares})
			var got [2]string
			var res FailoverResult
			for i, rank := range tc.failed {
				f = unschedulable(f, table.Ranks[rank].Endpoint)
				var err error
				if table, res, err = Failover(f, table, rank); err != nil {
					t.Fatal(err)
				}
				got[i] = res.SpareEndpoint
			}
			if got != tc.want || !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("halves to %v (%s), want %v saying %q", got, res.Reason, tc.want, tc.reason)
			}
		})
	}
}

// servers is a fabric of dual-NUMA servers s0, s1, ... filled onto the
// leaves in order, perLeaf[l] on leaf l, their halves on adjacent ports;
// every node Ready, no readout streams.
func servers(portsPerLeaf, spines int, perLeaf ...int) Fabric {
	f := Fabric{Leaves: len(perLeaf), Spines: spines, PortsPerLeaf: portsPerLeaf, LinksPerPair: 1}
	s := 0
	for leaf, n := range perLeaf {
		for slot := range n {
			for numa := range 2 {
				node := fmt.Sprintf("s%d", s)
				f.Endpoints = append(f.Endpoints, Endpoint{Name: fmt.Sprintf("%s-numa%d", node, numa), Node: node, NUMA: numa,
					Leaf: leaf, Port: 2*slot + numa, Schedulable: true})
			}
			s++
		}
	}
	return f
}

// A whole server lost while its node stays Ready (its builders
// unreachable, the commonest failure) loses its two units on one leaf,
// and the run fails them over one after the other. The second must move
// like the first, onto the leaf's spares where those are all there is (no
// guess that the leaf is lost), and onto another spare server than the
// first where one is usable.
func TestFailoverMovesBothUnitsOfAServerLostWhileReady(t *testing.T) {
	tests := []struct {
		name   string
		fabric Fabric
		req    Request
		want   [2]string // where ranks 0 and 1 (s0's halves) go, in turn
	}{
		// e2e's workerFabric: the victim's halves on ports 0 and 1, the
		// survivor's (the spares) on 2 and 3.
		{name: "one leaf, one spare server: both to it", fabric: servers(4, 1, 2), req: Request{Units: 2, Spares: 2},
			want: [2]string{"s1-numa0", "s1-numa1"}},
		// The envtests' smallFabric: 2 units use leaf 0 only.
		{name: "smallFabric, 2 units 2 spares", fabric: servers(4, 2, 2, 2), req: Request{Units: 2, Spares: 2},
			want: [2]string{"s1-numa0", "s1-numa1"}},
		{name: "one leaf, two spare servers: one each", fabric: servers(6, 1, 3), req: Request{Units: 2, Spares: 4},
			want: [2]string{"s1-numa0", "s2-numa0"}},
		// Spares s1 (leaf 0) and s3-numa1 (leaf 1, beside a unit): the
		// first goes to the other leaf, the second to the free server on
		// the failed server's leaf.
		{name: "smallFabric, 5 units 3 spares", fabric: servers(4, 2, 2, 2), req: Request{Units: 5, Spares: 3},
			want: [2]string{"s3-numa1", "s1-numa0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table := mustPlan(t, tc.fabric, tc.req)
			if table.Ranks[0].Endpoint != "s0-numa0" || table.Ranks[1].Endpoint != "s0-numa1" {
				t.Fatalf("plan %s: want s0's halves live on ranks 0 and 1", roles(table))
			}
			var got [2]string
			for i, rank := range []int{0, 1} {
				next, res, err := Failover(tc.fabric, table, rank) // s0 stays Ready
				if err != nil {
					t.Fatalf("rank %d: %v", rank, err)
				}
				got[i], table = res.SpareEndpoint, next
				assertNoOverload(t, tc.fabric, table)
			}
			if got != tc.want || table.Count(Live) != tc.req.Units {
				t.Errorf("s0's units to %v, %d live; want %v, %d", got, table.Count(Live), tc.want, tc.req.Units)
			}
		})
	}
}
