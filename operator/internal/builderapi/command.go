package builderapi

import (
	"fmt"
	"net/http"
	"slices"

	"daq.io/eventbuilder/operator/internal/shortlist"
)

// Command is a command of the builder's state machine.
type Command string

const (
	Configure Command = "configure"
	Start     Command = "start"
	Pause     Command = "pause"
	Resume    Command = "resume"
	Stop      Command = "stop"
	Reset     Command = "reset"
)

// Builder is one builder process the operator talks to.
type Builder struct {
	Rank int32
	// URL is the base URL of the builder's HTTP API.
	URL string
}

// Reports are the status documents with which builders answered a
// command, by rank: the state each is in now. A builder that refused a
// command because it already is where the command takes it (409 in the
// command's end state, e.g. pause reaching a builder the set's pause
// reached first) counts as done, but has no report here: a refusal
// carries no counters.
type Reports map[int32]Report

// BuilderError is one builder refusing a command, or not answering it.
type BuilderError struct {
	Rank    int32
	Command Command
	// Status is the HTTP status of the answer; 0 when there was none.
	Status int
	// Message is the builder's "error", or what went wrong on the way.
	Message string
	// State is the state the builder said it is in (a refused command).
	State string
}

func (e *BuilderError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("rank %d: %s: %s", e.Rank, e.Command, e.Message)
	}
	return fmt.Sprintf("rank %d: %s: %d %s", e.Rank, e.Command, e.Status, e.Message)
}

// Unauthorized: the builder refused the token (401) or has none (403).
func (e *BuilderError) Unauthorized() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}

// Errors are the builders that refused or did not answer one call, in
// rank order. Its message names a few (shortlist).
type Errors struct {
	Command Command
	// Of is the number of builders the call addressed.
	Of       int
	Builders []*BuilderError
}

func (e *Errors) Error() string {
	return fmt.Sprintf("%s failed on %d of %d builders: %s", e.Command, len(e.Builders), e.Of,
		shortlist.Join(e.Builders, "; ", func(b *BuilderError) string { return b.Error() }))
}

// Unwrap lets errors.As find each BuilderError.
func (e *Errors) Unwrap() []error {
	out := make([]error, len(e.Builders))
	for i, b := range e.Builders {
		out[i] = b
	}
	return out
}

// Unauthorized: some builder refused the token or has none.
func (e *Errors) Unauthorized() bool {
	return slices.ContainsFunc(e.Builders, (*BuilderError).Unauthorized)
}

// Ranks are the ranks that failed.
func (e *Errors) Ranks() []int32 {
	out := make([]int32, len(e.Builders))
	for i, b := range e.Builders {
		out[i] = b.Rank
	}
	return out
}

// AlreadyIn: a builder in state is where cmd would take it, so refusing
// cmd (409) means it is done.
func AlreadyIn(cmd Command, state string) bool {
	switch cmd {
	case Start, Resume:
		return state == StateRunning
	case Pause:
		return state == StatePaused
	case Stop:
		return state == StateReady
	case Reset:
		return state == StateNotReady
	}
	return false
}
