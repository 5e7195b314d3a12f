package ranktable

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"daq.io/eventbuilder/operator/internal/planner"
)

func table() (planner.RankTable, []string, map[string]planner.Endpoint) {
	t := planner.RankTable{Epoch: 3, Layout: planner.Folded, LeavesInUse: []int{0}, Idle: []string{"e9"}, Ranks: []planner.Rank{
		{Rank: 0, Leaf: 0, Port: 0, Role: planner.Live, Endpoint: "a", Unit: 1, Function: planner.RUBU, Streams: []string{"a-mfp0"}},
		{Rank: 1, Leaf: 0, Port: 1, Role: planner.Spare, Endpoint: "b", Unit: planner.NoUnit},
		{Rank: 2, Leaf: 0, Port: 2, Role: planner.Dummy, Unit: planner.NoUnit},
		// A unit that lost its fibres to a failover: its BU alone, its
		// source unread, its readout's endpoint kept to go back to.
		{Rank: 3, Leaf: 0, Port: 3, Role: planner.Live, Endpoint: "c", Unit: 0, Function: planner.BU, SourceUnread: true, Home: "d"},
	}}
	addrs := []string{"r-eb-0.r-eb:7000", "r-eb-1.r-eb:7000", "r-eb-2.r-eb:7000", "r-eb-3.r-eb:7000"}
	eps := map[string]planner.Endpoint{
		"a": {Name: "a", Node: "n0", NUMA: 0, RDMADevice: "mlx5_0", Netdev: "ib0"},
		"b": {Name: "b", Node: "n0", NUMA: 1, RDMADevice: "mlx5_1", Netdev: "ib1"},
		"c": {Name: "c", Node: "n1", NUMA: 0, RDMADevice: "mlx5_0", Netdev: "ib0"},
	}
	return t, addrs, eps
}

// The JSON builders read: docs/rank-table.md documents exactly this.
func TestDocumentJSON(t *testing.T) {
	tbl, addrs, eps := table()
	got, err := New("r", "f", tbl, addrs, eps).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{
 "version": "eventbuilder.daq.io/ranktable/v1",
 "run": "r",
 "fabric": "f",
 "epoch": 3,
 "layout": "Folded",
 "ranks": [
  {
   "rank": 0,
   "address": "r-eb-0.r-eb:7000",
   "state": "live",
   "unit": 1,
   "function": "RU+BU",
   "sources": [
    "a-mfp0"
   ],
   "endpoint": "a",
   "node": "n0",
   "numa": 0,
   "rdmaDevice": "mlx5_0",
   "netdev": "ib0",
   "leaf": 0,
   "port": 0
  },
  {
   "rank": 1,
   "address": "r-eb-1.r-eb:7000",
   "state": "dummy",
   "spare": true,
   "endpoint": "b",
   "node": "n0",
   "numa": 1,
   "rdmaDevice": "mlx5_1",
   "netdev": "ib1",
   "leaf": 0,
   "port": 1
  },
  {
   "rank": 2,
   "address": "r-eb-2.r-eb:7000",
   "state": "dummy",
   "leaf": 0,
   "port": 2
  },
  {
   "rank": 3,
   "address": "r-eb-3.r-eb:7000",
   "state": "live",
   "unit": 0,
   "function": "BU",
   "sourceUnread": true,
   "home": "d",
   "endpoint": "c",
   "node": "n1",
   "numa": 0,
   "rdmaDevice": "mlx5_0",
   "netdev": "ib0",
   "leaf": 0,
   "port": 3
  }
 ],
 "idle": [
  "e9"
 ]
}`
	if got != want {
		t.Errorf("document\n%s\nwant\n%s", got, want)
	}
}

// The operator reads its own documents back as its record of the table.
func TestRoundTrip(t *testing.T) {
	tbl, addrs, eps := table()
	data, err := New("r", "f", tbl, addrs, eps).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	back, err := doc.Table()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, tbl) {
		t.Errorf("round trip\n%+v\nwant\n%+v", back, tbl)
	}
}

func TestTableRejectsBadDocuments(t *testing.T) {
	for name, doc := range map[string]Document{
		"wrong version":      {Version: "v0"},
		"ranks out of order": {Version: Version, Ranks: []Rank{{Rank: 1, State: Dummy}}},
		"live without unit":  {Version: Version, Ranks: []Rank{{Rank: 0, State: Live}}},
	} {
		if _, err := doc.Table(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// unreadStreams closes the document, and is derived: Table reads it
// not, so the round trip is the same table.
func TestUnreadStreams(t *testing.T) {
	tbl, addrs, eps := table()
	doc := New("r", "f", tbl, addrs, eps)
	doc.UnreadStreams = []string{"c-mfp0", "c-mfp1"}
	data, err := doc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `
 "idle": [
  "e9"
 ],
 "unreadStreams": [
  "c-mfp0",
  "c-mfp1"
 ]
}`
	if !strings.HasSuffix(data, want) {
		t.Errorf("document ends\n%s\nwant\n%s", data[max(0, len(data)-len(want)):], want)
	}
	parsed, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(parsed.UnreadStreams, doc.UnreadStreams) {
		t.Errorf("parsed unreadStreams %v, want %v", parsed.UnreadStreams, doc.UnreadStreams)
	}
	if back, err := parsed.Table(); err != nil || !reflect.DeepEqual(back, tbl) {
		t.Errorf("round trip %+v (%v), want %+v", back, err, tbl)
	}
}

func TestWithIPs(t *testing.T) {
	doc := Document{Version: Version, Run: "r", Epoch: 3, Layout: "Folded", UnreadStreams: []string{"s0", "s1"}, Ranks: []Rank{
		{Rank: 0, Address: "r-eb-0.r-eb:7000", State: Live}, {Rank: 1, Address: "r-eb-1.r-eb:7000", State: Live},
		{Rank: 2, Address: "r-eb-2.r-eb:7000", State: Dummy}, {Rank: 3, Address: "r-eb-3.r-eb:7000", State: Live},
		{Rank: 4, Address: "r-eb-4.r-eb:7000", State: Live}, {Rank: 5, Address: "r-eb-5.r-eb:7000", State: Live},
	}}
	got := doc.WithIPs(map[int32]string{
		0: "10.244.1.7", // a pod IP
		1: "fd00::5",    // IPv6: the builder dials IPv4 only
		3: "10.244.2.9", // shared with rank 4 (a host network): neither is unique
		4: "10.244.2.9",
		5: "not-an-ip",
	})
	want := []string{"10.244.1.7:7000", "r-eb-1.r-eb:7000", "r-eb-2.r-eb:7000", "r-eb-3.r-eb:7000", "r-eb-4.r-eb:7000", "r-eb-5.r-eb:7000"}
	for i, r := range got.Ranks {
		if r.Address != want[i] {
			t.Errorf("rank %d: %q, want %q", i, r.Address, want[i])
		}
	}
	if doc.Ranks[0].Address != "r-eb-0.r-eb:7000" {
		t.Errorf("WithIPs changed the published document: %q", doc.Ranks[0].Address)
	}
	if got.Epoch != 3 || got.Run != "r" || len(got.Ranks) != 6 || !slices.Equal(got.UnreadStreams, []string{"s0", "s1"}) {
		t.Errorf("the rest of the document changed: %+v", got)
	}
}
