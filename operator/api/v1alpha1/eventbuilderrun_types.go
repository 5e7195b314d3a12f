package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Transport is how builder units exchange fragments.
// +kubebuilder:validation:Enum=tcp;verbs
type Transport string

const (
	// TransportTCP moves data over TCP sockets; runs anywhere.
	TransportTCP Transport = "tcp"
	// TransportVerbs moves data with RDMA (libibverbs RC). Not supported by
	// this operator version yet: a run asking for it fails.
	TransportVerbs Transport = "verbs"
)

// EventBuilderRunSpec is the desired state of an event-building run.
type EventBuilderRunSpec struct {
	// units is the number of event-builder units; each unit is one pod and
	// one rank (0..units-1) in the builders' schedule.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	// +required
	Units int32 `json:"units"`

	// builder configures the builder process of every unit.
	// +required
	Builder BuilderSpec `json:"builder"`

	// resources of the builder container of every unit.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// BuilderSpec configures the builder container and process.
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

	// transport between units: tcp, or verbs (RDMA, not supported yet).
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
}

// SourceSpec selects the data source of the readout units. Exactly one
// source must be set; the generator is the only one so far.
// +kubebuilder:validation:XValidation:rule="has(self.generator)",message="spec.builder.source must name a data source; set spec.builder.source.generator"
type SourceSpec struct {
	// generator synthesises fragments in the builder itself.
	// +optional
	Generator *GeneratorSource `json:"generator,omitempty"`
}

// GeneratorSource synthesises fixed-size fragments.
type GeneratorSource struct {
	// fragmentSize is the size of every fragment in bytes.
	// +kubebuilder:validation:Minimum=8
	// +kubebuilder:default=128
	// +optional
	FragmentSize int32 `json:"fragmentSize,omitempty"`
}

// RunPhase is a coarse summary of a run's state.
// +kubebuilder:validation:Enum=Pending;Running;Failed
type RunPhase string

const (
	// PhasePending: not every unit is ready and building yet.
	PhasePending RunPhase = "Pending"
	// PhaseRunning: every unit is ready and its builder reports RUNNING.
	PhaseRunning RunPhase = "Running"
	// PhaseFailed: the run cannot make progress without user action.
	PhaseFailed RunPhase = "Failed"
)

// ConditionReady is True when every unit is ready and building events.
const ConditionReady = "Ready"

// Reasons of the Ready condition.
const (
	ReasonAllUnitsRunning      = "AllUnitsRunning"
	ReasonUnitsPending         = "UnitsPending"
	ReasonBuilderError         = "BuilderError"
	ReasonUnsupportedTransport = "UnsupportedTransport"
)

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

	// eventsBuilt by this unit, as last reported.
	EventsBuilt int64 `json:"eventsBuilt"`

	// eventsIncomplete by this unit, as last reported.
	EventsIncomplete int64 `json:"eventsIncomplete"`

	// bytesBuilt by this unit, as last reported.
	BytesBuilt int64 `json:"bytesBuilt"`
}

// EventBuilderRunStatus is the observed state of an event-building run.
type EventBuilderRunStatus struct {
	// phase summarises the run: Pending, Running or Failed.
	// +optional
	Phase RunPhase `json:"phase,omitempty"`

	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions of the run; Ready tells whether every unit is building.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// readyUnits is the number of units whose pod is Ready.
	// +optional
	ReadyUnits int32 `json:"readyUnits"`

	// eventsBuilt is the sum over units of complete events built.
	// +optional
	EventsBuilt int64 `json:"eventsBuilt"`

	// eventsIncomplete is the sum over units of events built with
	// fragments missing.
	// +optional
	EventsIncomplete int64 `json:"eventsIncomplete"`

	// bytesBuilt is the sum over units of event bytes built.
	// +optional
	BytesBuilt int64 `json:"bytesBuilt"`

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

	// units is the rank table.
	// +listType=map
	// +listMapKey=rank
	// +optional
	Units []UnitStatus `json:"units,omitempty"`
}

// EventBuilderRun is one event-building run: a set of builder units that
// together assemble complete events from the fragments of every source.
//
// The name names the builder Service (<name>-eb) and pods (<name>-eb-<rank>),
// which must be DNS labels; every builder gets the list of all units' names as
// one argument, which Linux caps at 128 KiB: hence the rules on it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ebrun
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Units",type=integer,JSONPath=`.spec.units`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyUnits`
// +kubebuilder:printcolumn:name="Events",type=integer,JSONPath=`.status.eventsBuilt`
// +kubebuilder:printcolumn:name="Rate",type=integer,JSONPath=`.status.eventRate`,description="events per second"
// +kubebuilder:printcolumn:name="Gb/s",type=string,JSONPath=`.status.throughputGbps`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 55 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be at most 55 characters of lowercase letters, digits and '-', starting with a letter and not ending with '-': it names the Service <name>-eb and the pods <name>-eb-<rank>"
// +kubebuilder:validation:XValidation:rule="self.spec.units * (2 * self.metadata.name.size() + 18) < 131072",message="spec.units peers named after metadata.name make a --peers argument over Linux's 128 KiB limit; use a shorter metadata.name or fewer spec.units"
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
