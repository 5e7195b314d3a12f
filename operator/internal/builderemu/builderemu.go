// Package builderemu is an EMULATION of eb-builder's HTTP control API, for
// the operator's envtest suite and scale benchmark, where there are no
// kubelets and so no builder processes. It is not the builder: it moves
// no data. It implements the contract of builder/docs/control-api.md as
// faithfully as a test needs: bearer tokens (401/403), the state machine
// (NOT_READY, READY, RUNNING, PAUSED, ERROR) with 409 and the allowed
// commands, configure's validation of the rank table (400 naming the
// field), epochs that only go forward (same epoch and table idempotent,
// same epoch with another table 409), a pending epoch in RUNNING/PAUSED
// that the running set switches to together once every unit live in both
// tables holds it, pause and stop acting on the whole running set, a
// dummy's standby start, lost peers (reset by a new epoch, but for
// joiners that cannot join: dead, or SetUnreachable), a unit that lost
// its set and went on alone, taken back by an epoch while still in its
// session (it and the set refuse each other: lost both ways, it builds on
// alone until a reset), a table of another number of ranks refused while
// in a session (409), /status (with the transport: tcp, or verbs with its
// RDMA port and a queue pair per peer; after a reset still the forgotten
// table's epoch and role), /metrics (a few of the builder's metrics),
// /healthz and /readyz. A set builds once every live unit of its table has
// started; each live BU then counts events at a fixed rate, dropped while
// it lost a peer's RU, and the unit the set follows drops the lost BUs'
// share; next_event counts every event of the set once.
//
// The contract suite (internal/builderclient/contract_test.go) runs the
// same scenarios against this emulation and real eb-builder processes. What
// the emulation simplifies: a set's cycle boundary comes at once (a pause
// or stop sent to one unit reaches its set's others within the command,
// where eb-builder's reach them at the end of the current cycle, a few
// milliseconds later), and it moves no data.
//
// A Farm serves any number of emulated builders from one local HTTP
// server, each under its own path (Farm.URL); builders of one run share a
// mesh, which is what makes epoch switches, set-wide pause and stop, and
// lost peers work across them. StartPod plays the kubelet and eb-builder's
// start: it reads the builder's command line and finds the token file
// through the pod's volumes and the Secret it mounts.
package builderemu

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
)

// Builder states, as the builder names them.
const (
	NotReady = "NOT_READY"
	Ready    = "READY"
	Running  = "RUNNING"
	Paused   = "PAUSED"
	Error    = "ERROR"
)

// tableVersion is the only rank-table version the builder knows.
const tableVersion = "eventbuilder.daq.io/ranktable/v1"

// maxTableRanks is the largest table the builder takes.
const maxTableRanks = 65536

// maxConfigure is the largest configure body the builder reads.
const maxConfigure = 4 << 20

// Options are what an emulated builder was started with.
type Options struct {
	// Token is the bearer token (--token-file's content, trimmed, or
	// EB_CONTROL_TOKEN); empty disables the control API (403).
	Token string
	// Rank is --rank; -1 when not given.
	Rank int32
	// Mesh names the set of builders that run together (one run).
	Mesh string
	// EventRate is the events per second a live RUNNING builder counts
	// (default 10 000), EventSize their bytes (default 1000).
	EventRate float64
	EventSize int64
	// Transport is --transport: tcp (the default) or verbs, whose
	// emulated port (RDMADevice, --rdma-device) is always ACTIVE but for
	// an unreachable builder's, which is DOWN.
	Transport  ebv1.Transport
	RDMADevice string
	// NUMANode is EB_NUMA_NODE, the node the operator asks it to run on
	// ("" for none): the emulated builder reports itself aligned there,
	// but while SetMisaligned says otherwise.
	NUMANode string
	// FlagIncomplete is --incomplete flag: an event a lost or unread RU's
	// fragments are missing from is delivered flagged incomplete (counted
	// built and incomplete), not dropped.
	FlagIncomplete bool
}

// Request is one control command a builder received.
type Request struct {
	Command string
	// Epoch of the table sent, for configure.
	Epoch int64
	// Rank sent, for configure.
	Rank int32
	// Status is the HTTP status answered.
	Status int
	// Authorized: the bearer token was right.
	Authorized bool
}

// Farm serves emulated builders.
type Farm struct {
	srv *httptest.Server

	mu       sync.Mutex
	builders map[string]*Builder
	meshes   map[string]*mesh
	// unreachable: keys whose data network is down (SetUnreachable).
	unreachable map[string]bool
	// stalled: keys whose data path stands still (SetStalled).
	stalled map[string]bool
	// misaligned: keys whose CPUs are off their NUMA node (SetMisaligned).
	misaligned map[string]bool
	// outputStalled: keys whose BU output takes no MEP (SetOutputStalled).
	outputStalled map[string]bool
	// onAccept, if set, is called (without the lock) after a command
	// was accepted.
	onAccept func(b *Builder, cmd string, epoch int64)
}

// NewFarm starts the farm's HTTP server; Close stops it.
func NewFarm() *Farm {
	f := &Farm{builders: map[string]*Builder{}, meshes: map[string]*mesh{}, unreachable: map[string]bool{}, stalled: map[string]bool{},
		misaligned: map[string]bool{}, outputStalled: map[string]bool{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// Close stops the server.
func (f *Farm) Close() { f.srv.Close() }

// URL is the base URL of the builder started under key (whether or not it
// is started yet: until then, and once killed, nothing answers there).
func (f *Farm) URL(key string) string { return f.srv.URL + "/b/" + key }

// OnAccept sets a function called after every accepted command, with the
// epoch of the table the builder then holds (its pending epoch if any).
func (f *Farm) OnAccept(fn func(b *Builder, cmd string, epoch int64)) {
	f.mu.Lock()
	f.onAccept = fn
	f.mu.Unlock()
}

// Start starts an emulated builder under key, replacing any builder there
// (a restarted process: it starts NOT_READY with zero counters).
func (f *Farm) Start(key string, o Options) *Builder {
	if o.EventRate == 0 {
		o.EventRate = 10000
	}
	if o.EventSize == 0 {
		o.EventSize = 1000
	}
	if o.Transport == "" {
		o.Transport = ebv1.TransportTCP
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if old := f.builders[key]; old != nil {
		old.dead = true
	}
	m := f.meshes[o.Mesh]
	if m == nil {
		m = &mesh{byRank: map[int32]*Builder{}}
		f.meshes[o.Mesh] = m
	}
	b := &Builder{farm: f, key: key, opts: o, mesh: m, state: NotReady, rank: o.Rank, lost: map[int32]bool{}, last: time.Now()}
	f.builders[key] = b
	if o.Rank >= 0 {
		m.byRank[o.Rank] = b
	}
	return b
}

// Builder returns the builder started under key, or nil.
func (f *Farm) Builder(key string) *Builder {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.builders[key]
}

// Kill ends the builder under key as a crash or a dead node would: nothing
// answers at its URL any more, and every live peer running with it marks
// its rank lost (as after --peer-timeout-ms).
func (f *Farm) Kill(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.builders[key]
	if b == nil || b.dead {
		return
	}
	b.dead = true
	b.lostBy(time.Now())
}

// lostBy: every live peer running with b marks its rank lost (as after
// --peer-timeout-ms).
func (b *Builder) lostBy(now time.Time) {
	for _, p := range b.mesh.byRank {
		if p != b && !p.dead && p.active() && p.table.live(b.rank) && p.table.live(p.rank) {
			p.advance(now)
			p.lost[b.rank] = true
		}
	}
}

// SetUnreachable cuts (or restores) the data network of the builders under
// key, while their control API still answers: the node's data network is
// down, a one-sided partition. Such a builder moves no data (it builds
// nothing, its peers show as connecting), and a running set it joins by a
// new epoch (a spare made live, a lost rank taken back) reports it lost at
// that epoch, as eb-builder does when a joiner is not connected within
// --join-timeout-ms. Cut while it runs live in its set, it and its running
// live peers of its epoch mark each other lost (as after
// --peer-timeout-ms), and it goes on alone in its session, RUNNING at
// that epoch: restored (the partition healed), a new epoch that takes it
// back finds it at its own place in the event stream, and it and the set
// refuse each other (lost both ways, eb_transport_errors_total
// {kind="out_of_step"} in eb-builder) until it is reset and joins as a
// fresh process. It lasts across Restart (the key is the pod's).
func (f *Farm) SetUnreachable(key string, cut bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unreachable[key] = cut
	b := f.builders[key]
	if !cut || b == nil || b.dead || !b.active() || !b.table.live(b.rank) {
		return
	}
	now := time.Now()
	b.advance(now)
	for _, p := range b.mesh.byRank {
		if p != b && !p.dead && p.active() && p.table.epoch() == b.table.epoch() && p.table.live(p.rank) {
			p.advance(now)
			p.lost[b.rank], b.lost[p.rank] = true, true
		}
	}
}

// SetStalled makes the data path of the builder under key stand still (or
// go on again) while its process and connections stay up: connecting to a
// peer whose name no longer resolves, a source that hands out nothing. It
// stays RUNNING with activity connecting, and its set waits for it: every
// unit of the set shows connecting and counts no event, none is lost.
func (f *Farm) SetStalled(key string, stalled bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if b := f.builders[key]; b != nil {
		for _, p := range b.mesh.byRank {
			p.advance(now) // count up to now at the old pace
		}
	}
	f.stalled[key] = stalled
}

// SetMisaligned makes the builder under key report its CPUs off its NUMA
// node (or on it again): a kubelet without the static CPU manager gave it
// CPUs of the whole machine.
func (f *Farm) SetMisaligned(key string, misaligned bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.misaligned[key] = misaligned
}

// SetOutputStalled makes the BU of the builder under key find no room in
// its output (or room again): its consumer is gone, so while it builds it
// drops every MEP it builds and reports output_stalled_seconds growing.
func (f *Farm) SetOutputStalled(key string, stalled bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outputStalled[key] = stalled
}

// Restart ends the builder under key as Kill does (its live peers mark it
// lost) and starts a new process there with the same options, as the
// kubelet restarts a crashed container in its pod: NOT_READY, no table
// (epoch 0), zero counters. Its peers keep it lost for the rest of their
// epoch; a new epoch in which it is live takes it back. It returns the
// new builder, or nil if none was started under key.
func (f *Farm) Restart(key string) *Builder {
	f.Kill(key)
	f.mu.Lock()
	old := f.builders[key]
	var opts Options
	if old != nil {
		opts = old.opts
	}
	f.mu.Unlock()
	if old == nil {
		return nil
	}
	return f.Start(key, opts)
}

// Builder is one emulated eb-builder process.
type Builder struct {
	farm *Farm
	key  string
	opts Options
	mesh *mesh

	// Guarded by farm.mu.
	dead      bool
	state     string
	rank      int32 // configured rank; opts.Rank or -1 before configure
	table     *table
	pending   *table
	lost      map[int32]bool
	lastError string
	// inSession: the builder runs a session as a live unit of a set it
	// connected to (started with it, or joined it), with its own place in
	// the event stream; it keeps it while it goes on alone. A process that
	// could not join, a dummy, a reset or a stopped builder has none.
	inSession bool
	requests  []Request
	last      time.Time // counters advanced to
	carry     float64   // the fraction of an event advance has not counted yet
	building  float64   // seconds spent building
	events    int64
	dropped   int64
	// incomplete: events delivered flagged incomplete (--incomplete flag).
	incomplete int64
	// discarded: events its BU dropped for want of room in its output,
	// the last stalledFor seconds of building (SetOutputStalled).
	discarded  int64
	stalledFor float64
	// shown is the last table the builder's status shows: a reset forgets
	// the table (b.table nil) but, as eb-builder, keeps reporting its
	// epoch, role and peers until the next configure.
	shown *table
}

// mesh is the builders of one run, by rank (the latest process per rank).
type mesh struct {
	byRank map[int32]*Builder
	// generated counts the events the set's sources made: built or
	// dropped by some unit; every unit reports it as next_event.
	generated int64
}

// table is what the builder reads of a rank table.
type table struct {
	Version string      `json:"version"`
	Epoch   int64       `json:"epoch"`
	Layout  string      `json:"layout"`
	Ranks   []tableRank `json:"ranks"`
	// UnreadStreams as sent; unread once checked (parseCommand).
	UnreadStreams json.RawMessage `json:"unreadStreams,omitempty"`
	unread        []string
}

type tableRank struct {
	Rank         int    `json:"rank"`
	Address      string `json:"address"`
	State        string `json:"state"`
	Function     string `json:"function,omitempty"`
	SourceUnread bool   `json:"sourceUnread,omitempty"`
	// Sources as sent; sources once checked, on a live rank (a dummy's
	// are ignored).
	Sources json.RawMessage `json:"sources,omitempty"`
	sources []string
}

// runsBU says whether a rank builds events: RU+BU (or no function, Folded) or BU.
func (t *table) runsBU(rank int32) bool {
	return t.live(rank) && t.Ranks[rank].Function != "RU"
}

func (t *table) live(rank int32) bool {
	return t != nil && rank >= 0 && int(rank) < len(t.Ranks) && t.Ranks[rank].State == "live"
}

// Key is the key the builder was started under.
func (b *Builder) Key() string { return b.key }

// Rank is the builder's rank.
func (b *Builder) Rank() int32 {
	b.farm.mu.Lock()
	defer b.farm.mu.Unlock()
	return b.rank
}

// State is the builder's state.
func (b *Builder) State() string {
	b.farm.mu.Lock()
	defer b.farm.mu.Unlock()
	return b.state
}

// Epoch is the epoch of the table the builder runs, and its pending one.
func (b *Builder) Epoch() (epoch, pending int64) {
	b.farm.mu.Lock()
	defer b.farm.mu.Unlock()
	return b.table.epoch(), b.pending.epoch()
}

// Addresses are the ranks' data addresses in the table the builder holds
// (its pending one if it has one).
func (b *Builder) Addresses() []string {
	b.farm.mu.Lock()
	defer b.farm.mu.Unlock()
	t := b.table
	if b.pending != nil {
		t = b.pending
	}
	if t == nil {
		return nil
	}
	out := make([]string, len(t.Ranks))
	for i, r := range t.Ranks {
		out[i] = r.Address
	}
	return out
}

func (t *table) epoch() int64 {
	if t == nil {
		return 0
	}
	return t.Epoch
}

// Requests are the control commands the builder received, in order.
func (b *Builder) Requests() []Request {
	b.farm.mu.Lock()
	defer b.farm.mu.Unlock()
	return slices.Clone(b.requests)
}

// SetToken changes the token the builder expects, as if it had been
// started with another token file.
func (b *Builder) SetToken(token string) {
	b.farm.mu.Lock()
	defer b.farm.mu.Unlock()
	b.opts.Token = token
}

// Fail puts the builder in ERROR with msg as last_error.
func (b *Builder) Fail(msg string) {
	b.farm.mu.Lock()
	defer b.farm.mu.Unlock()
	b.advance(time.Now())
	b.state, b.lastError = Error, msg
}

// LosePeer makes the builder report rank lost, as when its connections to
// that peer reset or time out.
func (b *Builder) LosePeer(rank int32) {
	b.farm.mu.Lock()
	defer b.farm.mu.Unlock()
	b.advance(time.Now())
	b.lost[rank] = true
}

// active: the builder runs a table in a running set.
func (b *Builder) active() bool { return b.state == Running || b.state == Paused }

// role is live or dummy, as the builder's own rank is in the table it
// shows.
func (b *Builder) role() string {
	switch {
	case b.shown == nil:
		return "unconfigured"
	case b.shown.live(b.rank):
		return "live"
	}
	return "dummy"
}

// advance counts the events since the last advance, as eb-builder's
// units count them: a live builder that runs a BU builds EventRate events
// a second while its set builds (RUNNING, connected to every live peer it
// has not lost); while it has lost a peer that runs an RU, every MEP
// misses that source and is dropped; the unit the set follows (the lowest
// live rank it has not lost) drops the events of the lost BUs' chunks.
func (b *Builder) advance(now time.Time) {
	dt := now.Sub(b.last).Seconds()
	b.last = now
	if b.activity() != builderapi.ActivityBuilding || dt <= 0 {
		return
	}
	b.building += dt
	stalled := b.stalledFor
	if b.farm.unreachable[b.key] {
		return // cut off, it cycles on alone and counts no event
	}
	t := b.table
	whole := b.opts.EventRate*dt + b.carry
	n := int64(whole)
	b.carry = whole - float64(n)
	// An unread source's slot is missing from every MEP: dropped, as the
	// builder does by default (--incomplete drop), or delivered flagged.
	lostRU, lostBUs := slices.ContainsFunc(t.Ranks, func(r tableRank) bool { return r.State == "live" && r.SourceUnread }), int64(0)
	for r := range b.lost {
		lostRU = lostRU || (t.live(r) && t.Ranks[r].Function != "BU")
		if t.runsBU(r) {
			lostBUs++
		}
	}
	b.stalledFor = 0
	if t.runsBU(b.rank) {
		switch {
		case lostRU && b.opts.FlagIncomplete:
			b.events, b.incomplete = b.events+n, b.incomplete+n
		case lostRU:
			b.dropped += n
		case b.farm.outputStalled[b.key]:
			b.dropped, b.discarded = b.dropped+n, b.discarded+n
			b.stalledFor = stalled + dt
		default:
			b.events += n
		}
		b.mesh.generated += n
	}
	if b.leads() {
		b.dropped += lostBUs * n
		b.mesh.generated += lostBUs * n
	}
}

// leads: b is the lowest live rank of its table it has not lost, the
// unit whose proposal the set follows.
func (b *Builder) leads() bool {
	for _, r := range b.table.Ranks {
		rank := int32(r.Rank)
		if b.table.live(rank) && !b.lost[rank] {
			return rank == b.rank
		}
	}
	return false
}

// connected: every live peer of b's table it has not lost runs the same
// table in a session (a set starts once all its units have connected).
func (b *Builder) connected() bool {
	for _, r := range b.table.Ranks {
		rank := int32(r.Rank)
		if rank == b.rank || !b.table.live(rank) || b.lost[rank] {
			continue
		}
		p := b.mesh.byRank[rank]
		if p == nil || p.dead || !p.active() || !p.inSession || p.farm.stalled[p.key] || p.table.epoch() != b.table.epoch() {
			return false
		}
	}
	return true
}

// activity is what the builder's data path does: a live unit RUNNING in a
// session builds, one that is not (it could not join, or its data network
// is cut before it started) connects; a started dummy stands by; a paused
// session is paused; anything else is idle.
func (b *Builder) activity() string {
	switch {
	case b.state == Running && b.role() == "dummy":
		return builderapi.ActivityStandby
	case b.state == Running && b.inSession && !b.farm.stalled[b.key] && b.connected():
		return builderapi.ActivityBuilding
	case b.state == Running:
		return builderapi.ActivityConnecting
	case b.state == Paused && b.inSession:
		return builderapi.ActivityPaused
	}
	return builderapi.ActivityIdle
}

// statusDoc is the builder's GET /status document, as the operator
// decodes it.
type statusDoc struct {
	builderapi.Report
}

// numa is the builder's NUMA report: nothing asked, nothing pinned; else
// pinned where asked, its CPUs there unless SetMisaligned says otherwise,
// its RDMA device (if any) there.
func (b *Builder) numa() *builderapi.NUMA {
	n := &builderapi.NUMA{Requested: b.opts.NUMANode}
	node, err := strconv.ParseInt(b.opts.NUMANode, 10, 32)
	if err != nil {
		n.Warning = "emulated builder: no NUMA node asked"
		return n
	}
	n.Node, n.Pinned, n.CPUsLocal, n.MemoryLocal = ptr.To(int32(node)), true, !b.farm.misaligned[b.key], true
	if b.opts.RDMADevice != "" {
		n.DeviceLocal = ptr.To(true)
	}
	if !n.CPUsLocal {
		n.Warning = fmt.Sprintf("emulated: the CPUs it may run on are not all on NUMA node %d", node)
	}
	return n
}

// reachableLostPeers is lost_peers_reachable: while it builds in its
// session, eb-builder dials the data port of each peer it lost and lists
// those that answer (a live process whose data network is up, as is its
// own); nil outside a session, where it dials nobody.
func (b *Builder) reachableLostPeers(lost []int32) *[]int32 {
	if b.table == nil || !b.active() || !b.inSession || !b.table.live(b.rank) {
		return nil
	}
	reached := []int32{}
	for _, r := range lost {
		p := b.mesh.byRank[r]
		if p != nil && !p.dead && p.table != nil && !b.farm.unreachable[b.key] && !b.farm.unreachable[p.key] {
			reached = append(reached, r)
		}
	}
	return &reached
}

// status is the builder's GET /status document, taken under the lock
// (encoded outside it).
func (b *Builder) status() *statusDoc {
	b.advance(time.Now())
	d := &statusDoc{Report: builderapi.Report{Rank: b.rank, State: b.state, Activity: b.activity(), Role: b.role(), Epoch: b.shown.epoch(),
		PendingEpoch: b.pending.epoch(), LostPeers: []int32{}, DataRefusals: noRefusals(), Allowed: allowed(b.state), LastError: b.lastError, NUMA: b.numa()}}
	if t := b.shown; t != nil {
		// Its live peers are up once its set has connected and builds.
		setUp := b.table != nil && b.active() && b.inSession && b.connected() && !b.farm.unreachable[b.key]
		d.Units = int32(len(t.Ranks))
		d.Peers = make([]builderapi.Peer, len(t.Ranks))
		for i, r := range t.Ranks {
			st := "connecting"
			switch {
			case int32(r.Rank) == b.rank:
				st = "self"
			case r.State != "live":
				st = "dummy"
			case b.lost[int32(r.Rank)]:
				st = "lost"
			case setUp:
				st = "up"
			}
			d.Peers[i] = builderapi.Peer{Rank: int32(r.Rank), State: st}
		}
	}
	d.Transport = b.transport(d.Peers)
	for r := range b.lost {
		d.LostPeers = append(d.LostPeers, r)
	}
	slices.Sort(d.LostPeers)
	d.LostPeersReachable = b.reachableLostPeers(d.LostPeers)
	d.EventsBuilt, d.EventsDropped, d.NextEvent, d.BuildingSeconds = b.events, b.dropped, b.mesh.generated, b.building
	d.EventsIncomplete = b.incomplete
	d.MEPsBuilt, d.BytesBuilt = d.EventsBuilt/1000, d.EventsBuilt*b.opts.EventSize
	d.MEPsDiscarded, d.OutputStalledSeconds = b.discarded/1000, b.stalledFor
	if d.Units > 0 { // as if every other unit's MFPs crossed the network, while building
		d.NetworkBytesSent = d.BytesBuilt * int64(d.Units-1) / int64(d.Units)
		d.NetworkBytesReceived, d.NetworkSeconds = d.NetworkBytesSent, d.BuildingSeconds
	}
	if b.state == Running && b.role() == "live" && !b.farm.unreachable[b.key] {
		d.EventsPerSecond = b.opts.EventRate
		d.BytesPerSecond = b.opts.EventRate * float64(b.opts.EventSize)
	}
	return d
}

// metrics is the builder's GET /metrics text, a few of eb-builder's
// metrics (control-api.md): those the status shows.
func (b *Builder) metrics() string {
	d := b.status()
	var out strings.Builder
	metric := func(name, kind, labels string, value any) {
		if labels == "" || strings.HasPrefix(labels, `{state="`+NotReady) {
			fmt.Fprintf(&out, "# TYPE %s %s\n", name, kind)
		}
		fmt.Fprintf(&out, "%s%s %v\n", name, labels, value)
	}
	metric("eb_up", "gauge", "", 1)
	metric("eb_epoch", "gauge", "", d.Epoch)
	for _, st := range []string{NotReady, Ready, Running, Paused, Error} {
		metric("eb_state", "gauge", `{state="`+st+`"}`, map[bool]int{true: 1}[st == d.State])
	}
	metric("eb_events_built_total", "counter", "", d.EventsBuilt)
	metric("eb_events_dropped_total", "counter", "", d.EventsDropped)
	metric("eb_meps_built_total", "counter", "", d.MEPsBuilt)
	metric("eb_bytes_built_total", "counter", "", d.BytesBuilt)
	metric("eb_building_seconds_total", "counter", "", d.BuildingSeconds)
	metric("eb_network_sent_bytes_total", "counter", "", d.NetworkBytesSent)
	metric("eb_network_received_bytes_total", "counter", "", d.NetworkBytesReceived)
	metric("eb_network_transfer_seconds_total", "counter", "", d.NetworkSeconds)
	return out.String()
}

// noRefusals is data_refusals of a builder no stray dial reached: the
// emulation has no data port.
func noRefusals() map[string]int64 {
	return map[string]int64{"key": 0, "epoch": 0, "table": 0, "protocol": 0, "slow": 0}
}

// transport is the builder's report of its transport: the kind alone for
// tcp; for verbs the port and a queue pair per live peer, ready to send
// (RTS) once the peer is up, in error once it is lost, being connected
// (INIT) before.
func (b *Builder) transport(peers []builderapi.Peer) *builderapi.Transport {
	t := &builderapi.Transport{Kind: b.opts.Transport}
	if t.Kind != ebv1.TransportVerbs {
		return t
	}
	// An InfiniBand port: addressed by LID, no GID index.
	t.Device, t.Port, t.GIDIndex, t.PortState, t.LinkLayer = b.opts.RDMADevice, 1, ptr.To[int32](-1), "ACTIVE", "InfiniBand"
	if b.farm.unreachable[b.key] {
		t.PortState = "DOWN"
	}
	qpState := map[string]string{builderapi.PeerUp: "RTS", builderapi.PeerLost: "ERR", "connecting": "INIT"}
	for _, p := range peers {
		if st, ok := qpState[p.State]; ok {
			t.Peers = append(t.Peers, builderapi.QueuePair{Rank: p.Rank, QPState: st})
		}
	}
	return t
}

// allowed are the commands the state machine accepts in a state.
func allowed(state string) []string {
	switch state {
	case NotReady:
		return []string{"configure", "reset"}
	case Ready:
		return []string{"configure", "start", "reset"}
	case Running:
		return []string{"configure", "pause", "stop", "reset"}
	case Paused:
		return []string{"configure", "resume", "stop", "reset"}
	}
	return []string{"reset"}
}

// serve routes /b/<key>/<path> to the builder under key.
func (f *Farm) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/b/")
	key, path, _ := strings.Cut(rest, "/")
	if !ok {
		key = ""
	}
	f.route(w, r, key, "/"+path)
}

// Handler serves the builder under key at the root of an address of its
// own, as eb-builder serves at its pod's IP (a benchmark listening on each
// pod's address); the same builder is also under URL(key).
func (f *Farm) Handler(key string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.route(w, r, key, r.URL.Path) })
}

// route hands a request to the builder under key. Where no builder runs,
// the connection is closed unanswered, as a dead address would.
func (f *Farm) route(w http.ResponseWriter, r *http.Request, key, path string) {
	f.mu.Lock()
	b := f.builders[key]
	f.mu.Unlock()
	if b == nil || b.isDead() {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		http.Error(w, "no builder", http.StatusBadGateway)
		return
	}
	b.serve(w, r, path)
}

func (b *Builder) isDead() bool {
	b.farm.mu.Lock()
	defer b.farm.mu.Unlock()
	return b.dead
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (b *Builder) serve(w http.ResponseWriter, r *http.Request, path string) {
	f := b.farm
	switch path {
	case "/healthz":
		_, _ = io.WriteString(w, "ok\n")
		return
	case "/readyz":
		f.mu.Lock()
		state := b.state
		f.mu.Unlock()
		if state == NotReady || state == Error {
			http.Error(w, state, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
		return
	case "/status":
		f.mu.Lock()
		st := b.status()
		f.mu.Unlock()
		writeJSON(w, http.StatusOK, st)
		return
	}
	if path == "/metrics" {
		f.mu.Lock()
		text := b.metrics()
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = io.WriteString(w, text)
		return
	}
	cmd, ok := strings.CutPrefix(path, "/control/")
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such path: " + path +
			"; expected /status, /metrics, /healthz, /readyz or POST /control/<command>"})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": path + " takes POST only"})
		return
	}

	// Read the body before taking the lock: a table can be large.
	body, err := io.ReadAll(io.LimitReader(r.Body, maxConfigure+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "reading the body: " + err.Error()})
		return
	}
	req, tbl, perr := parseCommand(cmd, body)

	f.mu.Lock()
	code, answer := b.command(cmd, r.Header.Get("Authorization"), req, tbl, perr)
	var epoch int64
	if b.pending != nil {
		epoch = b.pending.Epoch
	} else {
		epoch = b.table.epoch()
	}
	hook := f.onAccept
	f.mu.Unlock()
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	writeJSON(w, code, answer)
	if code == http.StatusOK && hook != nil {
		hook(b, cmd, epoch)
	}
}

// configureBody is what the builder reads of a configure request.
type configureBody struct {
	Rank  *int32 `json:"rank"`
	Table *table `json:"table"`
}

// commands are the commands the builder knows.
var commands = []string{"configure", "start", "pause", "resume", "stop", "reset"}

// parseCommand checks a command and its body (a configure's table); a
// non-nil error is the 404, 400 or 413 to answer once the token is
// checked.
func parseCommand(cmd string, body []byte) (*configureBody, *table, *httpError) {
	switch {
	case !slices.Contains(commands, cmd):
		return nil, nil, &httpError{http.StatusNotFound, fmt.Sprintf("unknown command '%s'; expected one of %s", cmd, strings.Join(commands, ", "))}
	case cmd != "configure" && len(body) > 0:
		return nil, nil, &httpError{http.StatusBadRequest, cmd + " takes no body; send an empty POST"}
	case cmd != "configure":
		return nil, nil, nil
	}
	if len(body) > maxConfigure {
		return nil, nil, &httpError{http.StatusRequestEntityTooLarge, "body over 4 MiB"}
	}
	var c configureBody
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, nil, &httpError{http.StatusBadRequest, "body: " + err.Error()}
	}
	bad := func(format string, a ...any) (*configureBody, *table, *httpError) {
		return nil, nil, &httpError{http.StatusBadRequest, fmt.Sprintf(format, a...)}
	}
	t := c.Table
	switch {
	case c.Rank == nil:
		return bad("rank: missing")
	case t == nil:
		return bad("table: missing")
	case t.Version != tableVersion:
		return bad("table.version '%s': expected %s", t.Version, tableVersion)
	case t.Epoch < 1:
		return bad("table.epoch %d: must be at least 1", t.Epoch)
	case t.Layout != "Folded" && t.Layout != "Unfolded":
		return bad("table.layout '%s': expected Folded or Unfolded", t.Layout)
	case len(t.Ranks) == 0:
		return bad("table.ranks: empty")
	case len(t.Ranks) > maxTableRanks:
		return bad("table.ranks: %d entries; at most %d", len(t.Ranks), maxTableRanks)
	}
	first := map[string]int{}       // the first rank at each address
	streamAt := map[string]string{} // where each stream was first listed
	// streams reads the streams at path (raw as sent): an array of strings.
	streams := func(raw json.RawMessage, path string) ([]string, *httpError) {
		var items []any
		if json.Unmarshal(raw, &items) != nil || items == nil {
			return nil, &httpError{http.StatusBadRequest, path + ": expected an array of stream names"}
		}
		names := make([]string, len(items))
		for j, item := range items {
			name, ok := item.(string)
			if !ok {
				return nil, &httpError{http.StatusBadRequest, path + ": expected an array of stream names"}
			}
			names[j] = name
		}
		return names, nil
	}
	// listed checks the names read at path: stream names, each listed
	// once in the table.
	listed := func(names []string, path string) *httpError {
		for j, name := range names {
			at := fmt.Sprintf("%s[%d]", path, j)
			if !validStreamName(name) {
				return &httpError{http.StatusBadRequest, fmt.Sprintf("%s '%s': expected %s, as the Fabric's endpoints[].streams", at, shown(name), streamNameRule)}
			}
			if was, dup := streamAt[name]; dup {
				return &httpError{http.StatusBadRequest, fmt.Sprintf("%s '%s': also at %s; each stream is read by one RU or listed unread once", at, shown(name), was)}
			}
			streamAt[name] = at
		}
		return nil
	}
	liveRU, liveBU := false, false
	for i, r := range t.Ranks {
		if same, ok := first[r.Address]; ok {
			return bad("table.ranks[%d].address '%s': same as table.ranks[%d].address; every rank needs its own host:port", i, r.Address, same)
		}
		first[r.Address] = i
		if r.State == "live" {
			liveRU = liveRU || r.Function != "BU"
			liveBU = liveBU || r.Function != "RU"
		}
		host, port, err := net.SplitHostPort(r.Address)
		_, perr := strconv.ParseUint(port, 10, 16)
		switch {
		case r.Rank != i:
			return bad("table.ranks[%d].rank %d: must equal its index", i, r.Rank)
		case err != nil || host == "" || perr != nil:
			return bad("table.ranks[%d].address '%s': expected host:port, e.g. run-eb-%d.run-eb:7000", i, r.Address, i)
		case r.State != "live" && r.State != "dummy":
			return bad("table.ranks[%d].state '%s': expected live or dummy", i, r.State)
		case r.State == "dummy":
		case r.SourceUnread && r.Function != "BU":
			return bad("table.ranks[%d].sourceUnread: true on a rank that runs an RU; set function BU (the unit's BU alone), or remove sourceUnread where the rank reads its streams", i)
		case t.Layout == "Folded" && r.Function != "" && r.Function != "RU+BU" && r.Function != "RU" && r.Function != "BU":
			return bad("table.ranks[%d].function '%s': expected RU+BU or none (layout Folded), or RU or BU for a partly unfolded unit", i, r.Function)
		case t.Layout == "Unfolded" && r.Function != "RU" && r.Function != "BU":
			return bad("table.ranks[%d].function '%s': expected RU or BU (layout Unfolded runs a unit's RU and BU on two ranks)", i, r.Function)
		case r.Sources == nil:
		default:
			path := fmt.Sprintf("table.ranks[%d].sources", i)
			sources, err := streams(r.Sources, path)
			if err == nil && len(sources) > 0 && r.Function == "BU" {
				err = &httpError{http.StatusBadRequest, path + ": on a rank that runs no RU (function BU); a BU reads no streams: remove them"}
			}
			if err == nil {
				err = listed(sources, path)
			}
			if err != nil {
				return nil, nil, err
			}
			t.Ranks[i].sources = sources
		}
	}
	if t.UnreadStreams != nil {
		unread, err := streams(t.UnreadStreams, "table.unreadStreams")
		if err == nil {
			err = listed(unread, "table.unreadStreams")
		}
		if err != nil {
			return nil, nil, err
		}
		t.unread = unread
	}
	if *c.Rank < 0 || int(*c.Rank) >= len(t.Ranks) {
		return bad("rank %d: not in the table (ranks 0..%d)", *c.Rank, len(t.Ranks)-1)
	}
	switch {
	case !liveRU:
		return bad("table.ranks: no live rank runs an RU; make at least one rank live")
	case !liveBU:
		return bad("table.ranks: no live rank runs a BU; make at least one rank live")
	}
	return &c, t, nil
}

type httpError struct {
	code int
	msg  string
}

// command runs one command under the farm's lock; the answer is the
// status document on success, else an error document.
func (b *Builder) command(cmd, auth string, c *configureBody, t *table, perr *httpError) (int, any) {
	now := time.Now()
	b.advance(now)
	req := Request{Command: cmd, Rank: -1}
	if t != nil {
		req.Epoch, req.Rank = t.Epoch, *c.Rank
	}
	answer := func(code int, msg string) (int, any) {
		req.Status = code
		b.requests = append(b.requests, req)
		if code == http.StatusOK {
			return code, b.status()
		}
		out := map[string]any{"error": msg}
		if code == http.StatusConflict {
			out["state"], out["allowed"] = b.state, allowed(b.state)
		}
		return code, out
	}

	token, ok := strings.CutPrefix(auth, "Bearer ")
	switch {
	case b.opts.Token == "":
		return answer(http.StatusForbidden, "the control API is disabled: start eb-builder with --token-file or EB_CONTROL_TOKEN")
	case !ok || auth == "":
		return answer(http.StatusUnauthorized, "missing Authorization: Bearer <token>")
	case subtle.ConstantTimeCompare([]byte(token), []byte(b.opts.Token)) != 1:
		return answer(http.StatusUnauthorized, "wrong bearer token")
	}
	req.Authorized = true
	if perr != nil {
		return answer(perr.code, perr.msg)
	}
	if !slices.Contains(allowed(b.state), cmd) {
		return answer(http.StatusConflict, fmt.Sprintf("cannot %s in state %s; allowed: %s", cmd, b.state, strings.Join(allowed(b.state), ", ")))
	}

	m := b.mesh
	switch cmd {
	case "configure":
		if b.opts.Rank >= 0 && *c.Rank != b.opts.Rank {
			return answer(http.StatusBadRequest, fmt.Sprintf("rank %d: this builder was started with --rank %d", *c.Rank, b.opts.Rank))
		}
		held := b.table
		if b.pending != nil {
			held = b.pending
		}
		switch {
		case held != nil && t.Epoch < held.Epoch:
			return answer(http.StatusConflict, fmt.Sprintf("table.epoch %d: older than epoch %d, which this builder holds; epochs only go forward", t.Epoch, held.Epoch))
		case held != nil && t.Epoch == held.Epoch && !sameTable(t, held):
			return answer(http.StatusConflict, fmt.Sprintf("table.epoch %d: this builder holds another table of that epoch", t.Epoch))
		case held != nil && t.Epoch == held.Epoch:
			return answer(http.StatusOK, "") // the same table again
		}
		if b.active() && b.inSession && len(t.Ranks) != len(b.table.Ranks) {
			return answer(http.StatusConflict, fmt.Sprintf("the table has %d ranks, the running one %d; the number of ranks cannot change while running: stop the set first",
				len(t.Ranks), len(b.table.Ranks)))
		}
		if b.rank != *c.Rank && m.byRank[b.rank] == b {
			delete(m.byRank, b.rank)
		}
		b.rank = *c.Rank
		m.byRank[b.rank] = b
		if b.active() {
			b.pending = t
			m.switchEpochs(now)
		} else {
			b.table, b.shown, b.pending, b.lost, b.state, b.inSession = t, t, nil, map[int32]bool{}, Ready, false
		}
	case "start":
		b.state = Running
		b.inSession = b.table.live(b.rank) && !b.farm.unreachable[b.key]
		m.switchEpochs(now)
	case "pause", "stop":
		// The whole running set stops at the same event.
		to := Paused
		if cmd == "stop" {
			to = Ready
		}
		for _, p := range m.byRank {
			if !p.dead && p.table.epoch() == b.table.epoch() && (p.state == Running || (cmd == "stop" && p.state == Paused)) {
				p.advance(now)
				p.state = to
				p.inSession = p.inSession && to == Paused
			}
		}
		b.state = to
		b.inSession = b.inSession && to == Paused
	case "resume":
		b.state = Running
		m.switchEpochs(now)
	case "reset":
		// A unit reset in its session leaves its set: its peers lose it.
		if b.inSession && b.active() {
			b.lostBy(now)
		}
		b.state, b.table, b.pending, b.lastError, b.inSession = NotReady, nil, nil, "", false
	}
	return answer(http.StatusOK, "")
}

// sameTable compares what the builder reads of two tables.
func sameTable(a, b *table) bool {
	return a.Version == b.Version && a.Epoch == b.Epoch && a.Layout == b.Layout && slices.Equal(a.unread, b.unread) &&
		slices.EqualFunc(a.Ranks, b.Ranks, func(x, y tableRank) bool {
			return x.Rank == y.Rank && x.Address == y.Address && x.State == y.State && x.Function == y.Function &&
				x.SourceUnread == y.SourceUnread && slices.Equal(x.sources, y.sources)
		})
}

// What the builder takes for a stream name (builder/src/base/stream_name.hpp).
const (
	maxStreamName  = 128
	streamNameRule = "a stream name of 1 to 128 characters, letters, digits and . _ : / - (starting with a letter or digit)"
)

// shown is a string value as the builder's messages show it: cut to its
// first 80 bytes, then "...", when longer.
func shown(value string) string {
	const longest = 80
	if len(value) > longest {
		return value[:longest] + "..."
	}
	return value
}

func validStreamName(name string) bool {
	if name == "" || len(name) > maxStreamName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._:/-", rune(c))) {
			return false
		}
	}
	return true
}

// switchEpochs switches every RUNNING builder holding a pending table to
// it, once every unit live in both its tables holds that table and runs
// (the end of the first cycle in which they all hold it). Units that
// become dummies stand by; units that become live join; lost peers reset,
// but for joiners that cannot join (failedJoiners).
func (m *mesh) switchEpochs(now time.Time) {
	for changed := true; changed; {
		changed = false
		var switching []*Builder
		for _, b := range m.byRank {
			if !b.dead && b.pending != nil && b.state == Running && m.allHold(b.table, b.pending) {
				switching = append(switching, b)
			}
		}
		// Who is in a session of its own as they switch (before any does).
		inSession := map[*Builder]bool{}
		for _, b := range switching {
			inSession[b] = b.inSession
		}
		for _, b := range switching {
			changed = true
			b.advance(now)
			to := b.pending
			b.lost = m.failedJoiners(b, to, inSession)
			b.table, b.shown, b.pending = to, to, nil
			b.inSession = to.live(b.rank) && (b.inSession || !b.farm.unreachable[b.key])
		}
	}
}

// failedJoiners are the ranks that join b's set when it switches to `to`
// (live there, and a dummy before or lost by b) and cannot: their builder
// is dead or unreachable (eb-builder gives up on them after
// --join-timeout-ms), or it switches too in a session of its own while b
// is in one (both went on building, at different places in the event
// stream: eb-builder refuses such a joiner, out of step, and it refuses
// them). An unreachable b cannot reach them: in its own session it goes
// on alone without them all; joining, it loses nobody (it is the one that
// cannot join, and waits).
func (m *mesh) failedJoiners(b *Builder, to *table, inSession map[*Builder]bool) map[int32]bool {
	failed := map[int32]bool{}
	if !to.live(b.rank) {
		return failed
	}
	cut := b.farm.unreachable[b.key]
	for _, r := range to.Ranks {
		rank := int32(r.Rank)
		if rank == b.rank || !to.live(rank) || (b.table.live(rank) && !b.lost[rank]) {
			continue
		}
		p := m.byRank[rank]
		switch {
		case cut:
			failed[rank] = inSession[b]
		case p != nil && (p.dead || b.farm.unreachable[p.key] || (inSession[b] && inSession[p])):
			failed[rank] = true
		}
	}
	maps.DeleteFunc(failed, func(_ int32, f bool) bool { return !f })
	return failed
}

// allHold: every unit live in both from and to holds to (pending, or
// already switched) and is RUNNING.
func (m *mesh) allHold(from, to *table) bool {
	for _, r := range to.Ranks {
		rank := int32(r.Rank)
		if !to.live(rank) || !from.live(rank) {
			continue
		}
		p := m.byRank[rank]
		if p == nil || p.dead || p.state != Running {
			return false
		}
		if p.table.epoch() < to.Epoch && p.pending.epoch() != to.Epoch {
			return false
		}
	}
	return true
}

// StartPod plays the kubelet starting a builder pod's container and
// eb-builder starting in it: the command line must be a controlled one
// (eb-builder with --rank, --http-port and --token-file, no --peers), and
// --token-file must name a file of the Secret volume mounted there, which
// must be secret. The builder is started under key (e.g. the pod's UID) in
// the mesh of the pod's namespace and run label.
func (f *Farm) StartPod(key string, pod *corev1.Pod, secret *corev1.Secret, runLabel string) (*Builder, error) {
	if len(pod.Spec.Containers) == 0 {
		return nil, errors.New("pod has no container")
	}
	c := pod.Spec.Containers[0]
	if !slices.Equal(c.Command, []string{"eb-builder"}) {
		return nil, fmt.Errorf("command %q, want eb-builder", c.Command)
	}
	o := Options{Rank: -1, Mesh: pod.Namespace + "/" + pod.Labels[runLabel]}
	var tokenFile string
	for i := 0; i < len(c.Args); i++ {
		flag := c.Args[i]
		if !strings.HasPrefix(flag, "--") {
			return nil, fmt.Errorf("argument %q is not a flag", flag)
		}
		if i+1 >= len(c.Args) {
			return nil, fmt.Errorf("flag %s has no value", flag)
		}
		val := c.Args[i+1]
		i++
		switch flag {
		case "--rank":
			r, err := strconv.ParseInt(val, 10, 32)
			if err != nil || r < 0 {
				return nil, fmt.Errorf("--rank %q", val)
			}
			o.Rank = int32(r)
		case "--token-file":
			tokenFile = val
		case "--transport":
			o.Transport = ebv1.Transport(val)
			if o.Transport != ebv1.TransportTCP && o.Transport != ebv1.TransportVerbs {
				return nil, fmt.Errorf("--transport %q: expected tcp or verbs", val)
			}
		case "--rdma-device":
			o.RDMADevice = val
		case "--numa-node":
			o.NUMANode = val
		case "--incomplete":
			if val != "drop" && val != "flag" {
				return nil, fmt.Errorf("--incomplete %q: expected drop or flag", val)
			}
			o.FlagIncomplete = val == "flag"
		case "--peers", "--dummies":
			return nil, fmt.Errorf("%s: a self-configured builder; the emulation only runs controlled ones", flag)
		}
	}
	switch {
	case tokenFile != "":
		tok, err := readMounted(pod, c, secret, tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file %s: %w", tokenFile, err)
		}
		// eb-builder exits at start on a token file with no token.
		if o.Token = strings.TrimSpace(tok); o.Token == "" {
			return nil, fmt.Errorf("--token-file '%s': the file is empty; write the token into it", tokenFile)
		}
	default:
		for _, e := range c.Env {
			if e.Name == "EB_CONTROL_TOKEN" {
				o.Token = strings.TrimSpace(e.Value)
			}
		}
	}
	// eb-builder reads its placement from the environment unless its flags give it.
	for _, e := range c.Env {
		switch {
		case e.Name == "EB_NUMA_NODE" && o.NUMANode == "":
			o.NUMANode = e.Value
		case e.Name == "EB_RDMA_DEVICE" && o.RDMADevice == "":
			o.RDMADevice = e.Value
		}
	}
	return f.Start(key, o), nil
}

// readMounted reads path in the container as the kubelet lays out a Secret
// volume: the mount's directory holds one file per item (or per key).
func readMounted(pod *corev1.Pod, c corev1.Container, secret *corev1.Secret, path string) (string, error) {
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			s := v.Secret
			switch {
			case s == nil:
				return "", fmt.Errorf("volume %s is not a Secret", v.Name)
			case secret == nil || s.SecretName != secret.Name:
				return "", fmt.Errorf("volume %s mounts Secret %q, which does not exist", v.Name, s.SecretName)
			case !m.ReadOnly:
				return "", fmt.Errorf("mount %s is not read-only", m.MountPath)
			}
			key := rel
			if len(s.Items) > 0 {
				key = ""
				for _, it := range s.Items {
					if it.Path == rel {
						key = it.Key
					}
				}
			}
			data, ok := secret.Data[key]
			if !ok || key == "" {
				return "", fmt.Errorf("no file %s in Secret %s (keys %v)", rel, secret.Name, slices.Sorted(maps.Keys(secret.Data)))
			}
			return strings.TrimSpace(string(data)), nil
		}
		return "", fmt.Errorf("mount %s names no volume of the pod", m.MountPath)
	}
	return "", errors.New("no volume is mounted there")
}
