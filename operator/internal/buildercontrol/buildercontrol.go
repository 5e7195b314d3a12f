// Package buildercontrol is the operator's client of the builders'
// run-control API (builder/docs/control-api.md): the ECS-like state machine
// NOT_READY, READY, RUNNING, PAUSED, ERROR driven by authenticated HTTP
// commands. Every call addresses a set of builders of one run at once, in
// parallel (bounded), and reports each builder that refused or did not
// answer by its rank. What to send to whom is decided elsewhere
// (internal/lifecycle), purely.
package buildercontrol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"daq.io/eventbuilder/operator/internal/builderstatus"
	"daq.io/eventbuilder/operator/internal/ranktable"
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
type Reports map[int32]builderstatus.Report

// Control drives the builders of one run. token is the run's bearer token
// (the Secret <run>-control, mounted in every builder pod). Each call
// returns the reports of the builders that accepted, and an Errors naming
// every builder that did not.
type Control interface {
	// Configure hands each builder the rank table of an epoch, with its
	// rank. Running builders switch to it together at a cycle boundary,
	// without restarting.
	Configure(ctx context.Context, token string, builders []Builder, table ranktable.Document) (Reports, error)
	// Send sends a state command: Start, Pause, Resume, Stop or Reset.
	Send(ctx context.Context, token string, cmd Command, builders []Builder) (Reports, error)
}

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

// MaxParallel bounds the builders one call talks to at once.
const MaxParallel = 64

// maxAnswer bounds what is read of an answer.
const maxAnswer = 1 << 20

// Client is the HTTP implementation of Control.
type Client struct {
	http *http.Client
}

// NewClient returns a Client whose requests give up after timeout, so that
// one hung builder cannot stall a run's reconcile.
func NewClient(timeout time.Duration) *Client {
	return &Client{http: &http.Client{
		Timeout: timeout,
		// Pod IPs are dialled directly, never through an HTTP proxy. The
		// builder serves one request per connection.
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, ResponseHeaderTimeout: timeout},
	}}
}

// Configure implements Control: POST /control/configure with
// {"rank": R, "table": table} to each builder.
func (c *Client) Configure(ctx context.Context, token string, builders []Builder, table ranktable.Document) (Reports, error) {
	doc, err := json.Marshal(table)
	if err != nil {
		return nil, err
	}
	return c.each(ctx, token, Configure, builders, func(b Builder) []byte {
		// The table is marshalled once; only the rank differs.
		body := make([]byte, 0, len(doc)+32)
		body = append(body, `{"rank":`...)
		body = strconv.AppendInt(body, int64(b.Rank), 10)
		body = append(body, `,"table":`...)
		body = append(body, doc...)
		return append(body, '}')
	})
}

// Send implements Control: POST /control/<cmd>, no body.
func (c *Client) Send(ctx context.Context, token string, cmd Command, builders []Builder) (Reports, error) {
	if cmd == Configure {
		return nil, errors.New("buildercontrol: configure needs a table; use Configure")
	}
	return c.each(ctx, token, cmd, builders, nil)
}

// each sends cmd to every builder, MaxParallel at a time.
func (c *Client) each(ctx context.Context, token string, cmd Command, builders []Builder, body func(Builder) []byte) (Reports, error) {
	reports := make(Reports, len(builders))
	var failed []*BuilderError
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(MaxParallel)
	for _, b := range builders {
		g.Go(func() error {
			var payload []byte
			if body != nil {
				payload = body(b)
			}
			rep, done, berr := c.post(ctx, token, cmd, b, payload)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case berr != nil:
				failed = append(failed, berr)
			case !done:
				reports[b.Rank] = rep
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines never fail
	if len(failed) == 0 {
		return reports, nil
	}
	slices.SortFunc(failed, func(a, b *BuilderError) int { return int(a.Rank) - int(b.Rank) })
	return reports, &Errors{Command: cmd, Of: len(builders), Builders: failed}
}

// answer is a builder's answer: the status document on success, an error
// (with the state and allowed commands) on refusal.
type answer struct {
	builderstatus.Report
	Error string `json:"error"`
}

// post sends one command to one builder: its report, or done when it
// already was where cmd takes it, or why it failed.
func (c *Client) post(ctx context.Context, token string, cmd Command, b Builder, body []byte) (builderstatus.Report, bool, *BuilderError) {
	fail := func(status int, msg, state string) (builderstatus.Report, bool, *BuilderError) {
		return builderstatus.Report{}, false, &BuilderError{Rank: b.Rank, Command: cmd, Status: status, Message: msg, State: state}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.URL+"/control/"+string(cmd), bytes.NewReader(body))
	if err != nil {
		return fail(0, err.Error(), "")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fail(0, err.Error(), "")
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fail(resp.StatusCode, "reading the answer: "+err.Error(), "")
	}
	var a answer
	jerr := json.Unmarshal(raw, &a)
	switch {
	case resp.StatusCode == http.StatusOK && jerr == nil:
		return a.Report, false, nil
	case resp.StatusCode == http.StatusOK:
		return fail(resp.StatusCode, "decoding the status it answered: "+jerr.Error(), "")
	case resp.StatusCode == http.StatusConflict && jerr == nil && AlreadyIn(cmd, a.State):
		// The command's end state is already reached, e.g. pause of a
		// builder that the running set's pause reached first.
		return builderstatus.Report{}, true, nil
	}
	msg := a.Error
	if jerr != nil || msg == "" {
		msg = http.StatusText(resp.StatusCode)
		if len(raw) > 0 {
			msg += ": " + clip(string(raw))
		}
	}
	return fail(resp.StatusCode, msg, a.State)
}

// AlreadyIn: a builder in state is where cmd would take it, so refusing
// cmd (409) means it is done.
func AlreadyIn(cmd Command, state string) bool {
	switch cmd {
	case Start, Resume:
		return state == builderstatus.StateRunning
	case Pause:
		return state == builderstatus.StatePaused
	case Stop:
		return state == builderstatus.StateReady
	case Reset:
		return state == builderstatus.StateNotReady
	}
	return false
}

// clip shortens what a builder said for a message.
func clip(s string) string { return shortlist.Clip(s, 200) }
