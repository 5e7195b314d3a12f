// Package ranktable is the rank-table document the operator publishes to
// builders (ConfigMap <run>-ranks, key ranks.json, mounted at
// /etc/eventbuilder/ranks.json) and sends to every builder with the control
// API's configure call. docs/rank-table.md is its contract. The ConfigMap is
// also the operator's record of the current table: it is read back into a
// planner.RankTable on every reconcile, so a failover survives operator
// restarts.
package ranktable

import (
	"encoding/json"
	"fmt"
	"net"

	"daq.io/eventbuilder/operator/internal/planner"
)

// Where the document lives.
const (
	Key       = "ranks.json"
	MountDir  = "/etc/eventbuilder"
	MountPath = MountDir + "/" + Key
	// Version is the document's schema version; builders refuse others.
	Version = "eventbuilder.daq.io/ranktable/v1"
)

// ConfigMapName is the ConfigMap holding a run's rank table.
func ConfigMapName(run string) string { return run + "-ranks" }

// States of a rank.
const (
	Live  = "live"
	Dummy = "dummy"
)

// Document is the rank table of one epoch.
type Document struct {
	Version string `json:"version"`
	Run     string `json:"run"`
	// Fabric is the Fabric the table was planned on; empty without one.
	Fabric string `json:"fabric,omitempty"`
	// Epoch increments with every new table; builders switch to it at a
	// common phase boundary.
	Epoch int64 `json:"epoch"`
	// ResumeEvent is where a set that starts afresh under this table (no
	// unit of it already building: every one it had was lost or moved)
	// goes on, past every event the run may have built: the operator's
	// estimate when it published the table (runplan.ResumeEvent). Units
	// joining a building set take its place instead.
	ResumeEvent int64  `json:"resumeEvent,omitempty"`
	Layout      string `json:"layout"`
	// Ranks has one entry per rank, in rank order; its length is N.
	Ranks []Rank `json:"ranks"`
	// Idle are the endpoints on the leaves in use that the run has no unit
	// for: their ranks are dummies, and their readout streams unread by
	// plan, not by a failure.
	Idle []string `json:"idle,omitempty"`
	// UnreadStreams are the readout streams of the Fabric that no live RU
	// reads because of a failure (runplan.LostStreams), in the Fabric's
	// endpoint order: builders mark every MEP with them, so its events
	// are incomplete. Streams unread by plan are not listed. Derived:
	// Table does not read it back.
	UnreadStreams []string `json:"unreadStreams,omitempty"`
}

// Rank is one rank of the schedule.
type Rank struct {
	Rank int `json:"rank"`
	// Address is where the rank's builder listens for data (host:port).
	// Dummy ranks have one too (nothing answers there): peers lists stay
	// the same across epochs.
	Address string `json:"address"`
	// State is live or dummy.
	State string `json:"state"`
	// Spare marks a dummy rank whose endpoint is a warm spare.
	Spare bool `json:"spare,omitempty"`
	// Unit, Function and Sources are set on live ranks: the unit's id
	// (stable across failovers), RU+BU | RU | BU, and its readout streams.
	Unit     *int     `json:"unit,omitempty"`
	Function string   `json:"function,omitempty"`
	Sources  []string `json:"sources,omitempty"`
	// SourceUnread marks a live rank running BU alone whose unit lost its
	// readout (planner.Rank.SourceUnread): every MEP keeps its source's
	// slot, as missing.
	SourceUnread bool `json:"sourceUnread,omitempty"`
	// Home is, on a live rank whose unit a failure moved off the endpoint
	// whose readout streams it read, that endpoint (planner.Rank.Home):
	// the operator's record, for the unit to go back once it is a spare
	// again. Builders ignore it.
	Home string `json:"home,omitempty"`
	// Where the rank runs (live and spare ranks on a fabric).
	Endpoint   string `json:"endpoint,omitempty"`
	Node       string `json:"node,omitempty"`
	NUMA       *int   `json:"numa,omitempty"`
	RDMADevice string `json:"rdmaDevice,omitempty"`
	Netdev     string `json:"netdev,omitempty"`
	// Leaf and Port of the rank's switch port (every rank on a fabric).
	Leaf *int `json:"leaf,omitempty"`
	Port *int `json:"port,omitempty"`
}

// New renders table t of run as a document. addresses[r] is rank r's data
// address; endpoints gives the placement of the endpoints t names; fabric
// is empty for runs without one (whose ranks carry no leaf and port).
func New(run, fabric string, t planner.RankTable, addresses []string, endpoints map[string]planner.Endpoint) Document {
	d := Document{Version: Version, Run: run, Fabric: fabric, Epoch: t.Epoch, Layout: string(t.Layout), Ranks: make([]Rank, len(t.Ranks)),
		Idle: t.Idle}
	for i, r := range t.Ranks {
		out := Rank{Rank: r.Rank, Address: addresses[i], State: Dummy, Spare: r.Role == planner.Spare}
		if fabric != "" {
			out.Leaf, out.Port = ptr(r.Leaf), ptr(r.Port)
		}
		if r.Role == planner.Live {
			out.State, out.Unit, out.Function, out.Sources, out.SourceUnread, out.Home = Live, ptr(int(r.Unit)), string(r.Function), r.Streams, r.SourceUnread, r.Home
		}
		if ep, ok := endpoints[r.Endpoint]; ok && r.Endpoint != "" {
			out.Endpoint, out.Node, out.NUMA, out.RDMADevice, out.Netdev = ep.Name, ep.Node, ptr(ep.NUMA), ep.RDMADevice, ep.Netdev
		}
		d.Ranks[i] = out
	}
	return d
}

// Table reads a document back into the planner's table.
func (d Document) Table() (planner.RankTable, error) {
	if d.Version != Version {
		return planner.RankTable{}, fmt.Errorf("rank table version %q, want %q", d.Version, Version)
	}
	t := planner.RankTable{Epoch: d.Epoch, Layout: planner.Layout(d.Layout), Ranks: make([]planner.Rank, len(d.Ranks)), Idle: d.Idle}
	for i, r := range d.Ranks {
		if r.Rank != i {
			return planner.RankTable{}, fmt.Errorf("rank table entry %d is rank %d", i, r.Rank)
		}
		out := planner.Rank{Rank: i, Role: planner.Dummy, Unit: planner.NoUnit, Endpoint: r.Endpoint, Port: i}
		if r.Leaf != nil && r.Port != nil {
			out.Leaf, out.Port = *r.Leaf, *r.Port
			if len(t.LeavesInUse) == 0 || t.LeavesInUse[len(t.LeavesInUse)-1] != out.Leaf {
				t.LeavesInUse = append(t.LeavesInUse, out.Leaf)
			}
		}
		switch {
		case r.State == Live && r.Unit != nil:
			out.Role, out.Unit, out.Function, out.Streams, out.SourceUnread, out.Home = planner.Live, planner.UnitID(*r.Unit), planner.Function(r.Function), r.Sources, r.SourceUnread, r.Home
		case r.State == Live:
			return planner.RankTable{}, fmt.Errorf("live rank %d has no unit", i)
		case r.Spare:
			out.Role = planner.Spare
		default:
			out.Endpoint = ""
		}
		t.Ranks[i] = out
	}
	return t, nil
}

// Marshal renders the document as the ConfigMap's ranks.json.
func (d Document) Marshal() (string, error) {
	b, err := json.MarshalIndent(d, "", " ")
	return string(b), err
}

// Parse reads ranks.json.
func Parse(data string) (Document, error) {
	var d Document
	err := json.Unmarshal([]byte(data), &d)
	return d, err
}

func ptr(i int) *int { return &i }

// WithIPs is the document a builder is configured with: each rank in ips
// addressed by that IP (its pod's) in place of its DNS name, the port
// kept, so the data plane dials without cluster DNS (a DNS outage in a
// failover, CoreDNS on the lost node, stops nothing). Ranks without an
// IP keep their name, as do IPs the builder cannot dial (it dials IPv4)
// and IPs given to more than one rank (a host network).
func (d Document) WithIPs(ips map[int32]string) Document {
	dialable := Dialable(ips)
	out := d
	out.Ranks = append([]Rank(nil), d.Ranks...)
	for i, r := range out.Ranks {
		ip, ok := dialable[int32(r.Rank)]
		if !ok {
			continue
		}
		if _, port, err := net.SplitHostPort(r.Address); err == nil {
			out.Ranks[i].Address = net.JoinHostPort(ip, port)
		}
	}
	return out
}

// Dialable are the IPs of ips that WithIPs puts in a table: IPv4 ones
// (the builder dials IPv4), each held by one rank only, in canonical form.
func Dialable(ips map[int32]string) map[int32]string {
	count := map[string]int{}
	for _, ip := range ips {
		count[ip]++
	}
	out := map[int32]string{}
	for rank, ip := range ips {
		if parsed := net.ParseIP(ip); parsed != nil && parsed.To4() != nil && count[ip] == 1 {
			out[rank] = parsed.To4().String()
		}
	}
	return out
}
