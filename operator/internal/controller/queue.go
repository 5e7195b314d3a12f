package controller

import "sigs.k8s.io/controller-runtime/pkg/controller"

// queueOptions runs a controller with workers reconciles at a time on the
// plain rate-limited work queue. Not controller-runtime's priority queue:
// in v0.23 it can deadlock on shutdown (an item handed, under the queue's
// lock, to a worker that already left: controller-runtime issue 3538, fixed
// in v0.25), and the manager then fails to stop within its grace period.
// Seen here as an envtest suite that passed every test and still failed.
func queueOptions(workers int) controller.Options {
	priorityQueue := false
	return controller.Options{MaxConcurrentReconciles: max(1, workers), UsePriorityQueue: &priorityQueue}
}
