package controller

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// deletedDuringPass says whether err is only the run itself found gone (its
// status write, say, after it was deleted while the pass ran): nothing is
// left to do and nothing failed, so no error is logged for a person. A
// missing Fabric, pod or other object stays an error.
func deletedDuringPass(err error, run types.NamespacedName) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Group == "eventbuilder.daq.io" && d.Kind == "eventbuilderruns" && d.Name == run.Name
}
