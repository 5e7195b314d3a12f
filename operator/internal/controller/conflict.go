package controller

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
)

// conflictRetryDelay is short: a conflict only means the cached object was a
// little behind the API server, and the watch brings the newer one at once.
const conflictRetryDelay = 100 * time.Millisecond

// requeueOnConflict turns an optimistic-lock conflict into a quiet retry, so the
// log keeps error level for errors that need a person.
func requeueOnConflict(result ctrl.Result, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetryDelay}, nil
	}
	return result, err
}
