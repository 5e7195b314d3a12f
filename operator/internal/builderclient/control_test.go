package builderclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderemu"
	"daq.io/eventbuilder/operator/internal/ranktable"
)

func table(epoch int64, states ...string) ranktable.Document {
	d := ranktable.Document{Version: ranktable.Version, Run: "r", Epoch: epoch, Layout: "Folded"}
	for i, s := range states {
		d.Ranks = append(d.Ranks, ranktable.Rank{Rank: i, Address: fmt.Sprintf("r-eb-%d.r-eb:7000", i), State: s})
	}
	return d
}

// The client drives emulated builders: configure with each one's rank,
// then start, with the token; the answers are the builders' status.
func TestClientDrivesBuilders(t *testing.T) {
	farm := builderemu.NewFarm()
	defer farm.Close()
	var builders []builderapi.Builder
	var emu []*builderemu.Builder
	for r := range int32(3) {
		key := fmt.Sprint(r)
		emu = append(emu, farm.Start(key, builderemu.Options{Token: "s3cret", Rank: r, Mesh: "r"}))
		builders = append(builders, builderapi.Builder{Rank: r, URL: farm.URL(key)})
	}
	c := New(Timeouts{Poll: time.Second, Control: time.Second})
	ctx := context.Background()

	reps, err := c.Configure(ctx, "s3cret", builders, table(1, "live", "live", "dummy"))
	if err != nil {
		t.Fatal(err)
	}
	for r, rep := range reps {
		if rep.State != builderapi.StateReady || rep.Epoch != 1 || rep.Rank != r {
			t.Errorf("rank %d answered %+v", r, rep)
		}
	}
	if reps[2].Role != builderapi.RoleDummy || reps[0].Role != builderapi.RoleLive {
		t.Errorf("roles %q %q", reps[0].Role, reps[2].Role)
	}
	if reps, err = c.Send(ctx, "s3cret", builderapi.Start, builders); err != nil || len(reps) != 3 || reps[1].State != builderapi.StateRunning {
		t.Fatalf("start: %v %+v", err, reps)
	}
	// A new epoch while running: accepted as pending, switched together.
	reps, err = c.Configure(ctx, "s3cret", builders, table(2, "live", "dummy", "live"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range emu {
		if e, p := b.Epoch(); e != 2 || p != 0 {
			t.Errorf("builder %s at epoch %d pending %d, want 2", b.Key(), e, p)
		}
	}
	// Pause reaches the whole set through the first builder; the others
	// answer 409 in PAUSED, which is done, not an error.
	reps, err = c.Send(ctx, "s3cret", builderapi.Pause, builders)
	if err != nil {
		t.Fatalf("pause: %v", err)
	}
	for _, b := range emu {
		if b.State() != builderemu.Paused {
			t.Errorf("builder %s %s", b.Key(), b.State())
		}
	}
	if len(reps) == 0 || len(reps) > 3 {
		t.Errorf("pause reports %v", reps)
	}
	if _, err := c.Send(ctx, "s3cret", builderapi.Configure, builders); err == nil {
		t.Errorf("Send(configure) without a table succeeded")
	}
}

// Every builder that refuses, or does not answer, is named with its rank
// and why; the others' reports come back.
func TestClientErrors(t *testing.T) {
	farm := builderemu.NewFarm()
	defer farm.Close()
	farm.Start("ok", builderemu.Options{Token: "s3cret", Rank: 0})
	farm.Start("other-token", builderemu.Options{Token: "other", Rank: 1})
	farm.Start("no-token", builderemu.Options{Rank: 2})
	failing := farm.Start("error", builderemu.Options{Token: "s3cret", Rank: 4})
	failing.Fail("ring broken")
	hung := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client going
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer hung.Close()
	builders := []builderapi.Builder{
		{Rank: 0, URL: farm.URL("ok")}, {Rank: 1, URL: farm.URL("other-token")}, {Rank: 2, URL: farm.URL("no-token")},
		{Rank: 3, URL: farm.URL("nobody")}, {Rank: 4, URL: farm.URL("error")}, {Rank: 5, URL: hung.URL},
	}
	reps, err := New(Timeouts{Poll: 300 * time.Millisecond, Control: 300 * time.Millisecond}).Configure(context.Background(), "s3cret", builders, table(1, "live", "live", "live", "live", "live", "live"))
	var errs *builderapi.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v, want *Errors", err)
	}
	if len(reps) != 1 || reps[0].State != builderapi.StateReady {
		t.Errorf("reports %+v, want rank 0 READY", reps)
	}
	want := []struct {
		rank   int32
		status int
		msg    string
	}{
		{1, 401, "wrong bearer token"},
		{2, 403, "the control API is disabled"},
		{3, 0, "EOF"},
		{4, 409, "cannot configure in state ERROR"},
		{5, 0, "no answer within the control timeout"},
	}
	if len(errs.Builders) != len(want) || errs.Of != 6 || errs.Command != builderapi.Configure {
		t.Fatalf("errors %v", errs)
	}
	for i, w := range want {
		b := errs.Builders[i]
		if b.Rank != w.rank || b.Status != w.status || strings.Count(b.Message, w.msg) != 1 {
			t.Errorf("error %d: %+v, want rank %d status %d containing %q", i, b, w.rank, w.status, w.msg)
		}
	}
	if errs.Builders[3].State != builderapi.StateError {
		t.Errorf("a 409 should carry the state: %+v", errs.Builders[3])
	}
	if !errs.Unauthorized() || errs.Builders[2].Unauthorized() {
		t.Errorf("Unauthorized: set %v, rank 3 %v", errs.Unauthorized(), errs.Builders[2].Unauthorized())
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "configure failed on 5 of 6 builders: rank 1: configure: 401 wrong bearer token; rank 2: configure: 403") ||
		strings.Count(msg, "; rank ") != 4 {
		t.Errorf("message %q", msg)
	}
	var one *builderapi.BuilderError
	if !errors.As(err, &one) || one.Rank != 1 {
		t.Errorf("errors.As finds %+v", one)
	}
}

// What goes on the wire: the configure body and headers of the contract.
func TestClientRequests(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[r.Method+" "+r.URL.Path] = r.Header.Get("Authorization") + "|" + r.Header.Get("Content-Type") + "|" + string(body)
		mu.Unlock()
		_, _ = w.Write([]byte(`{"state":"READY","epoch":7}`))
	}))
	defer srv.Close()
	c := New(Timeouts{Poll: time.Second, Control: time.Second})
	doc := table(7, "live")
	if _, err := c.Configure(context.Background(), "tok", []builderapi.Builder{{Rank: 0, URL: srv.URL}}, doc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(context.Background(), "tok", builderapi.Resume, []builderapi.Builder{{Rank: 0, URL: srv.URL}}); err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(seen["POST /control/configure"], "|", 3)
	auth, ctype, body := parts[0], parts[1], parts[2]
	var got struct {
		Rank  *int               `json:"rank"`
		Table ranktable.Document `json:"table"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.Rank == nil || *got.Rank != 0 || got.Table.Epoch != 7 || got.Table.Version != ranktable.Version {
		t.Errorf("configure body %s (%v)", body, err)
	}
	if auth != "Bearer tok" || ctype != "application/json" {
		t.Errorf("configure headers: Authorization %q Content-Type %q", auth, ctype)
	}
	if r := seen["POST /control/resume"]; r != "Bearer tok||" {
		t.Errorf("resume: %q, want the token and no body", r)
	}
}

// Many builders are addressed in parallel, at most MaxParallel at once.
func TestClientParallelism(t *testing.T) {
	var now, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := now.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		now.Add(-1)
		_, _ = w.Write([]byte(`{"state":"RUNNING"}`))
	}))
	defer srv.Close()
	var builders []builderapi.Builder
	for r := range int32(200) {
		builders = append(builders, builderapi.Builder{Rank: r, URL: srv.URL})
	}
	start := time.Now()
	reps, err := New(Timeouts{Poll: 5 * time.Second, Control: 5 * time.Second}).Send(context.Background(), "t", builderapi.Start, builders)
	if err != nil || len(reps) != 200 {
		t.Fatalf("%d reports, %v", len(reps), err)
	}
	if m := most.Load(); m > MaxParallel || m < 8 {
		t.Errorf("%d requests at once, want parallel and at most %d", m, MaxParallel)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("200 builders took %v", d)
	}
}

func TestAlreadyIn(t *testing.T) {
	for _, tc := range []struct {
		cmd   builderapi.Command
		state string
		want  bool
	}{
		{builderapi.Start, builderapi.StateRunning, true},
		{builderapi.Resume, builderapi.StateRunning, true},
		{builderapi.Pause, builderapi.StatePaused, true},
		{builderapi.Stop, builderapi.StateReady, true},
		{builderapi.Reset, builderapi.StateNotReady, true},
		{builderapi.Start, builderapi.StateNotReady, false},
		{builderapi.Pause, builderapi.StateReady, false},
		{builderapi.Configure, builderapi.StateReady, false},
	} {
		if got := builderapi.AlreadyIn(tc.cmd, tc.state); got != tc.want {
			t.Errorf("AlreadyIn(%s, %s) = %v", tc.cmd, tc.state, got)
		}
	}
}

// The client reads eb-builder's error bodies as its tests write them
// (builder/tests/golden.hpp): the message, and a refusal's state.
func TestClientReadsTheBuildersErrorBodies(t *testing.T) {
	for _, c := range []struct {
		golden       string
		status       int
		state        string
		unauthorized bool
	}{
		{"error-400.json", 400, "", false},
		{"error-401.json", 401, "", true},
		{"error-403.json", 403, "", true},
		{"error-404.json", 404, "", false},
		{"error-409.json", 409, builderapi.StateNotReady, false},
	} {
		body, err := os.ReadFile("../builderapi/testdata/builder/" + c.golden)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(body, &doc); err != nil || doc.Error == "" {
			t.Fatalf("%s: %v, error %q", c.golden, err, doc.Error)
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			_, _ = w.Write(body)
		}))
		_, err = New(Timeouts{Poll: time.Second, Control: time.Second}).Send(context.Background(), "t", builderapi.Start, []builderapi.Builder{{Rank: 7, URL: srv.URL}})
		srv.Close()
		var one *builderapi.BuilderError
		switch {
		case !errors.As(err, &one):
			t.Errorf("%s: error %v, want a BuilderError", c.golden, err)
		case one.Rank != 7 || one.Status != c.status || one.Message != doc.Error || one.State != c.state || one.Unauthorized() != c.unauthorized:
			t.Errorf("%s: %+v (unauthorized %v); want status %d, message %q, state %q", c.golden, one, one.Unauthorized(), c.status, doc.Error, c.state)
		}
	}
}

// What no builder writes, a proxy, a crashed process or another server on
// the port may: 5xx pages and garbage are errors naming the status and
// quoting the start of the body, never reports.
func TestClientReadsGarbageAndServerErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
		says   string
	}{
		{"a proxy's 502 page", 502, "<html><body>Bad Gateway</body></html>", "Bad Gateway: <html><body>Bad Gateway"},
		{"a 500 without a body", 500, "", "Internal Server Error"},
		{"200 with garbage", 200, "\x00\x01not json", "decoding the status it answered"},
		{"200 with a JSON array", 200, "[1,2]", "decoding the status it answered"},
		{"409 with garbage", 409, "busy", "Conflict: busy"},
		{"200 cut short", 200, `{"state":"RUNN`, "decoding the status it answered"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(c.status)
			_, _ = io.WriteString(w, c.body)
		}))
		reps, err := New(Timeouts{Poll: time.Second, Control: time.Second}).Send(context.Background(), "t", builderapi.Pause, []builderapi.Builder{{Rank: 3, URL: srv.URL}})
		srv.Close()
		var one *builderapi.BuilderError
		if !errors.As(err, &one) || len(reps) != 0 || one.Status != c.status || !strings.Contains(one.Message, c.says) {
			t.Errorf("%s: reports %v, error %+v; want status %d saying %q", c.name, reps, one, c.status, c.says)
		}
	}
}
