package builderapi

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// readBuilderGolden reads a body that eb-builder's tests write
// (builder/tests/golden.hpp), strictly: unknown fields disallowed, any
// field the builder added fails it.
func readBuilderGolden(t *testing.T, name string) Report {
	t.Helper()
	raw, err := os.ReadFile("testdata/builder/" + name)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var body Report
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("%s, as eb-builder writes it: %v; Report must know every field the builder writes", name, err)
	}
	return body
}

// The operator decodes every field of the builder's /status, each into
// the field meant for it.
func TestBuilderGoldenStatus(t *testing.T) {
	r := readBuilderGolden(t, "status-running.json")
	gid := int32(1)
	want := Report{Rank: 2, Units: 4, State: StateRunning, Activity: ActivityBuilding, Role: RoleLive, Epoch: 3, PendingEpoch: 4,
		NextEvent: 125100, EventsBuilt: 123000, EventsIncomplete: 7, EventsDropped: 2000, EventsInDoubt: 100, MEPsBuilt: 123,
		MEPsDiscarded: 2, OutputStalledSeconds: 12.5, BytesBuilt: 70849536, BuildingSeconds: 2.5,
		NetworkBytesSent: 53137152, NetworkBytesReceived: 53137150, NetworkSeconds: 1.25,
		NetworkSendsHeld: 96, NetworkSendHeldSeconds: 0.125, EventsPerSecond: 1.5e6, BytesPerSecond: 2.5e8,
		Peers:              []Peer{{0, PeerUp}, {1, PeerLost}, {2, "self"}, {3, "dummy"}},
		LostPeers:          []int32{1},
		LostPeersReachable: &[]int32{1},
		DataRefusals:       map[string]int64{"key": 3, "epoch": 0, "table": 1, "protocol": 0, "slow": 0},
		Transport: &Transport{Kind: ebv1.TransportVerbs, Device: "rxe0", Port: 1, GIDIndex: &gid, PortState: "ACTIVE", LinkLayer: "Ethernet",
			Peers: []QueuePair{{0, "RTS"}, {1, "ERR"}}},
		Consumer:  &Consumer{MEPs: 1251, EventsComplete: 1250000, EventsIncomplete: 1000},
		Allowed:   []string{"configure", "pause", "stop", "reset"},
		LastError: "rank 1 said \"bye\"\n\tand left\x01",
		NUMA:      &NUMA{Requested: "0", Node: ptr.To(int32(0)), Pinned: true, CPUsLocal: true, MemoryLocal: true, DeviceLocal: ptr.To(true)}}
	got, _ := json.Marshal(r)
	wanted, _ := json.Marshal(want)
	if !bytes.Equal(got, wanted) {
		t.Errorf("status-running.json decodes to\n%s\nwant\n%s", got, wanted)
	}
	if !r.NUMA.Aligned() || r.RankNUMA() == nil || !r.RankNUMA().Aligned {
		t.Errorf("numa %+v: want aligned", r.NUMA)
	}

	fresh := readBuilderGolden(t, "status-not-ready.json")
	if fresh.State != StateNotReady || fresh.Role != RoleUnconfigured || fresh.Epoch != 0 || fresh.HeldEpoch() != 0 ||
		!slices.Equal(fresh.Allowed, []string{"configure", "reset"}) || fresh.Transport == nil || fresh.Transport.Kind != ebv1.TransportTCP ||
		fresh.Consumer != nil {
		t.Errorf("status-not-ready.json decodes to %+v", fresh)
	}
}
