// Package v1alpha1 contains the v1alpha1 API of the eventbuilder.daq.io group.
// +kubebuilder:object:generate=true
// +groupName=eventbuilder.daq.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "eventbuilder.daq.io", Version: "v1alpha1"}

	// SchemeBuilder is used to add go types to the GroupVersionKind scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// LeaderLease names the Lease, in the operator's namespace, that its
// replicas elect a leader with: its holder identity is the leading pod's
// name, "_", and a random suffix. Only the leader reconciles runs.
const LeaderLease = "eventbuilder-operator.eventbuilder.daq.io"
