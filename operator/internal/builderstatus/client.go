// Package builderstatus reads builders' status over HTTP and folds the
// reports of all units of a run into the run's status.
package builderstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// StateRunning and StateError are the builder states that decide the phase.
const (
	StateRunning = "RUNNING"
	StateError   = "ERROR"
)

// Report is the JSON document a builder serves at GET /status. Counters are
// totals since the builder process started.
type Report struct {
	State            string `json:"state"`
	EventsBuilt      int64  `json:"events_built"`
	EventsIncomplete int64  `json:"events_incomplete"`
	BytesBuilt       int64  `json:"bytes_built"`
	LastError        string `json:"last_error"`
}

// maxReportSize bounds what is read from a builder.
const maxReportSize = 1 << 20

// Client polls builders.
type Client struct {
	http *http.Client
}

// NewClient returns a Client whose requests give up after timeout, so that
// one hung builder cannot stall a run's reconcile.
func NewClient(timeout time.Duration) *Client {
	return &Client{http: &http.Client{
		Timeout: timeout,
		// Pod IPs are dialled directly, never through an HTTP proxy.
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute},
	}}
}

// Get fetches baseURL/status.
func (c *Client) Get(ctx context.Context, baseURL string) (Report, error) {
	var r Report
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/status", nil)
	if err != nil {
		return r, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("GET %s: %s", req.URL, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxReportSize)).Decode(&r); err != nil {
		return r, fmt.Errorf("GET %s: decoding status: %w", req.URL, err)
	}
	return r, nil
}
