// Package builderclient is the operator's client of the builders' HTTP API
// (builder/docs/control-api.md, types in builderapi): GET /status for the
// polls, and the run-control commands of the ECS-like state machine
// NOT_READY, READY, RUNNING, PAUSED, ERROR, authenticated with the run's
// token. A command addresses a set of builders of one run at once, in
// parallel (bounded), and reports each builder that refused or did not
// answer by its rank. What to send to whom is decided elsewhere
// (internal/lifecycle), purely. Polls and commands share one connection
// policy (Client).
package builderclient

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

	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/ranktable"
	"daq.io/eventbuilder/operator/internal/shortlist"
)

// Control drives the builders of one run. token is the run's bearer token
// (the Secret <run>-control, mounted in every builder pod). Each call
// returns the reports of the builders that accepted, and an Errors naming
// every builder that did not.
type Control interface {
	// Configure hands each builder the rank table of an epoch, with its
	// rank. Running builders switch to it together at a cycle boundary,
	// without restarting.
	Configure(ctx context.Context, token string, builders []builderapi.Builder, table ranktable.Document) (builderapi.Reports, error)
	// Send sends a state command: Start, Pause, Resume, Stop or Reset.
	Send(ctx context.Context, token string, cmd builderapi.Command, builders []builderapi.Builder) (builderapi.Reports, error)
}

// MaxParallel bounds the builders one call talks to at once.
const MaxParallel = 64

// idleConnTimeout closes a connection the client has not used for this
// long, half a second before the builder would (its HTTP server's idle
// timeout is 3 s, builder/src/control/http_server.hpp): a command is never
// sent on a connection the builder is closing (net/http does not retry a
// POST there). A run's polls (every 2 s by default, more often while it
// converges) keep each builder's connection open, and a failover's
// configure goes out on it without a new handshake.
const idleConnTimeout = 2500 * time.Millisecond

// Timeouts bound each call, so that one hung builder cannot stall a run.
type Timeouts struct {
	Poll    time.Duration // a GET /status
	Control time.Duration // one command to one builder
}

// Client speaks to builders over one pool of connections, at most one
// kept per builder: pod IPs are dialled directly, never through an HTTP
// proxy.
type Client struct {
	http     *http.Client
	timeouts Timeouts
}

// New returns a Client whose calls give up after timeouts.
func New(timeouts Timeouts) *Client {
	return &Client{timeouts: timeouts, http: &http.Client{
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: idleConnTimeout},
	}}
}

// bounded bounds one call to a builder by timeout d, named what.
func bounded(ctx context.Context, what string, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("no answer within the %s timeout (%s)", what, d))
}

// named says so when the call's own timeout cut it off (bounded), rather
// than the bare "context deadline exceeded" the HTTP client reports.
func named(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded) || errors.Is(err, cause) {
		return err // not ours, or the HTTP client already reports it (Go 1.23 on)
	}
	return fmt.Errorf("%w: %w", cause, err)
}

// maxAnswer bounds what is read of a builder's answer.
const maxAnswer = 1 << 20

// call sends req and reads its answer to the end (at most maxAnswer), so
// that the connection can carry the next call: the answer's status and
// body, or status 0 and why none came.
func (c *Client) call(req *http.Request) (int, []byte, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, named(req.Context(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("reading the answer: %w", named(req.Context(), err))
	}
	return resp.StatusCode, body, nil
}

// Get fetches baseURL/status.
func (c *Client) Get(ctx context.Context, baseURL string) (builderapi.Report, error) {
	ctx, cancel := bounded(ctx, "poll", c.timeouts.Poll)
	defer cancel()
	var r builderapi.Report
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/status", nil)
	if err != nil {
		return r, err
	}
	status, body, err := c.call(req)
	switch {
	case status == 0:
		return r, err
	case err != nil:
		return r, fmt.Errorf("GET %s: %w", req.URL, err)
	case status != http.StatusOK:
		return r, fmt.Errorf("GET %s: %d %s", req.URL, status, http.StatusText(status))
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("GET %s: decoding status: %w", req.URL, err)
	}
	return r, nil
}

// Configure implements Control: POST /control/configure with
// {"rank": R, "table": table} to each builder.
func (c *Client) Configure(ctx context.Context, token string, builders []builderapi.Builder, table ranktable.Document) (builderapi.Reports, error) {
	doc, err := json.Marshal(table)
	if err != nil {
		return nil, err
	}
	return c.each(ctx, token, builderapi.Configure, builders, func(b builderapi.Builder) []byte {
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
func (c *Client) Send(ctx context.Context, token string, cmd builderapi.Command, builders []builderapi.Builder) (builderapi.Reports, error) {
	if cmd == builderapi.Configure {
		return nil, errors.New("builderclient: configure needs a table; use Configure")
	}
	return c.each(ctx, token, cmd, builders, nil)
}

// each sends cmd to every builder, MaxParallel at a time.
func (c *Client) each(ctx context.Context, token string, cmd builderapi.Command, builders []builderapi.Builder, body func(builderapi.Builder) []byte) (builderapi.Reports, error) {
	reports := make(builderapi.Reports, len(builders))
	var failed []*builderapi.BuilderError
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
	slices.SortFunc(failed, func(a, b *builderapi.BuilderError) int { return int(a.Rank) - int(b.Rank) })
	return reports, &builderapi.Errors{Command: cmd, Of: len(builders), Builders: failed}
}

// answer is a builder's answer: the status document on success, an error
// (with the state and allowed commands) on refusal.
type answer struct {
	builderapi.Report
	Error string `json:"error"`
}

// post sends one command to one builder: its report, or done when it
// already was where cmd takes it, or why it failed.
func (c *Client) post(ctx context.Context, token string, cmd builderapi.Command, b builderapi.Builder, body []byte) (builderapi.Report, bool, *builderapi.BuilderError) {
	fail := func(status int, msg, state string) (builderapi.Report, bool, *builderapi.BuilderError) {
		return builderapi.Report{}, false, &builderapi.BuilderError{Rank: b.Rank, Command: cmd, Status: status, Message: msg, State: state}
	}
	ctx, cancel := bounded(ctx, "control", c.timeouts.Control)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.URL+"/control/"+string(cmd), bytes.NewReader(body))
	if err != nil {
		return fail(0, err.Error(), "")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	status, raw, err := c.call(req)
	if err != nil {
		return fail(status, err.Error(), "")
	}
	var a answer
	jerr := json.Unmarshal(raw, &a)
	switch {
	case status == http.StatusOK && jerr == nil:
		return a.Report, false, nil
	case status == http.StatusOK:
		return fail(status, "decoding the status it answered: "+jerr.Error(), "")
	case status == http.StatusConflict && jerr == nil && builderapi.AlreadyIn(cmd, a.State):
		// The command's end state is already reached, e.g. pause of a
		// builder that the running set's pause reached first.
		return builderapi.Report{}, true, nil
	}
	msg := a.Error
	if jerr != nil || msg == "" {
		msg = http.StatusText(status)
		if len(raw) > 0 {
			msg += ": " + clip(string(raw))
		}
	}
	return fail(status, msg, a.State)
}

// clip shortens what a builder said for a message.
func clip(s string) string { return shortlist.Clip(s, 200) }
