package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Routing names the rule the switches use to pick the spine towards a
// destination port.
// +kubebuilder:validation:Enum=PortModSpines;LeafPortModSpines
type Routing string

const (
	// RoutingPortModSpines: spine = (leaf*portsPerLeaf + port) mod spines,
	// the LHCb rule (equation 1 of the reference design).
	RoutingPortModSpines Routing = "PortModSpines"
	// RoutingLeafPortModSpines: spine = port mod spines, the port on the
	// destination's own leaf.
	RoutingLeafPortModSpines Routing = "LeafPortModSpines"
)

// FabricSpec is the event-building network as cabled: a two-level fat tree
// and the server NUMA domains plugged into the leaves' server ports.
//
// The API server refuses endpoints cabled outside the switches. Checks
// that compare every pair of endpoints are too costly for CEL at the
// largest size (maxItems 800: a pairwise (leaf, port) rule exceeds the
// per-call cost limit there, TestLargestFabricIsAccepted): two endpoints
// on one port, on one node and NUMA id, or a stream on two endpoints are
// reported in status condition Valid instead.
// +kubebuilder:validation:XValidation:rule="self.endpoints.all(e, e.leaf < self.leaves)",message="spec.endpoints[].leaf: an endpoint is cabled to a leaf >= spec.leaves (leaves are numbered from 0); correct its leaf or raise spec.leaves"
// +kubebuilder:validation:XValidation:rule="self.endpoints.all(e, e.port < self.portsPerLeaf)",message="spec.endpoints[].port: an endpoint is cabled to a port >= spec.portsPerLeaf (server ports are numbered from 0); correct its port or raise spec.portsPerLeaf"
// +kubebuilder:validation:XValidation:rule="!has(self.unavailableLeaves) || self.unavailableLeaves.all(l, l < self.leaves)",message="spec.unavailableLeaves: a leaf >= spec.leaves (leaves are numbered from 0); list only leaves of this fabric"
type FabricSpec struct {
	// leaves is the number of leaf switches, numbered 0..leaves-1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +required
	Leaves int32 `json:"leaves"`

	// spines is the number of spine switches.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +required
	Spines int32 `json:"spines"`

	// portsPerLeaf is the number of server-facing ports on every leaf,
	// numbered 0..portsPerLeaf-1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	// +required
	PortsPerLeaf int32 `json:"portsPerLeaf"`

	// linksPerPair is the number of parallel links between each leaf and
	// each spine.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	LinksPerPair int32 `json:"linksPerPair,omitempty"`

	// routing is how the switches pick the spine towards a destination.
	// +kubebuilder:default=PortModSpines
	// +optional
	Routing Routing `json:"routing,omitempty"`

	// unavailableLeaves are leaf switches that are down or under
	// maintenance while their servers' nodes stay Ready (a leaf's loss
	// leaves the kubelets, which talk over another network, unaware).
	// The operator cannot tell a lost leaf from its servers' failure, so
	// whoever knows (the network team, its monitoring) lists it here: its
	// endpoints take no unit, planned or failed over; runs on the Fabric
	// are replanned without them (as for any Fabric edit), and status
	// lists them unschedulable, reason LeafUnavailable. Remove a leaf once
	// it is back.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Minimum=0
	// +optional
	UnavailableLeaves []int32 `json:"unavailableLeaves,omitempty"`

	// endpoints are the server NUMA domains and where their NICs are cabled.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=800
	// +required
	Endpoints []FabricEndpoint `json:"endpoints"`
}

// FabricEndpoint is one server NUMA domain with its own network card.
type FabricEndpoint struct {
	// name identifies the endpoint in rank tables; unique in the fabric.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`

	// node is the Kubernetes node (the server). Endpoints on one node are
	// the NUMA halves of one server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Node string `json:"node"`

	// numa is the NUMA node id of this domain on the server.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	// +optional
	NUMA int32 `json:"numa"`

	// rdmaDevice is the RDMA device of this domain's NIC (e.g. mlx5_0).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	RDMADevice string `json:"rdmaDevice,omitempty"`

	// netdev is the network interface of that NIC (e.g. ib0).
	// +kubebuilder:validation:MaxLength=15
	// +optional
	Netdev string `json:"netdev,omitempty"`

	// leaf is the leaf switch the NIC is cabled to.
	// +kubebuilder:validation:Minimum=0
	// +required
	Leaf int32 `json:"leaf"`

	// port is the server-facing port of that leaf.
	// +kubebuilder:validation:Minimum=0
	// +required
	Port int32 `json:"port"`

	// streams are the readout streams (detector sources) this domain reads.
	// Names go as they are into rank tables and every MEP's stream map:
	// letters, digits and . _ : / -, starting with a letter or digit.
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9][A-Za-z0-9._:/-]*$`
	// +optional
	Streams []string `json:"streams,omitempty"`
}

// Fabric condition types.
const (
	// FabricValid is False when the fabric breaks a rule the schema cannot
	// check (e.g. a readout stream listed on two endpoints).
	FabricValid = "Valid"
	// FabricNodesReady is False while some endpoint's node is unknown to
	// the cluster or not Ready: runs cannot use those endpoints.
	FabricNodesReady = "NodesReady"
)

// Reasons of the Fabric conditions.
const (
	ReasonFabricValid      = "Valid"
	ReasonFabricInvalid    = "Invalid"
	ReasonAllNodesReady    = "AllNodesReady"
	ReasonNodesUnavailable = "NodesUnavailable"
)

// Why an endpoint cannot be used.
const (
	EndpointNodeNotFound = "NodeNotFound"
	EndpointNodeNotReady = "NodeNotReady"
	// EndpointNodeCordoned: the node is cordoned (kubectl cordon or
	// drain): it takes no unit, and the units on it move to spares.
	EndpointNodeCordoned = "NodeCordoned"
	// EndpointLeafUnavailable: the endpoint's leaf is listed in
	// spec.unavailableLeaves: it takes no unit.
	EndpointLeafUnavailable = "LeafUnavailable"
)

// UnschedulableEndpoint is an endpoint whose node cannot run a unit.
type UnschedulableEndpoint struct {
	Name string `json:"name"`
	Node string `json:"node"`
	// reason is NodeNotFound, NodeNotReady, NodeCordoned or LeafUnavailable.
	Reason string `json:"reason"`
}

// FabricStatus reports what of the fabric the cluster can use.
type FabricStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Valid and NodesReady.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// endpoints is the number of endpoints in the spec.
	// +optional
	Endpoints int32 `json:"endpoints"`

	// schedulableEndpoints is the number whose node exists and is Ready.
	// +optional
	SchedulableEndpoints int32 `json:"schedulableEndpoints"`

	// unschedulable lists the other endpoints, and why.
	// +listType=atomic
	// +optional
	Unschedulable []UnschedulableEndpoint `json:"unschedulable,omitempty"`
}

// Fabric is a farm's event-building network and inventory as cabled: the
// fat tree's switches and every server NUMA domain's NIC position on it.
// Runs name it in spec.fabricRef.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Leaves",type=integer,JSONPath=`.spec.leaves`
// +kubebuilder:printcolumn:name="Spines",type=integer,JSONPath=`.spec.spines`
// +kubebuilder:printcolumn:name="Endpoints",type=integer,JSONPath=`.status.endpoints`
// +kubebuilder:printcolumn:name="Schedulable",type=integer,JSONPath=`.status.schedulableEndpoints`
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Fabric struct {
	metav1.TypeMeta `json:",inline"`

	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FabricSpec `json:"spec"`

	// +optional
	Status FabricStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// FabricList contains a list of Fabric.
type FabricList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Fabric `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Fabric{}, &FabricList{})
}
