// Package buildercontrol is the seam between the operator and the
// builders' run-control API (the ECS-like state machine: NOT_READY, READY,
// RUNNING, PAUSED, ERROR). The reconciler drives runs through Control
// only; today's builders have no control API, so the operator uses
// Unavailable, and builders pick up rank tables from the mounted file when
// they start. The real client (authenticated HTTP) replaces Unavailable
// without touching the reconciler.
package buildercontrol

import (
	"context"
	"errors"

	"daq.io/eventbuilder/operator/internal/ranktable"
)

// ErrUnsupported: the builders have no control API (yet).
var ErrUnsupported = errors.New("the builders have no control API yet")

// Builder is one builder process the operator talks to.
type Builder struct {
	Rank int32
	// URL is the base URL of the builder's HTTP API.
	URL string
}

// Control drives the builders of one run. Every call addresses all of a
// run's live builders at once, so an implementation can make a table
// switch atomic (prepare everywhere, then commit at one phase boundary).
type Control interface {
	// Configure hands the builders the rank table of an epoch; running
	// builders switch to it together at a phase boundary, without restart.
	Configure(ctx context.Context, builders []Builder, table ranktable.Document) error
	// Start, Pause and Stop move the builders' state machines.
	Start(ctx context.Context, builders []Builder) error
	Pause(ctx context.Context, builders []Builder) error
	Stop(ctx context.Context, builders []Builder) error
}

// Unavailable is the Control of builders without a control API: every
// call returns ErrUnsupported.
type Unavailable struct{}

func (Unavailable) Configure(context.Context, []Builder, ranktable.Document) error {
	return ErrUnsupported
}
func (Unavailable) Start(context.Context, []Builder) error { return ErrUnsupported }
func (Unavailable) Pause(context.Context, []Builder) error { return ErrUnsupported }
func (Unavailable) Stop(context.Context, []Builder) error  { return ErrUnsupported }
