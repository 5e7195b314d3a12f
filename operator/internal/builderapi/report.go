// Package builderapi holds the types of the builders' HTTP API
// (builder/docs/control-api.md): the status document a builder serves and
// answers commands with, the commands of its state machine, and how a
// builder refuses one. Types only: the pure packages (lifecycle, runplan,
// builderstatus) import them; the client that speaks the API is
// builderclient, an emulation of the builder that serves it builderemu.
package builderapi

import (
	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// The builder's state machine states (builder/docs/control-api.md).
const (
	StateNotReady = "NOT_READY"
	StateReady    = "READY"
	StateRunning  = "RUNNING"
	StatePaused   = "PAUSED"
	StateError    = "ERROR"
)

// Roles a builder reports: the state of its own rank in its table.
const (
	RoleLive         = "live"
	RoleDummy        = "dummy"
	RoleUnconfigured = "unconfigured"
)

// Report is the JSON document a builder serves at GET /status (and answers
// control commands with); encoded, it has every
// field the builder writes (TestBuilderGoldenStatus reads the bodies the
// builder's own tests write). Counters are totals since the builder process
// started.
type Report struct {
	// Rank is the builder's rank (its --rank, or its configured rank).
	Rank  int32  `json:"rank"`
	Units int32  `json:"units"`
	State string `json:"state"`
	// Activity says what the unit's data path does now (Activity*).
	Activity string `json:"activity"`
	// Role is live or dummy (a started dummy stands by), unconfigured
	// before the first configure.
	Role string `json:"role"`
	// Epoch is the epoch of the table the builder runs; 0 before the
	// first configure. PendingEpoch is a table accepted by configure and
	// not switched to yet (0 when none).
	Epoch        int64 `json:"epoch"`
	PendingEpoch int64 `json:"pending_epoch"`
	// NextEvent is the first event of the set's next cycle.
	NextEvent        int64 `json:"next_event"`
	EventsBuilt      int64 `json:"events_built"`
	EventsIncomplete int64 `json:"events_incomplete"`
	EventsDropped    int64 `json:"events_dropped"`
	// EventsInDoubt bounds the events of chunks this unit could not know
	// the set's decision on (builder/docs/control-api.md, "One set").
	EventsInDoubt int64 `json:"events_in_doubt"`
	MEPsBuilt     int64 `json:"meps_built"`
	// MEPsDiscarded were assembled and dropped: the output ring had no room.
	MEPsDiscarded int64 `json:"meps_discarded"`
	// OutputStalledSeconds is the building time since the output last took
	// a MEP, while every MEP since was dropped here; 0 while it takes them.
	OutputStalledSeconds float64 `json:"output_stalled_seconds"`
	BytesBuilt           int64   `json:"bytes_built"`
	// BuildingSeconds is the time spent building, over all sessions.
	BuildingSeconds float64 `json:"building_seconds"`
	// NetworkBytesSent and NetworkBytesReceived are what its transport
	// moved to and from other units (its own MFP, copied locally, is not
	// counted), in NetworkSeconds spent waiting for data transfers.
	NetworkBytesSent     int64   `json:"network_bytes_sent"`
	NetworkBytesReceived int64   `json:"network_bytes_received"`
	NetworkSeconds       float64 `json:"network_seconds"`
	// NetworkSendsHeld are MFP sends its RU held because their BU had not
	// yet posted the receive (verbs; TCP holds none), waiting
	// NetworkSendHeldSeconds in all: many point at late BUs.
	NetworkSendsHeld       int64   `json:"network_sends_held"`
	NetworkSendHeldSeconds float64 `json:"network_send_held_seconds"`
	EventsPerSecond        float64 `json:"events_per_second"`
	BytesPerSecond         float64 `json:"bytes_per_second"`
	Peers                  []Peer  `json:"peers"`
	// LostPeers are the ranks this builder lost in its epoch.
	LostPeers []int32 `json:"lost_peers"`
	// LostPeersReachable are those of LostPeers whose data port answers
	// its dials again (a partition healed); nil from builders that do not
	// probe, which runplan.Rejoins then takes back without waiting.
	LostPeersReachable *[]int32 `json:"lost_peers_reachable"`
	// DataRefusals counts the data connections refused, by reason (key,
	// epoch, table, protocol, slow).
	DataRefusals map[string]int64 `json:"data_refusals"`
	// Allowed are the commands the state machine accepts now.
	Allowed   []string `json:"allowed"`
	LastError string   `json:"last_error"`
	// Transport is the data transport the builder runs; nil from
	// builders that do not report it.
	Transport *Transport `json:"transport,omitempty"`
	// Consumer is what the consumer of its MEP ring published (null
	// without a ring, or before the consumer did).
	Consumer *Consumer `json:"consumer"`
	// NUMA is where the builder runs against the NUMA node it was asked
	// for (nil from builders that do not report it).
	NUMA *NUMA `json:"numa,omitempty"`
}

// Consumer is a MEP ring consumer's counts as the builder shows them.
type Consumer struct {
	MEPs             int64 `json:"meps"`
	EventsComplete   int64 `json:"events_complete"`
	EventsIncomplete int64 `json:"events_incomplete"`
	Rejected         int64 `json:"rejected"`
}

// Counts is the consumer's report as the run's status shows it.
func (c *Consumer) Counts() *ebv1.ConsumerCounts {
	if c == nil {
		return nil
	}
	return &ebv1.ConsumerCounts{MEPs: c.MEPs, EventsComplete: c.EventsComplete, EventsIncomplete: c.EventsIncomplete, Rejected: c.Rejected}
}

// Transport is the builder's report of its transport: the kind alone for
// tcp; for verbs the RDMA device and port it opened and the state of its
// queue pair to each peer.
type Transport struct {
	// Kind is its --transport, spelled as spec.builder.transport.
	Kind   ebv1.Transport `json:"kind"`
	Device string         `json:"device,omitempty"`
	Port   int32          `json:"port,omitempty"`
	// GIDIndex is the port's GID table entry the queue pairs address
	// peers with (RoCE); -1 on InfiniBand, which addresses them by LID.
	GIDIndex *int32 `json:"gid_index,omitempty"`
	// PortState is the port's state (ACTIVE, DOWN, INIT, ARMED...),
	// LinkLayer its link layer (InfiniBand or Ethernet: RoCE).
	PortState string      `json:"port_state,omitempty"`
	LinkLayer string      `json:"link_layer,omitempty"`
	Peers     []QueuePair `json:"peers,omitempty"`
}

// QueuePair is the state of a builder's queue pair to one peer (RESET,
// INIT, RTR, RTS: ready to send, ERR...).
type QueuePair struct {
	Rank    int32  `json:"rank"`
	QPState string `json:"qp_state"`
}

// RankTransport is what the run's rank table shows of a report's
// transport: the RDMA port of a verbs builder, nil for any other (the
// queue pairs, one per peer, stay out of the status: too many at scale).
func (r Report) RankTransport() *ebv1.RankTransport {
	t := r.Transport
	if t == nil || t.Kind != ebv1.TransportVerbs {
		return nil
	}
	rt := &ebv1.RankTransport{Device: t.Device, PortState: t.PortState}
	if t.GIDIndex != nil && *t.GIDIndex >= 0 {
		rt.GIDIndex = ptr.To(*t.GIDIndex)
	}
	return rt
}

// Peer is a builder's view of one rank: self, up, connecting, lost or dummy.
type Peer struct {
	Rank  int32  `json:"rank"`
	State string `json:"state"`
}

// Activities: what a builder's data path does now.
const (
	ActivityIdle       = "idle"
	ActivityConnecting = "connecting"
	ActivityBuilding   = "building"
	ActivityPaused     = "paused"
	ActivityStandby    = "standby"
)

// Peer states.
const (
	PeerLost = "lost"
	PeerUp   = "up"
)

// HeldEpoch is the newest table the builder has accepted: its pending
// epoch if it has one, else the epoch it runs.
func (r Report) HeldEpoch() int64 { return max(r.Epoch, r.PendingEpoch) }
