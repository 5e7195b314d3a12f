package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Transport is how builder units exchange fragments.
// +kubebuilder:validation:Enum=tcp;verbs
type Transport string

const (
	// TransportTCP moves data over TCP sockets; runs anywhere.
	TransportTCP Transport = "tcp"
	// TransportVerbs moves data with RDMA (libibverbs RC) on each unit's
	// NIC: the endpoint's rdmaDevice, reached through spec.resources.rdma.
	TransportVerbs Transport = "verbs"
)

// Layout says where a unit's readout unit (RU) and builder unit (BU) run.
// +kubebuilder:validation:Enum=Folded;Unfolded
type Layout string

const (
	// LayoutFolded runs RU and BU of a unit on one endpoint.
	LayoutFolded Layout = "Folded"
	// LayoutUnfolded runs them on two endpoints: the first half of the
	// live ranks run the units' RUs, the second half their BUs (rank
	// table ranks[].function RU or BU).
	LayoutUnfolded Layout = "Unfolded"
)

// FailurePolicy is what a run does when a unit fails and no spare is left.
// +kubebuilder:validation:Enum=RunDegraded;Stop
type FailurePolicy string

const (
	// FailureRunDegraded makes the failed rank a dummy and carries on with
	// the units left.
	FailureRunDegraded FailurePolicy = "RunDegraded"
	// FailureStop stops the run: every builder pod is deleted.
	FailureStop FailurePolicy = "Stop"
)

// NUMAPolicy is what a run does with a unit whose builder does not run on
// its endpoint's NUMA node (CPUs, memory or RDMA device elsewhere).
// +kubebuilder:validation:Enum=Report;FailOver
type NUMAPolicy string

const (
	// NUMAReport says so in the NUMAAligned condition and the rank's
	// status.ranks[].numa, and the unit builds on.
	NUMAReport NUMAPolicy = "Report"
	// NUMAFailOver also moves the unit to a spare, as a planned move
	// (failure reason NUMAMisaligned: the set switches cleanly); with no
	// spare left it stays where it is and builds on.
	NUMAFailOver NUMAPolicy = "FailOver"
)

// RunState is the state a run's builders are driven to.
// +kubebuilder:validation:Enum=Running;Paused;Stopped
type RunState string

const (
	// StateRunning: the builders are configured and started (resumed).
	StateRunning RunState = "Running"
	// StatePaused: running builders are paused at a common event; they
	// keep their table and resume where they stopped.
	StatePaused RunState = "Paused"
	// StateStopped: the builders are stopped (READY, table kept); their
	// pods stay. Starting again goes on with the next events.
	StateStopped RunState = "Stopped"
)

// OutputStallPolicy is what a run does with a unit whose BU output has
// taken no MEP for spec.outputStallAfter while building: its consumer is
// gone or stuck, so the BU drops every MEP where it built it (the set is
// never held up, but those events are lost).
// +kubebuilder:validation:Enum=Report;MoveBU
type OutputStallPolicy string

const (
	// OutputStallReport says so in the OutputsFlowing condition.
	OutputStallReport OutputStallPolicy = "Report"
	// OutputStallMoveBU also moves the unit's BU alone to a warm spare
	// on another server, as a planned move (reason OutputStalled): the
	// unit's RU reads on where its fibres are, the spare builds its share
	// of the events into its own consumer (a partly unfolded unit). With
	// no spare left it stays where it is.
	OutputStallMoveBU OutputStallPolicy = "MoveBU"
)

// EventBuilderRunSpec is the desired state of an event-building run.
// +kubebuilder:validation:XValidation:rule="!has(self.builder.source) || !(has(self.builder.source.shm) || has(self.builder.source.file)) || (has(self.builder.output) && !has(self.builder.output.check))",message="spec.builder.output.check verifies events against the generator's fragments, which a readout driver's or a file's need not follow: with spec.builder.source.shm or spec.builder.source.file set spec.builder.output.shm (a consumer that knows the data) or spec.builder.output.discard"
// +kubebuilder:validation:XValidation:rule="!has(self.numaPolicy) || self.numaPolicy != 'FailOver' || has(self.fabricRef)",message="spec.numaPolicy FailOver moves a misaligned unit to a spare endpoint, and NUMA nodes and spares come from a Fabric; set spec.fabricRef, or spec.numaPolicy to Report"
// +kubebuilder:validation:XValidation:rule="!has(self.outputStallPolicy) || self.outputStallPolicy != 'MoveBU' || has(self.fabricRef)",message="spec.outputStallPolicy MoveBU moves a stalled unit's BU to a spare endpoint, and spares come from a Fabric; set spec.fabricRef, or spec.outputStallPolicy to Report"
// +kubebuilder:validation:XValidation:rule="!has(self.spares) || self.spares == 0 || has(self.fabricRef)",message="spec.spares: warm spares are endpoints of a Fabric; set spec.fabricRef, or spec.spares to 0"
// +kubebuilder:validation:XValidation:rule="!has(self.builder.transport) || self.builder.transport != 'verbs' || (has(self.resources) && (has(self.resources.rdma) || has(self.resources.claims)))",message="spec.builder.transport verbs needs the NIC's /dev/infiniband devices in the pod: set spec.resources.rdma, the RDMA device plugin's resource (e.g. rdma/hca_numa{numa}, with spec.resources.cpus and spec.resources.memory), or spec.resources.claims (the DRA driver's); or set spec.builder.transport to tcp"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.claims) || has(self.fabricRef)",message="spec.resources.claims asks for each endpoint's own NIC and readout streams, which a Fabric lists; set spec.fabricRef, or use spec.resources.rdma and spec.resources.readout"
// +kubebuilder:validation:XValidation:rule="has(self.fabricRef) || !has(self.resources) || !((has(self.resources.rdma) && self.resources.rdma.contains('{numa}')) || (has(self.resources.network) && self.resources.network.contains('{numa}')) || (has(self.resources.readout) && self.resources.readout.resource.contains('{numa}')))",message="spec.resources: {numa} in rdma, readout.resource or network stands for the endpoint's NUMA node, which only a run on a Fabric has; set spec.fabricRef, or name one resource without {numa}"
// +kubebuilder:validation:XValidation:rule="!has(self.builder.tcpStreams) || self.builder.tcpStreams == 1 || !has(self.builder.transport) || self.builder.transport != 'verbs'",message="spec.builder.tcpStreams slices data over TCP connections; with spec.builder.transport verbs the HCA moves it: drop tcpStreams or set transport to tcp"
// +kubebuilder:validation:XValidation:rule="!has(self.builder.receiveWindow) || self.builder.receiveWindow == 0 || (has(self.builder.transport) && self.builder.transport == 'verbs')",message="spec.builder.receiveWindow paces the verbs transport's receives and credits; over TCP data moves only when waited for: set spec.builder.transport to verbs or drop receiveWindow"
// +kubebuilder:validation:XValidation:rule="!has(self.builder.dataThreads) || !has(self.resources) || !has(self.resources.cpus) || self.builder.dataThreads <= self.resources.cpus",message="spec.builder.dataThreads is more than spec.resources.cpus: more threads than CPUs take turns on them; lower dataThreads or raise cpus"
type EventBuilderRunSpec struct {
	// units is the number of event-builder units. Without a fabric each
	// unit is one pod and one rank (0..units-1), or with layout Unfolded
	// two (its RU on rank u, its BU on rank units+u), scheduled anywhere;
	// on a fabric the ranks come from the cabling (see fabricRef).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	// +required
	Units int32 `json:"units"`

	// fabricRef names the cluster-scoped Fabric the run is planned on:
	// ranks follow the switch ports (leaf x portsPerLeaf + port), ports
	// without a live unit are dummy ranks, and each unit's pod runs on its
	// endpoint's node and NUMA domain. Without it, units are ranks and
	// pods go wherever the scheduler puts them.
	// +optional
	FabricRef *FabricReference `json:"fabricRef,omitempty"`

	// spares is the number of warm spare endpoints (a spare server is two)
	// held for failover. Needs fabricRef.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	// +optional
	Spares int32 `json:"spares,omitempty"`

	// layout: Folded (RU and BU on one endpoint) or Unfolded (two
	// endpoints per unit: the first half of the live ranks run the units'
	// RUs, the second half their BUs; without a fabric, 2 x units ranks).
	// +kubebuilder:default=Folded
	// +optional
	Layout Layout `json:"layout,omitempty"`

	// failurePolicy applies when a unit fails and no spare is left:
	// RunDegraded carries on without it, Stop deletes every builder pod.
	// +kubebuilder:default=RunDegraded
	// +optional
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`

	// numaPolicy applies to a unit whose builder does not run on its
	// endpoint's NUMA node (status.ranks[].numa, condition NUMAAligned):
	// Report says so; FailOver also moves the unit to a spare. Needs
	// fabricRef for FailOver.
	// +kubebuilder:default=Report
	// +optional
	NUMAPolicy NUMAPolicy `json:"numaPolicy,omitempty"`

	// outputStallPolicy applies to a unit whose BU output has taken no
	// MEP for outputStallAfter while building (condition OutputsFlowing):
	// Report says so; MoveBU also moves the BU alone to a spare, its RU
	// reading on. Needs fabricRef for MoveBU.
	// +kubebuilder:default=Report
	// +optional
	OutputStallPolicy OutputStallPolicy `json:"outputStallPolicy,omitempty"`

	// outputStallAfter: how long a BU's output may take no MEP, while the
	// unit builds, before outputStallPolicy applies. Default 60s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s') && duration(self) <= duration('1h')",message="spec.outputStallAfter must be between 5s and 1h"
	// +optional
	OutputStallAfter *metav1.Duration `json:"outputStallAfter,omitempty"`

	// state the builders are driven to through their control API:
	// Running (configure and start, or resume), Paused (pause) or
	// Stopped (stop; the pods stay).
	// +kubebuilder:default=Running
	// +optional
	State RunState `json:"state,omitempty"`

	// builder configures the builder process of every unit.
	// +required
	Builder BuilderSpec `json:"builder"`

	// runNumber identifies the data taking run, as the experiment's run
	// control numbers it; shown in status, and given to the builder as
	// EB_RUN_NUMBER.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RunNumber *int64 `json:"runNumber,omitempty"`

	// partition names the detector partition this run reads (e.g.
	// "LHCb" or "VELO"); shown in status, and given to the builder as
	// EB_PARTITION.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-_A-Za-z0-9]*[A-Za-z0-9])?$`
	// +optional
	Partition string `json:"partition,omitempty"`

	// minEventRate is the floor, in events per second summed over the
	// run's builders, below which the chart's alert
	// EventBuilderEventRateLow fires while the run is Running or Degraded
	// (the operator exports it as eb_operator_run_min_event_rate). Unset:
	// no floor.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinEventRate *int64 `json:"minEventRate,omitempty"`

	// resources of every unit's builder container. With cpus and memory
	// set the pod is Guaranteed (requests = limits, whole CPUs), which the
	// kubelet's static CPU and Topology managers need to pin it to one
	// NUMA node.
	// +optional
	Resources UnitResources `json:"resources,omitempty"`

	// tolerations of every builder pod, for farm nodes tainted for the
	// event builder alone (e.g. daq.io/eventbuilder=true:NoSchedule).
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// FabricReference names a Fabric.
type FabricReference struct {
	// name of the Fabric.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// UnitResources are the resources of one unit. In rdma, readout.resource
// and network, {numa} stands for the NUMA id of the unit's endpoint: the
// RDMA shared device plugin advertises no NUMA topology, so one resource
// (and one Multus network) per NUMA node is how a unit gets the NIC local
// to it.
// +kubebuilder:validation:XValidation:rule="has(self.cpus) == has(self.memory)",message="spec.resources.cpus and spec.resources.memory go together (Guaranteed QoS with whole CPUs); set both or neither"
// +kubebuilder:validation:XValidation:rule="!(has(self.hugepages) || has(self.rdma)) || has(self.cpus)",message="spec.resources: hugepages and rdma are for pinned Guaranteed units; set spec.resources.cpus and spec.resources.memory too"
// +kubebuilder:validation:XValidation:rule="!has(self.claims) || !(has(self.rdma) || has(self.readout))",message="spec.resources.claims gives each unit its NIC and readout streams through DRA, in place of the device plugins' spec.resources.rdma and spec.resources.readout; set one or the other"
type UnitResources struct {
	// cpus is the number of whole CPUs (requests = limits).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	// +optional
	CPUs int32 `json:"cpus,omitempty"`

	// memory of the builder container (requests = limits).
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// hugepages for the builder's buffers, mounted at /dev/hugepages.
	// +optional
	Hugepages *Hugepages `json:"hugepages,omitempty"`

	// rdma is the extended resource of the unit's RDMA NIC, one per unit,
	// e.g. rdma/hca_numa{numa}: the RDMA device plugin puts the NIC's
	// /dev/infiniband devices in the pod. Transport verbs needs it.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[-A-Za-z0-9_.{}]+$`
	// +optional
	RDMA string `json:"rdma,omitempty"`

	// readout is the extended resource of the readout cards a unit reads:
	// asked for by its readout driver container (spec.builder.source.shm),
	// else by the builder.
	// +optional
	Readout *ReadoutResource `json:"readout,omitempty"`

	// network is the Multus network (NetworkAttachmentDefinition, "name"
	// or "namespace/name") attached to every unit as interface eb0, e.g.
	// ib-numa{numa}.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[-a-z0-9.{}]+$`
	// +optional
	Network string `json:"network,omitempty"`

	// claims gives every unit its endpoint's RDMA NIC (rdmaDevice) and
	// readout streams through Dynamic Resource Allocation (resource.k8s.io/v1,
	// the chart's draDriver), aligned as alignOn says, in place of rdma and
	// readout (the device plugins'): the scheduler then places a pod only
	// where such a set exists, and condition DevicesAllocated says why not.
	// Needs spec.fabricRef.
	// +optional
	Claims *DeviceClaims `json:"claims,omitempty"`
}

// DeviceClaims asks for a unit's devices through DRA.
type DeviceClaims struct {
	// alignOn is the attribute the NIC and the readout streams of a unit
	// must share: PCIeRoot (resource.kubernetes.io/pcieRoot, one root
	// complex: DMA between card and NIC never crosses the socket's
	// interconnect) or NUMANode (resource.kubernetes.io/numaNode, for
	// servers whose cards and NICs are on one socket but not one root).
	// +kubebuilder:default=PCIeRoot
	// +optional
	AlignOn DeviceAlignment `json:"alignOn,omitempty"`
}

// DeviceAlignment is what a unit's devices share.
// +kubebuilder:validation:Enum=PCIeRoot;NUMANode
type DeviceAlignment string

const (
	AlignPCIeRoot DeviceAlignment = "PCIeRoot"
	AlignNUMANode DeviceAlignment = "NUMANode"
)

// Hugepages asks for huge pages of one size.
type Hugepages struct {
	// pageSize: 2Mi or 1Gi.
	// +kubebuilder:validation:Enum="2Mi";"1Gi"
	// +required
	PageSize string `json:"pageSize"`

	// size is the total amount, a multiple of pageSize.
	// +required
	Size resource.Quantity `json:"size"`
}

// ReadoutResource is the extended resource of readout cards (the
// readout-card device plugin's, one per NUMA node, whose devices are the
// streams the cards read).
type ReadoutResource struct {
	// resource name, e.g. daq.io/tell40-numa{numa}.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[-A-Za-z0-9_.{}]+$`
	// +required
	Resource string `json:"resource"`

	// count of devices per unit where the Fabric's endpoint lists no
	// streams; with a readout driver (spec.builder.source.shm) on an
	// endpoint with streams, the driver asks for one per stream.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	Count int32 `json:"count,omitempty"`
}

// BuilderSpec configures the builder container and process. A field
// tagged ebflag is a builder setting passed, when set, as that eb-builder
// flag (a duration in the flag's unit, -ms or -us): adding one takes the
// field here and the flag in the builder's flag table, and a test holds
// the field's range and default against the flag's (builderpod).
type BuilderSpec struct {
	// image of the builder; it must provide the eb-builder binary on PATH.
	// +kubebuilder:validation:MinLength=1
	// +required
	Image string `json:"image"`

	// imagePullPolicy of the builder container.
	// +kubebuilder:validation:Enum=Always;Never;IfNotPresent
	// +kubebuilder:default=IfNotPresent
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// transport between units: tcp, or verbs (RDMA, libibverbs RC; needs
	// spec.resources.rdma). A verbs builder runs as root with the one
	// capability IPC_LOCK, to register (pin) its buffers for RDMA.
	// +kubebuilder:default=tcp
	// +optional
	Transport Transport `json:"transport,omitempty"`

	// packingFactor is the number of consecutive fragments of one source
	// packed into one multi-fragment packet (MFP).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1000
	// +optional
	PackingFactor int32 `json:"packingFactor,omitempty"`

	// source is where fragments come from; the generator by default.
	// +kubebuilder:default={generator:{}}
	// +optional
	Source *SourceSpec `json:"source,omitempty"`

	// output is where built events go: checked in the builder by default.
	// +kubebuilder:default={check:{}}
	// +optional
	Output *OutputSpec `json:"output,omitempty"`

	// incompleteEvents: what a BU does with an event missing the fragment
	// of a source lost in the cycle, or of a unit whose readout fibres
	// went with a failed server (its source unread until the Fabric shows
	// them re-cabled), or built without a detector stream that no RU reads
	// since a failure (the rank table's unreadStreams): Drop it (counted
	// in events dropped) or Flag it (delivered, marked incomplete, counted
	// as such).
	// +kubebuilder:default=Drop
	// +optional
	IncompleteEvents IncompletePolicy `json:"incompleteEvents,omitempty"`

	// peerTimeout: a peer whose data goes unacknowledged, or whose process
	// shows no sign of life, this long is lost (eb-builder
	// --peer-timeout-ms). Default 1s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('60s')",message="spec.builder.peerTimeout must be between 100ms and 60s"
	// +optional
	PeerTimeout *metav1.Duration `json:"peerTimeout,omitempty" ebflag:"--peer-timeout-ms"`

	// joinTimeout: a rank that joins a running set (a spare made live, a
	// lost rank taken back) and is not connected to every unit this long
	// after the switch is lost (eb-builder --join-timeout-ms). Default 5s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('300s')",message="spec.builder.joinTimeout must be between 100ms and 300s"
	// +optional
	JoinTimeout *metav1.Duration `json:"joinTimeout,omitempty" ebflag:"--join-timeout-ms"`

	// busyPoll: a unit waiting for data looks again for this long, yielding
	// the core between looks, before it sleeps (eb-builder --busy-poll-us;
	// Linux's net.core.busy_poll, done in the unit). Longer shortens each
	// wait on cores of its own; 0s never spins, for cores it shares.
	// Default 300us.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('10ms')",message="spec.builder.busyPoll must be between 0s and 10ms"
	// +optional
	BusyPoll *metav1.Duration `json:"busyPoll,omitempty" ebflag:"--busy-poll-us"`

	// dataThreads: the threads that move a unit's data over TCP, a
	// phase's send and receive on two at once (eb-builder --data-threads;
	// the HCA moves it over verbs). Default: the CPUs the unit may use,
	// at most 2; its CPU limit (spec.resources.cpus) and cpuset count, so
	// it is never more than spec.resources.cpus.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	DataThreads *int32 `json:"dataThreads,omitempty" ebflag:"--data-threads"`

	// tcpStreams: TCP connections per pair of units and direction; each
	// MFP goes in that many slices, copied on as many data threads at once
	// (eb-builder --tcp-streams). One TCP stream moves what one core copies,
	// about 30 Gb/s: a 100-200 Gb/s NIC over TCP needs several, with
	// dataThreads up to twice as many. Every unit of the run gets the same
	// value. Default 1. Not with transport verbs, where the HCA moves the data.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	// +optional
	TCPStreams *int32 `json:"tcpStreams,omitempty" ebflag:"--tcp-streams"`

	// receiveWindow: over verbs, the phases ahead a BU posts its MFP
	// receives, each with its credit, so an RU runs at most that many
	// phases ahead of its BU (eb-builder --receive-window). Without a
	// barrier units whose MFPs differ in size drift apart, and a BU open
	// to a whole cycle takes two MFPs on its link at once: on a simulated
	// 163-server fat tree 1 builds about twice what 0 does. Default 0, a
	// cycle's receives at once. Only with transport verbs.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	ReceiveWindow *int32 `json:"receiveWindow,omitempty" ebflag:"--receive-window"`
}

// IncompletePolicy is what a BU does with an event missing a lost source
// or stream.
// +kubebuilder:validation:Enum=Drop;Flag
type IncompletePolicy string

const (
	IncompleteDrop IncompletePolicy = "Drop"
	IncompleteFlag IncompletePolicy = "Flag"
)

// SourceSpec selects the data source of the readout units: exactly one.
// +kubebuilder:validation:XValidation:rule="(has(self.generator) ? 1 : 0) + (has(self.shm) ? 1 : 0) + (has(self.file) ? 1 : 0) == 1",message="spec.builder.source must name exactly one data source: set spec.builder.source.generator, spec.builder.source.shm or spec.builder.source.file"
type SourceSpec struct {
	// generator synthesises fragments in the builder itself.
	// +optional
	Generator *GeneratorSource `json:"generator,omitempty"`

	// shm: each RU reads the MFPs a readout driver writes into a
	// shared-memory ring, the driver running as a container of the unit's
	// pod, started before the builder (on a farm the readout cards'
	// driver; eb-readout-emulator stands in for it where there are no
	// cards).
	// +optional
	Shm *ShmSource `json:"shm,omitempty"`

	// file: each RU replays recorded MFPs from a file on a volume (e.g.
	// MFPs an eb-readout-emulator --file wrote, or a recorded run's).
	// +optional
	File *FileSource `json:"file,omitempty"`
}

// FileSource is a file of MFPs per rank on a PersistentVolumeClaim, mounted
// read-only in every builder pod at /var/lib/eventbuilder/source.
type FileSource struct {
	// claimName of the PersistentVolumeClaim holding the files, in the
	// run's namespace; it must allow every node of the run to mount it
	// (ReadOnlyMany, or a node-local volume per server).
	// +kubebuilder:validation:MinLength=1
	// +required
	ClaimName string `json:"claimName"`

	// path of a rank's file in the volume; {rank} stands for the rank,
	// whose source id its MFPs must carry, e.g. run255003/source-{rank}.mfp.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="spec.builder.source.file.path is relative to the volume: no leading '/' and no '..'"
	// +required
	Path string `json:"path"`
}

// ShmSource is the readout driver's ring and container.
type ShmSource struct {
	// ringMiB is the size of the MFP ring the driver creates (given to it
	// as EB_MFP_RING_MIB): it must hold one MFP per live BU and one more.
	// It lives in the pod's memory-backed /dev/shm, charged to the driver
	// container, whose memory limit must cover it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +kubebuilder:default=64
	// +optional
	RingMiB int32 `json:"ringMiB,omitempty"`

	// driver is the readout driver container (operator/README.md,
	// "Production data flow", says what it is given).
	// +required
	Driver SideContainer `json:"driver"`
}

// ShmOutput is the BU's MEP ring and the consumer that reads it.
type ShmOutput struct {
	// ringMiB is the size of the MEP ring the builder creates (eb-builder
	// --ring-mib); it lives in the pod's memory-backed /dev/shm, charged
	// to the builder container (spec.resources.memory must cover it).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +kubebuilder:default=64
	// +optional
	RingMiB int32 `json:"ringMiB,omitempty"`

	// consumer is the container that reads the ring (on a farm the HLT's
	// input; eb-consumer checks every event byte for byte).
	// +required
	Consumer SideContainer `json:"consumer"`
}

// SideContainer is a container the operator runs beside the builder in
// each unit's pod, sharing its /dev/shm, with the unit described in its
// environment.
type SideContainer struct {
	// image of the container.
	// +kubebuilder:validation:MinLength=1
	// +required
	Image string `json:"image"`

	// imagePullPolicy of the container.
	// +kubebuilder:validation:Enum=Always;Never;IfNotPresent
	// +kubebuilder:default=IfNotPresent
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// command overrides the image's entrypoint.
	// +listType=atomic
	// +optional
	Command []string `json:"command,omitempty"`

	// args of the command.
	// +listType=atomic
	// +optional
	Args []string `json:"args,omitempty"`

	// resources of the container; its memory limit must cover the rings
	// it creates.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// OutputSpec selects where built events go: exactly one.
// +kubebuilder:validation:XValidation:rule="(has(self.check) ? 1 : 0) + (has(self.discard) ? 1 : 0) + (has(self.shm) ? 1 : 0) == 1",message="spec.builder.output must name exactly one output: set spec.builder.output.check, spec.builder.output.discard or spec.builder.output.shm"
type OutputSpec struct {
	// check: every event is verified byte for byte in the builder.
	// +optional
	Check *CheckOutput `json:"check,omitempty"`

	// discard: MEPs are assembled and dropped, unchecked (to measure the
	// data mover alone).
	// +optional
	Discard *DiscardOutput `json:"discard,omitempty"`

	// shm: each BU writes its MEPs into a shared-memory ring that a
	// consumer container of the unit's pod reads; a MEP that finds no
	// room within the builder's output timeout is dropped and counted.
	// The consumer's counts, when it publishes them, show in the run's
	// status (consumed).
	// +optional
	Shm *ShmOutput `json:"shm,omitempty"`
}

// CheckOutput verifies every event in the builder.
type CheckOutput struct{}

// DiscardOutput drops every MEP once assembled.
type DiscardOutput struct{}

// GeneratorSource synthesises fixed-size fragments.
type GeneratorSource struct {
	// fragmentSize is the size of every fragment in bytes (at most 65535:
	// an MFP records each fragment's size in 16 bits).
	// +kubebuilder:validation:Minimum=8
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=128
	// +optional
	FragmentSize int32 `json:"fragmentSize,omitempty"`
}

// RunPhase is a coarse summary of a run's state.
// +kubebuilder:validation:Enum=Pending;Running;Paused;Stopped;Degraded;Failed
type RunPhase string

const (
	// PhasePending: not every unit is ready and building yet.
	PhasePending RunPhase = "Pending"
	// PhaseRunning: every unit is ready and its builder reports RUNNING.
	PhaseRunning RunPhase = "Running"
	// PhasePaused: spec.state is Paused and no live builder is RUNNING.
	PhasePaused RunPhase = "Paused"
	// PhaseStopped: spec.state is Stopped and no live builder is RUNNING
	// or PAUSED.
	PhaseStopped RunPhase = "Stopped"
	// PhaseDegraded: every unit left is building, but units were lost
	// with no spare to take over (failurePolicy RunDegraded).
	PhaseDegraded RunPhase = "Degraded"
	// PhaseFailed: the run cannot make progress without user action.
	PhaseFailed RunPhase = "Failed"
)

// ConditionReady is True when every unit is ready and building events.
const ConditionReady = "Ready"

// ConditionConfigured is True when every live builder has accepted the
// rank table's epoch (configure), so that it runs, or is about to switch
// to, the published table.
const ConditionConfigured = "Configured"

// ConditionResourcesOffered, for a run on a Fabric, is True when every
// endpoint's node offers (allocatable) what its builder pod asks for, and
// False, reason ResourcesMissing, naming each node, resource and rank,
// when one does not: its pods would wait unscheduled.
const ConditionResourcesOffered = "ResourcesOffered"

// Reasons of the ResourcesOffered condition.
const (
	ReasonAllResourcesOffered = "AllResourcesOffered"
	ReasonResourcesMissing    = "ResourcesMissing"
)

// ConditionNetworksFound, for a run that attaches a data network
// (spec.resources.network), is True when every NetworkAttachmentDefinition
// its pods name exists and every running builder pod has its address there
// (its network-status annotation), which the rank table gives its peers;
// False, reason NetworkMissing, naming the missing ones (or saying the
// cluster serves no such API: Multus is not installed): its pods would not
// start; False, reason NetworkNotAttached, naming the pods without an
// address there: no peer can dial them.
const ConditionNetworksFound = "NetworksFound"

// Reasons of the NetworksFound condition.
const (
	ReasonAllNetworksFound = "AllNetworksFound"
	ReasonNetworkMissing   = "NetworkMissing"
	// ReasonNetworkNotAttached: a running pod has no address on the network.
	ReasonNetworkNotAttached = "NetworkNotAttached"
)

// ConditionDevicesAllocated, for a run with spec.resources.claims, is True
// when every builder pod the run asks for has its claim allocated (it was
// scheduled), and False: reason DRAUnavailable when the cluster serves no
// resource.k8s.io/v1; DRADriverMissing when the driver's DeviceClasses do
// not exist (no pods are made until they do); NoAlignedDevices naming the
// pods the scheduler cannot place and its reason (no node of theirs has the
// NIC and streams aligned as asked).
const ConditionDevicesAllocated = "DevicesAllocated"

// Reasons of the DevicesAllocated condition.
const (
	ReasonDevicesAllocated = "DevicesAllocated"
	ReasonDRAUnavailable   = "DRAUnavailable"
	ReasonDRADriverMissing = "DRADriverMissing"
	ReasonNoAlignedDevices = "NoAlignedDevices"
)

// ConditionNUMAAligned, for a run on a Fabric (whose builders are asked to
// run on their endpoint's NUMA node), is True when every live unit's
// builder reports its threads pinned there with its CPUs, memory and RDMA
// device local, and False, reason NUMAMisaligned, naming the ranks, their
// pods and nodes and what is elsewhere (spec.numaPolicy says what follows).
const ConditionNUMAAligned = "NUMAAligned"

// Reasons of the NUMAAligned condition.
const (
	ReasonNUMAAligned    = "Aligned"
	ReasonNUMAMisaligned = "NUMAMisaligned"
)

// ConditionOutputsFlowing is True while every live BU's output takes its
// MEPs, and False, reason OutputStalled, naming the units whose output has
// taken none for spec.outputStallAfter while building (their consumer gone
// or stuck: each MEP is dropped where it was built) and what
// spec.outputStallPolicy did about it. Absent before the builders report.
const ConditionOutputsFlowing = "OutputsFlowing"

// Reasons of the OutputsFlowing condition (OutputStalled is also the
// reason of a planned move of a BU).
const (
	ReasonOutputsFlowing = "OutputsFlowing"
	ReasonOutputStalled  = "OutputStalled"
)

// ConditionReadoutComplete, for a run on a Fabric whose endpoints list
// readout streams, is True when an RU reads every stream, and False,
// reason StreamsUnread, naming the endpoints whose streams none reads and
// why (a failed unit's endpoint: streams are fibres into its cards and do
// not follow the unit to a spare; a spare; an endpoint the run has no unit
// for). Streams lost to a failure also make a running run Degraded,
// reason StreamsUnread, until the Fabric shows them cabled to an endpoint
// that runs an RU.
const ConditionReadoutComplete = "ReadoutComplete"

// Reasons of the ReadoutComplete condition (StreamsUnread is also a
// Ready reason: the run is Degraded).
const (
	ReasonAllStreamsRead = "AllStreamsRead"
	ReasonStreamsUnread  = "StreamsUnread"
)

// ConditionFabricChanged is True once the run's Fabric was edited (or
// deleted and created anew) after its rank table was planned, and the
// table was planned afresh for it, at a new epoch (reason Replanned; a
// table of another size stops and restarts the set, as a resize does); the
// message names the Fabric's generation and the epoch.
const ConditionFabricChanged = "FabricChanged"

// Reasons of the FabricChanged condition: Replanned (True), or
// ReplanFailed (False: the edited Fabric cannot be planned on; the run
// goes on under its table).
const (
	ReasonReplanned    = "Replanned"
	ReasonReplanFailed = "ReplanFailed"
)

// Reasons of the Ready condition.
const (
	ReasonAllUnitsRunning = "AllUnitsRunning"
	ReasonUnitsPending    = "UnitsPending"
	ReasonBuilderError    = "BuilderError"
	ReasonFabricNotFound  = "FabricNotFound"
	ReasonPlanFailed      = "PlanFailed"
	ReasonUnitsLost       = "UnitsLost"
	ReasonNoSpareLeft     = "NoSpareLeft"
	// The API server refused a builder pod (quota, admission policy,
	// invalid resource name); the message quotes it.
	ReasonPodCreateFailed = "PodCreateFailed"
	// spec.state Paused or Stopped reached.
	ReasonRunPaused  = "RunPaused"
	ReasonRunStopped = "RunStopped"
	// Builders refused or did not answer a control command (configure,
	// start, pause, resume, stop); the message names the ranks.
	ReasonControlFailed = "ControlFailed"
	// Builders refused the operator's bearer token (401), or run without
	// one (403): only user action (the token Secret, the pods) helps.
	ReasonControlUnauthorized = "ControlUnauthorized"
	// Every live builder is RUNNING, yet some have not moved the event
	// stream on for longer than --builder-stall-after (connecting to a
	// peer that does not answer, a stalled source or output); the message
	// names them and quotes their last error.
	ReasonUnitsNotBuilding = "UnitsNotBuilding"
	// Every live builder is RUNNING, yet some are lost by their running
	// peers (a unit cut off from the set's data network, or whose process
	// stopped): seen at the first poll after the peers' --peer-timeout-ms,
	// before the stall check would; the message names each and who lost
	// it.
	ReasonUnitsLostByPeers = "UnitsLostByPeers"
	// A run that was Running misses units: pods gone, not Ready, builders
	// not answering or not RUNNING (a node lost, a restart); the message
	// names each with its pod and node. Never Pending once it has run.
	ReasonUnitsMissing = "UnitsMissing"
	// spec.units, spec.spares, spec.layout or spec.fabricRef changed the
	// number of ranks of a running set: it is stopped, then started again
	// on the new table.
	ReasonResizing = "Resizing"
	// Units failed and the planner refused to move them: the run's Fabric
	// no longer describes its table (an edit it could not be replanned
	// on); the message names the field. The units stay where they are.
	ReasonFailoverFailed = "FailoverFailed"

	// Reasons of the Configured condition.
	ReasonEpochConfigured = "EpochConfigured"
	ReasonConfiguring     = "Configuring"
)

// RankRole is what a rank of the schedule does.
// +kubebuilder:validation:Enum=Live;Dummy;Spare
type RankRole string

const (
	RoleLive  RankRole = "Live"
	RoleDummy RankRole = "Dummy"
	// RoleSpare is a dummy rank whose endpoint is held as a warm spare.
	RoleSpare RankRole = "Spare"
)

// RankStatus is one rank of the schedule.
type RankStatus struct {
	Rank int32    `json:"rank"`
	Role RankRole `json:"role"`
	// endpoint of the Fabric on this rank's port (live and spare ranks).
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// node of that endpoint.
	// +optional
	Node string `json:"node,omitempty"`
	// unit this live rank runs; it stays with the unit across failovers.
	// +optional
	Unit *int32 `json:"unit,omitempty"`
	// pod running this rank's builder (live and spare ranks).
	// +optional
	Pod string `json:"pod,omitempty"`
	// state of that builder as of the last poll (a started spare reports
	// RUNNING: it stands by as a dummy); empty when it did not answer.
	// +optional
	State string `json:"state,omitempty"`
	// transport is the RDMA port that builder reported in that poll
	// (verbs runs only).
	// +optional
	Transport *RankTransport `json:"transport,omitempty"`
	// numa is where that builder runs against its endpoint's NUMA node
	// (runs on a Fabric).
	// +optional
	NUMA *RankNUMA `json:"numa,omitempty"`
}

// RankNUMA is a builder's report of its NUMA placement, kept short (a
// farm's run has hundreds of ranks): the builder's /status has each part.
type RankNUMA struct {
	// node is the NUMA node it was asked for and resolved.
	// +optional
	Node *int32 `json:"node,omitempty"`
	// aligned: its threads are pinned to the node, with the CPUs it may
	// run on, its memory and its RDMA device there.
	Aligned bool `json:"aligned"`
	// misplaced names what is elsewhere (CPUs, memory, RDMA device), with
	// the builder's warning, when not aligned.
	// +optional
	Misplaced string `json:"misplaced,omitempty"`
}

// RankTransport is what a builder of a verbs run reports of its RDMA
// port. Its queue pairs, one per peer, are in the builder's /status and
// metrics only: a farm's run has hundreds of ranks.
type RankTransport struct {
	// device is the RDMA device the builder opened, e.g. mlx5_0.
	// +optional
	Device string `json:"device,omitempty"`
	// gidIndex is the index in the port's GID table its queue pairs
	// address peers with (RoCE); unset on InfiniBand, which addresses
	// them by LID.
	// +optional
	GIDIndex *int32 `json:"gidIndex,omitempty"`
	// portState is the state of the device's port: ACTIVE when it can
	// carry data; DOWN, INIT or ARMED point at the link or the subnet
	// manager.
	// +optional
	PortState string `json:"portState,omitempty"`
}

// Failover outcomes.
const (
	OutcomeMovedToSpare = "MovedToSpare"
	OutcomeDegraded     = "Degraded"
	OutcomeStopped      = "Stopped"
	// OutcomeRejoined: in a run without a Fabric, units their peers lost
	// answered again (restarted, or a partition healed) and rejoined the
	// running set on their own ranks, by the same table at a new epoch.
	OutcomeRejoined = "Rejoined"
)

// UnitMove is one failed unit and where it went.
type UnitMove struct {
	Unit           int32  `json:"unit"`
	FailedRank     int32  `json:"failedRank"`
	FailedEndpoint string `json:"failedEndpoint"`
	// reason the unit failed, e.g. NodeNotReady, PodFailed, TopologyAffinityError.
	Reason string `json:"reason"`
	// function that moved: BU when only the unit's BU moved to the spare
	// (reason OutputStalled), its RU reading on at failedRank; unset
	// when the whole unit moved.
	// +optional
	Function string `json:"function,omitempty"`
	// spareRank and spareEndpoint took the unit over; unset when no spare
	// was left, or when the unit rejoined on its own rank (outcome Rejoined).
	// +optional
	SpareRank *int32 `json:"spareRank,omitempty"`
	// +optional
	SpareEndpoint string `json:"spareEndpoint,omitempty"`
	// noSpare says why no spare took the unit over, when none did: each
	// spare left and what kept it (not schedulable: its node not Ready or
	// its pod refused; on the failed endpoint's server; without fibres).
	// +optional
	NoSpare string `json:"noSpare,omitempty"`
}

// FailoverStatus records the last failover.
type FailoverStatus struct {
	// observedTime is when the operator saw the failure.
	ObservedTime metav1.MicroTime `json:"observedTime"`
	// completedTime is when the new rank table was published, together
	// with this record; the replacement pods are created right after.
	CompletedTime metav1.MicroTime `json:"completedTime"`
	// duration from observedTime to completedTime.
	Duration metav1.Duration `json:"duration"`
	// configuredTime is when every live builder of the new table had
	// accepted it (configure): the running builders switch to it at their
	// next common cycle boundary, without restarting. Unset until then.
	// +optional
	ConfiguredTime *metav1.MicroTime `json:"configuredTime,omitempty"`
	// configuredDuration is from observedTime to configuredTime: how long
	// the failover took, end to end.
	// +optional
	ConfiguredDuration *metav1.Duration `json:"configuredDuration,omitempty"`
	// epoch of the rank table published.
	Epoch int64 `json:"epoch"`
	// outcome: MovedToSpare, Degraded (no spare, failurePolicy RunDegraded),
	// Stopped (no spare, failurePolicy Stop) or, in a run without a
	// fabricRef, Rejoined (units reported lost by their peers answered
	// again and rejoined on their own ranks at the new epoch; reason
	// PeerLost, no spare).
	Outcome string `json:"outcome"`
	// moves lists every unit that failed, in rank order.
	// +listType=atomic
	Moves []UnitMove `json:"moves"`
}

// UnitStatus is one row of the rank table.
type UnitStatus struct {
	// rank of the unit in the builders' schedule.
	Rank int32 `json:"rank"`

	// pod running the unit; empty while it does not exist.
	// +optional
	Pod string `json:"pod,omitempty"`

	// ready is the pod's Ready condition.
	Ready bool `json:"ready"`

	// state is the builder's state machine state (NOT_READY, READY,
	// RUNNING, PAUSED, ERROR) as of the last poll; empty when the builder
	// did not answer it.
	// +optional
	State string `json:"state,omitempty"`

	// lastError is the last problem the builder reported, if any.
	// +optional
	LastError string `json:"lastError,omitempty"`

	// epoch of the rank table the builder runs, as last reported.
	// +optional
	Epoch int64 `json:"epoch,omitempty"`

	// pendingEpoch is a table the builder accepted and switches to at
	// the next common cycle boundary; 0 when none.
	// +optional
	PendingEpoch int64 `json:"pendingEpoch,omitempty"`

	// lostPeers are the ranks this builder lost in its epoch.
	// +listType=atomic
	// +optional
	LostPeers []int32 `json:"lostPeers,omitempty"`

	// activity is what the builder's data path did at the last poll:
	// idle, connecting, building, paused or standby.
	// +optional
	Activity string `json:"activity,omitempty"`

	// nextEvent is the first event of the set's next cycle as the
	// builder last reported it: it moves on while the set builds.
	// +optional
	NextEvent int64 `json:"nextEvent,omitempty"`

	// progressTime is when nextEvent last moved, or when the builder
	// first answered: a running unit whose nextEvent stands still for
	// longer than the operator's --builder-stall-after is not building,
	// and the run is not Ready.
	// +optional
	ProgressTime *metav1.MicroTime `json:"progressTime,omitempty"`

	// eventsBuilt by this unit, as last reported.
	EventsBuilt int64 `json:"eventsBuilt"`

	// eventsIncomplete by this unit, as last reported.
	EventsIncomplete int64 `json:"eventsIncomplete"`

	// eventsDropped by this unit (events missing a lost peer's data), as
	// last reported.
	// +optional
	EventsDropped int64 `json:"eventsDropped,omitempty"`

	// bytesBuilt by this unit, as last reported.
	BytesBuilt int64 `json:"bytesBuilt"`

	// consumer: what the consumer of this unit's MEP ring reported
	// checking, as its builder last showed it; absent without one.
	// +optional
	Consumer *ConsumerCounts `json:"consumer,omitempty"`
}

// ConsumerCounts is what the consumer of a BU's MEP ring reports
// (builder/docs/formats.md, "Beside a MEP ring").
type ConsumerCounts struct {
	// meps read from the ring.
	MEPs int64 `json:"meps"`
	// eventsComplete: events with every source's fragment intact.
	EventsComplete int64 `json:"eventsComplete"`
	// eventsIncomplete: events missing a fragment or failing a check.
	EventsIncomplete int64 `json:"eventsIncomplete"`
	// rejected: MEPs and MFPs refused as malformed.
	Rejected int64 `json:"rejected"`
}

// EventBuilderRunStatus is the observed state of an event-building run.
type EventBuilderRunStatus struct {
	// phase summarises the run: Pending, Running, Degraded or Failed.
	// +optional
	Phase RunPhase `json:"phase,omitempty"`

	// runNumber and partition of the run, from spec, as its pods run them.
	// +optional
	RunNumber *int64 `json:"runNumber,omitempty"`
	// +optional
	Partition string `json:"partition,omitempty"`

	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// observedTime is when the operator last looked at the run (each
	// reconcile, at least every few poll intervals); it writes it with the
	// counters every --status-counters-interval (10 s by default) while
	// builders answer, and alone at least every twice that. An age well
	// beyond 30 s (by default) means no operator is watching the run, and
	// every other field is as old: kubectl get ebrun shows it as OBSERVED.
	// +optional
	ObservedTime *metav1.MicroTime `json:"observedTime,omitempty"`

	// selector is the label selector of the run's builder pods, for the
	// scale subresource (kubectl scale, autoscalers).
	// +optional
	Selector string `json:"selector,omitempty"`

	// conditions of the run; Ready tells whether every unit is building.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// readyUnits is the number of live ranks whose pod is Ready (two per
	// unit when Unfolded).
	// +optional
	ReadyUnits int32 `json:"readyUnits"`

	// eventsBuilt is the sum over units of complete events built.
	// +optional
	EventsBuilt int64 `json:"eventsBuilt"`

	// eventsIncomplete is the sum over units of events built with
	// fragments missing.
	// +optional
	EventsIncomplete int64 `json:"eventsIncomplete"`

	// eventsDropped is the sum over units of events dropped because a
	// peer was lost.
	// +optional
	EventsDropped int64 `json:"eventsDropped"`

	// bytesBuilt is the sum over units of event bytes built.
	// +optional
	BytesBuilt int64 `json:"bytesBuilt"`

	// consumed is the sum over units of what their MEP rings' consumers
	// reported (spec.builder.output.shm); absent when none reports.
	// +optional
	Consumed *ConsumerCounts `json:"consumed,omitempty"`

	// eventRate is the run's event rate in events per second, averaged
	// over the interval between the last two polls.
	// +optional
	EventRate int64 `json:"eventRate"`

	// throughputGbps is the run's throughput of built event data in
	// gigabits per second over the same interval, as a decimal string.
	// +optional
	ThroughputGbps string `json:"throughputGbps,omitempty"`

	// lastSampleTime is when the builders' counters were last polled; the
	// next poll computes eventRate and throughputGbps against it.
	// +optional
	LastSampleTime *metav1.MicroTime `json:"lastSampleTime,omitempty"`

	// units lists the live ranks: their pods and builders' counters.
	// Atomic: the operator alone writes it, whole, and a list-map would
	// make the API server keep managed fields for every row (as many
	// bytes again as the rows: a 1024-unit run's object stood at 1.1 MB
	// of etcd's 1.5 MiB).
	// +listType=atomic
	// +optional
	Units []UnitStatus `json:"units,omitempty"`

	// epoch of the rank table published in the ConfigMap <name>-ranks;
	// every replan and failover increments it.
	// +optional
	Epoch int64 `json:"epoch,omitempty"`

	// rankCount is N, the number of ranks in the schedule, dummies included.
	// +optional
	RankCount int32 `json:"rankCount,omitempty"`

	// liveUnits is the number of units whose RU and BU run on live ranks
	// (one rank RU+BU when Folded, two when Unfolded).
	// +optional
	LiveUnits int32 `json:"liveUnits"`

	// sparesLeft is the number of warm spares still usable.
	// +optional
	SparesLeft int32 `json:"sparesLeft"`

	// ranks is the rank table: every rank, live, spare or dummy. Atomic,
	// as units.
	// +listType=atomic
	// +optional
	Ranks []RankStatus `json:"ranks,omitempty"`

	// lastFailover records the last failover and how long it took.
	// +optional
	LastFailover *FailoverStatus `json:"lastFailover,omitempty"`
}

// EventBuilderRun is one event-building run: a set of builder units that
// together assemble complete events from the fragments of every source.
//
// The name names the builder Service (<name>-eb) and pods (<name>-eb-<rank>),
// which must be DNS labels: hence the rule on it.
//
// Its scale subresource counts units: spec.units, and status.liveUnits
// (readyUnits counts ranks, two per unit when Unfolded). kubectl scale
// ebrun NAME --replicas N is an edit of spec.units, validated and resized
// the same way.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.units,statuspath=.status.liveUnits,selectorpath=.status.selector
// +kubebuilder:resource:shortName=ebrun
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.state`,priority=1,description="desired state"
// +kubebuilder:printcolumn:name="Units",type=integer,JSONPath=`.spec.units`
// +kubebuilder:printcolumn:name="Live",type=integer,JSONPath=`.status.liveUnits`,description="units with RU and BU on live ranks"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyUnits`
// +kubebuilder:printcolumn:name="Spares",type=integer,JSONPath=`.status.sparesLeft`
// +kubebuilder:printcolumn:name="Epoch",type=integer,JSONPath=`.status.epoch`,priority=1
// +kubebuilder:printcolumn:name="Events",type=integer,JSONPath=`.status.eventsBuilt`,priority=1
// +kubebuilder:printcolumn:name="Rate",type=integer,JSONPath=`.status.eventRate`,description="events per second"
// +kubebuilder:printcolumn:name="Gb/s",type=string,JSONPath=`.status.throughputGbps`
// +kubebuilder:printcolumn:name="Observed",type=date,JSONPath=`.status.observedTime`,description="when the operator last looked at the run"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 55 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be at most 55 characters of lowercase letters, digits and '-', starting with a letter and not ending with '-': it names the Service <name>-eb and the pods <name>-eb-<rank>"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ['Running', 'Degraded', 'Paused']) || (self.spec.builder.image == oldSelf.spec.builder.image)",message="spec.builder.image cannot change while the run is Running, Degraded or Paused (every builder pod would be replaced at once): set spec.state to Stopped, wait for phase Stopped, then change it and set spec.state back to Running"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ['Running', 'Degraded', 'Paused']) || (has(self.spec.resources) == has(oldSelf.spec.resources) && (!has(self.spec.resources) || self.spec.resources == oldSelf.spec.resources))",message="spec.resources cannot change while the run is Running, Degraded or Paused (every builder pod would be replaced at once): set spec.state to Stopped, wait for phase Stopped, then change it and set spec.state back to Running"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ['Running', 'Degraded', 'Paused']) || (has(self.spec.tolerations) == has(oldSelf.spec.tolerations) && (!has(self.spec.tolerations) || self.spec.tolerations == oldSelf.spec.tolerations))",message="spec.tolerations cannot change while the run is Running, Degraded or Paused (every builder pod would be replaced at once): set spec.state to Stopped, wait for phase Stopped, then change it and set spec.state back to Running"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ['Running', 'Degraded', 'Paused']) || (has(self.spec.builder.source) == has(oldSelf.spec.builder.source) && (!has(self.spec.builder.source) || self.spec.builder.source == oldSelf.spec.builder.source))",message="spec.builder.source cannot change while the run is Running, Degraded or Paused (every builder pod would be replaced at once): set spec.state to Stopped, wait for phase Stopped, then change it and set spec.state back to Running"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ['Running', 'Degraded', 'Paused']) || (has(self.spec.builder.output) == has(oldSelf.spec.builder.output) && (!has(self.spec.builder.output) || self.spec.builder.output == oldSelf.spec.builder.output))",message="spec.builder.output cannot change while the run is Running, Degraded or Paused (every builder pod would be replaced at once): set spec.state to Stopped, wait for phase Stopped, then change it and set spec.state back to Running"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ['Running', 'Degraded', 'Paused']) || (has(self.spec.runNumber) == has(oldSelf.spec.runNumber) && (!has(self.spec.runNumber) || self.spec.runNumber == oldSelf.spec.runNumber))",message="spec.runNumber cannot change while the run is Running, Degraded or Paused (every builder pod would be replaced at once): set spec.state to Stopped, wait for phase Stopped, then change it and set spec.state back to Running"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ['Running', 'Degraded', 'Paused']) || (has(self.spec.partition) == has(oldSelf.spec.partition) && (!has(self.spec.partition) || self.spec.partition == oldSelf.spec.partition))",message="spec.partition cannot change while the run is Running, Degraded or Paused (every builder pod would be replaced at once): set spec.state to Stopped, wait for phase Stopped, then change it and set spec.state back to Running"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || !(oldSelf.status.phase in ['Running', 'Degraded', 'Paused']) || (self.spec.builder == oldSelf.spec.builder)",message="spec.builder (transport, packingFactor, incompleteEvents, timeouts and the rest: each is on every builder's command line) cannot change while the run is Running, Degraded or Paused (every builder pod would be replaced at once): set spec.state to Stopped, wait for phase Stopped, then change it and set spec.state back to Running"
type EventBuilderRun struct {
	metav1.TypeMeta `json:",inline"`

	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EventBuilderRunSpec `json:"spec"`

	// +optional
	Status EventBuilderRunStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// EventBuilderRunList contains a list of EventBuilderRun.
type EventBuilderRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EventBuilderRun `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EventBuilderRun{}, &EventBuilderRunList{})
}
