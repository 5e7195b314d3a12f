package controller

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestDeletedDuringPass(t *testing.T) {
	runs := schema.GroupResource{Group: "eventbuilder.daq.io", Resource: "eventbuilderruns"}
	key := types.NamespacedName{Namespace: "farm", Name: "run1"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "no error", err: nil, want: false},
		{name: "the run gone", err: apierrors.NewNotFound(runs, "run1"), want: true},
		{name: "the run gone, wrapped and joined", err: errors.Join(fmt.Errorf("status: %w", apierrors.NewNotFound(runs, "run1"))), want: true},
		{name: "another run gone", err: apierrors.NewNotFound(runs, "run2"), want: false},
		{name: "its Fabric gone", err: apierrors.NewNotFound(schema.GroupResource{Group: "eventbuilder.daq.io", Resource: "fabrics"}, "run1"), want: false},
		{name: "a pod gone", err: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "run1"), want: false},
		{name: "another error", err: apierrors.NewConflict(runs, "run1", errors.New("changed")), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deletedDuringPass(tt.err, key); got != tt.want {
				t.Errorf("deletedDuringPass(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
