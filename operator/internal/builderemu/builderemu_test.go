package builderemu

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"daq.io/eventbuilder/operator/internal/builderapi"
	"daq.io/eventbuilder/operator/internal/builderclient"
)

// The emulation follows builder/docs/control-api.md; these check the
// contract's rules one by one, over HTTP.

type answer struct {
	code int
	doc  map[string]any
	www  string
}

func post(t *testing.T, url, token, cmd, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/control/"+cmd, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	defer resp.Body.Close()
	a := answer{code: resp.StatusCode, www: resp.Header.Get("WWW-Authenticate")}
	_ = json.NewDecoder(resp.Body).Decode(&a.doc)
	return a
}

func get(t *testing.T, url, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// cfgBody is a configure request of rank for a table of epoch
// whose ranks have the given states.
func cfgBody(rank int, epoch int64, states ...string) string {
	var ranks []string
	for i, s := range states {
		ranks = append(ranks, fmt.Sprintf(`{"rank":%d,"address":"r-eb-%d.r-eb:7000","state":%q,"endpoint":"ignored"}`, i, i, s))
	}
	return fmt.Sprintf(`{"rank":%d,"table":{"version":"eventbuilder.daq.io/ranktable/v1","run":"r","epoch":%d,"layout":"Folded","ranks":[%s]}}`,
		rank, epoch, strings.Join(ranks, ","))
}

func TestAuthentication(t *testing.T) {
	f := NewFarm()
	defer f.Close()
	f.Start("a", Options{Token: "tok", Rank: -1})
	f.Start("none", Options{Rank: -1})
	for _, tc := range []struct {
		key, token string
		code       int
		msg, www   string
	}{
		{"a", "", 401, "missing Authorization: Bearer <token>", "Bearer"},
		{"a", "other", 401, "wrong bearer token", "Bearer"},
		{"none", "tok", 403, "the control API is disabled", ""},
		{"a", "tok", 409, "cannot start in state NOT_READY; allowed: configure, reset", ""},
	} {
		a := post(t, f.URL(tc.key), tc.token, "start", "")
		if a.code != tc.code || !strings.Contains(fmt.Sprint(a.doc["error"]), tc.msg) || a.www != tc.www {
			t.Errorf("%s with %q: %d %v (WWW-Authenticate %q), want %d %q", tc.key, tc.token, a.code, a.doc, a.www, tc.code, tc.msg)
		}
	}
	// Reads need no token.
	if code, _ := get(t, f.URL("none"), "/status"); code != 200 {
		t.Errorf("GET /status: %d", code)
	}
}

func TestStateMachine(t *testing.T) {
	f := NewFarm()
	defer f.Close()
	b := f.Start("a", Options{Token: "tok", Rank: 1, Mesh: "m"})
	url := f.URL("a")
	if code, body := get(t, url, "/readyz"); code != 503 || !strings.Contains(body, NotReady) {
		t.Errorf("readyz before configure: %d %s", code, body)
	}
	steps := []struct {
		cmd, body string
		code      int
		state     string
	}{
		{"pause", "", 409, NotReady},
		{"configure", cfgBody(1, 1, "live", "live"), 200, Ready},
		{"configure", cfgBody(1, 1, "live", "live"), 200, Ready},  // same epoch, same table: idempotent
		{"configure", cfgBody(1, 1, "live", "dummy"), 409, Ready}, // same epoch, other table
		{"start", "", 200, Running},
		{"start", "", 409, Running},
		{"pause", "", 200, Paused},
		{"resume", "", 200, Running},
		{"stop", "", 200, Ready},
		{"start", "", 200, Running}, // the table is kept
		{"reset", "", 200, NotReady},
		{"start", "", 409, NotReady}, // the table is forgotten
	}
	for i, s := range steps {
		a := post(t, url, "tok", s.cmd, s.body)
		if a.code != s.code || b.State() != s.state {
			t.Fatalf("step %d %s: %d %v, state %s; want %d %s", i, s.cmd, a.code, a.doc, b.State(), s.code, s.state)
		}
		if a.code == 409 && (a.doc["state"] != s.state || a.doc["allowed"] == nil) {
			t.Errorf("step %d: a refusal names the state and allowed commands: %v", i, a.doc)
		}
		if a.code == 200 && a.doc["state"] != s.state {
			t.Errorf("step %d: success answers the status: %v", i, a.doc)
		}
	}
	b.Fail("boom")
	if a := post(t, url, "tok", "configure", cfgBody(1, 2, "live", "live")); a.code != 409 {
		t.Errorf("configure in ERROR: %d", a.code)
	}
	if code, _ := get(t, url, "/healthz"); code != 200 {
		t.Errorf("healthz in ERROR: %d, want 200", code)
	}
	if a := post(t, url, "tok", "reset", ""); a.code != 200 || b.State() != NotReady {
		t.Errorf("reset from ERROR: %d %s", a.code, b.State())
	}
}

func TestConfigureValidation(t *testing.T) {
	f := NewFarm()
	defer f.Close()
	f.Start("a", Options{Token: "tok", Rank: 1})
	url := f.URL("a")
	good := cfgBody(1, 3, "live", "live")
	for _, tc := range []struct {
		body string
		code int
		msg  string
	}{
		{"{", 400, "body"},
		{strings.Replace(good, "ranktable/v1", "ranktable/v9", 1), 400, "table.version"},
		{strings.Replace(good, `"epoch":3`, `"epoch":0`, 1), 400, "table.epoch"},
		{strings.Replace(good, "Folded", "Sideways", 1), 400, "table.layout"},
		{strings.Replace(good, `"rank":1,"address"`, `"rank":7,"address"`, 1), 400, "table.ranks[1].rank"},
		{strings.Replace(good, "r-eb-1.r-eb:7000", "r-eb-1", 1), 400, "table.ranks[1].address 'r-eb-1': expected host:port"},
		{strings.Replace(good, `"state":"live","endpoint":"ignored"}]`, `"state":"spare"}]`, 1), 400, "table.ranks[1].state"},
		{strings.Replace(good, `"state":"live","endpoint"`, `"state":"live","function":"ru","endpoint"`, 1), 400,
			"table.ranks[0].function 'ru': expected RU+BU or none"},
		{strings.Replace(good, "Folded", "Unfolded", 1), 400, "table.ranks[0].function '': expected RU or BU"},
		{cfgBody(5, 3, "live", "live"), 400, "rank 5: not in the table"},
		// Streams: ranks[].sources and unreadStreams.
		{withSources(good, 0, `"a"`), 400, "table.ranks[0].sources: expected an array of stream names"},
		{withSources(good, 0, `["a",1]`), 400, "table.ranks[0].sources: expected an array of stream names"},
		{withSources(good, 0, `null`), 400, "table.ranks[0].sources: expected an array of stream names"},
		{withSources(good, 1, `["a","x y"]`), 400,
			"table.ranks[1].sources[1] 'x y': expected a stream name of 1 to 128 characters, letters, digits and . _ : / - (starting with a letter or digit), as the Fabric's endpoints[].streams"},
		{withSources(good, 0, `["-a"]`), 400, "table.ranks[0].sources[0] '-a': expected a stream name"},
		{withSources(good, 0, `[""]`), 400, "table.ranks[0].sources[0] '': expected a stream name"},
		{withSources(good, 0, `["`+strings.Repeat("s", 129)+`"]`), 400,
			"table.ranks[0].sources[0] '" + strings.Repeat("s", 80) + "...': expected a stream name"},
		{withSources(strings.Replace(good, `"state":"live","endpoint"`, `"state":"live","function":"BU","endpoint"`, 1), 0, `["a"]`), 400,
			"table.ranks[0].sources: on a rank that runs no RU (function BU); a BU reads no streams: remove them"},
		{withSources(withSources(good, 0, `["a","b"]`), 1, `["c","b"]`), 400,
			"table.ranks[1].sources[1] 'b': also at table.ranks[0].sources[1]; each stream is read by one RU or listed unread once"},
		{withUnread(good, `{}`), 400, "table.unreadStreams: expected an array of stream names"},
		{withUnread(good, `["ok","a b"]`), 400, "table.unreadStreams[1] 'a b': expected a stream name of 1 to 128 characters"},
		{withUnread(withSources(good, 1, `["b"]`), `["a","b"]`), 400,
			"table.unreadStreams[1] 'b': also at table.ranks[1].sources[0]; each stream is read by one RU or listed unread once"},
		{withUnread(good, `["a","b","a"]`), 400,
			"table.unreadStreams[2] 'a': also at table.unreadStreams[0]; each stream is read by one RU or listed unread once"},
		{tooManyRanks(), 400, "table.ranks: 65537 entries; at most 65536"},
		{cfgBody(0, 3, "live", "live"), 400, "--rank 1"},
		{good, 200, ""},
		{cfgBody(1, 2, "live", "live"), 409, "epochs only go forward"},
	} {
		a := post(t, url, "tok", "configure", tc.body)
		if a.code != tc.code || !strings.Contains(fmt.Sprint(a.doc["error"]), tc.msg) {
			t.Errorf("%.60s...: %d %v, want %d %q", tc.body, a.code, a.doc, tc.code, tc.msg)
		}
	}
}

// withSources puts sources (JSON) on rank r of a cfgBody's table.
func withSources(body string, r int, sources string) string {
	entry := fmt.Sprintf(`{"rank":%d,"address":"r-eb-%d.r-eb:7000",`, r, r)
	return strings.Replace(body, entry, entry+`"sources":`+sources+",", 1)
}

// withUnread puts unreadStreams (JSON) in a cfgBody's table.
func withUnread(body, unread string) string {
	return strings.Replace(body, `"layout":`, `"unreadStreams":`+unread+`,"layout":`, 1)
}

// Streams the table is well-formed with: sources on live RUs, a dummy's
// ignored (even a BU's, any value), unread streams; configured again
// they are the same table, other streams another one.
func TestConfigureStreams(t *testing.T) {
	f := NewFarm()
	defer f.Close()
	f.Start("a", Options{Token: "tok", Rank: 1})
	url := f.URL("a")
	body := withUnread(withSources(withSources(cfgBody(1, 3, "live", "live", "dummy"), 0, `["velo:0/a-1.b_c","Z9"]`), 1, `[]`),
		`["rich-7"]`)
	body = withSources(strings.Replace(body, `"state":"dummy","endpoint"`, `"state":"dummy","function":"BU","endpoint"`, 1), 2, `"ignored"`)
	if a := post(t, url, "tok", "configure", body); a.code != 200 {
		t.Fatalf("configure: %d %v", a.code, a.doc)
	}
	if a := post(t, url, "tok", "configure", body); a.code != 200 {
		t.Errorf("the same table again: %d %v", a.code, a.doc)
	}
	other := strings.Replace(body, `"rich-7"`, `"rich-8"`, 1)
	if a := post(t, url, "tok", "configure", other); a.code != 409 || !strings.Contains(fmt.Sprint(a.doc["error"]), "another table") {
		t.Errorf("other unread streams at that epoch: %d %v, want 409", a.code, a.doc)
	}
}

// tooManyRanks is a configure body of one rank more than the builder takes,
// each entry as short as can be (the body stays under 4 MiB).
func tooManyRanks() string {
	ranks := make([]string, maxTableRanks+1)
	for i := range ranks {
		ranks[i] = fmt.Sprintf(`{"rank":%d,"address":"h%d:7","state":"dummy"}`, i, i)
	}
	return `{"rank":1,"table":{"version":"eventbuilder.daq.io/ranktable/v1","epoch":3,"layout":"Folded","ranks":[` + strings.Join(ranks, ",") + `]}}`
}

// A running set switches to a new epoch together, once every unit live in
// both tables holds it; a dummy stands by and joins when made live; pause
// and stop act on the whole set; lost peers reset with a new epoch.
func TestMesh(t *testing.T) {
	f := NewFarm()
	defer f.Close()
	var bs []*Builder
	for r := range 3 {
		bs = append(bs, f.Start(fmt.Sprint(r), Options{Token: "tok", Rank: int32(r), Mesh: "m"}))
	}
	for r := range 3 {
		if a := post(t, f.URL(fmt.Sprint(r)), "tok", "configure", cfgBody(r, 1, "live", "live", "dummy")); a.code != 200 {
			t.Fatal(a)
		}
		post(t, f.URL(fmt.Sprint(r)), "tok", "start", "")
	}
	var st map[string]any
	_, body := get(t, f.URL("2"), "/status")
	_ = json.Unmarshal([]byte(body), &st)
	if st["state"] != Running || st["role"] != "dummy" || st["events_built"].(float64) != 0 {
		t.Errorf("standby spare: %v", st)
	}

	// Rank 1 dies: rank 0 reports it lost.
	f.Kill("1")
	if _, err := http.Get(f.URL("1") + "/status"); err == nil {
		t.Errorf("a killed builder still answers")
	}
	_, body = get(t, f.URL("0"), "/status")
	_ = json.Unmarshal([]byte(body), &st)
	if fmt.Sprint(st["lost_peers"]) != "[1]" {
		t.Errorf("rank 0 lost_peers %v, want [1]", st["lost_peers"])
	}

	// Epoch 2: rank 1 a dummy, rank 2 live. Rank 0 is the only unit live
	// in both: it switches when configured; the spare joins when it is.
	post(t, f.URL("2"), "tok", "configure", cfgBody(2, 2, "live", "dummy", "live"))
	if e, p := bs[2].Epoch(); e != 1 || p != 2 {
		t.Errorf("spare before rank 0 holds epoch 2: epoch %d pending %d, want 1 and 2", e, p)
	}
	post(t, f.URL("0"), "tok", "configure", cfgBody(0, 2, "live", "dummy", "live"))
	for _, b := range []*Builder{bs[0], bs[2]} {
		if e, p := b.Epoch(); e != 2 || p != 0 {
			t.Errorf("builder %s: epoch %d pending %d, want 2", b.Key(), e, p)
		}
	}
	_, body = get(t, f.URL("0"), "/status")
	_ = json.Unmarshal([]byte(body), &st)
	if fmt.Sprint(st["lost_peers"]) != "[]" {
		t.Errorf("lost_peers after the new epoch %v", st["lost_peers"])
	}
	// Pause through rank 2 pauses rank 0 too.
	post(t, f.URL("2"), "tok", "pause", "")
	if bs[0].State() != Paused {
		t.Errorf("rank 0 %s after the set's pause", bs[0].State())
	}
	if a := post(t, f.URL("0"), "tok", "pause", ""); a.code != 409 || a.doc["state"] != Paused {
		t.Errorf("second pause: %d %v", a.code, a.doc)
	}
}

// A restarted builder comes back NOT_READY with no table while its peers
// keep it lost; a new epoch of the same table, configured on every
// builder, takes it back into the running set. Its status decodes with the
// operator's client.
func TestRestartRejoins(t *testing.T) {
	f := NewFarm()
	defer f.Close()
	status := builderclient.New(builderclient.Timeouts{Poll: time.Second, Control: time.Second})
	ctx := context.Background()
	var bs []*Builder
	for r := range 3 {
		bs = append(bs, f.Start(fmt.Sprint(r), Options{Token: "tok", Rank: int32(r), Mesh: "m"}))
		post(t, f.URL(fmt.Sprint(r)), "tok", "configure", cfgBody(r, 1, "live", "live", "live"))
	}
	for r := range 3 {
		post(t, f.URL(fmt.Sprint(r)), "tok", "start", "")
	}
	if f.Restart("nobody") != nil {
		t.Errorf("restarted a builder that was never started")
	}
	bs[1] = f.Restart("1")
	rep, err := status.Get(ctx, f.URL("1"))
	if err != nil || rep.State != NotReady || rep.Epoch != 0 || rep.Rank != 1 || rep.EventsBuilt != 0 {
		t.Errorf("restarted builder: %+v, %v; want NOT_READY rank 1 at epoch 0 with no events", rep, err)
	}
	for _, r := range []string{"0", "2"} {
		if rep, err := status.Get(ctx, f.URL(r)); err != nil || !slices.Equal(rep.LostPeers, []int32{1}) || rep.Epoch != 1 {
			t.Errorf("rank %s: lost_peers %v at epoch %d (%v); want [1] at 1", r, rep.LostPeers, rep.Epoch, err)
		}
	}

	for r := range 3 {
		if a := post(t, f.URL(fmt.Sprint(r)), "tok", "configure", cfgBody(r, 2, "live", "live", "live")); a.code != 200 {
			t.Fatalf("configure rank %d at epoch 2: %v", r, a)
		}
	}
	if e, p := bs[0].Epoch(); e != 1 || p != 2 {
		t.Errorf("rank 0 switched before the restarted unit runs: epoch %d pending %d", e, p)
	}
	post(t, f.URL("1"), "tok", "start", "")
	for r := range 3 {
		rep, err := status.Get(ctx, f.URL(fmt.Sprint(r)))
		if err != nil || rep.State != Running || rep.Epoch != 2 || rep.PendingEpoch != 0 || len(rep.LostPeers) != 0 || (r != 1 && rep.Peers[1].State != "up") {
			t.Errorf("rank %d after the rejoin: %+v, %v; want RUNNING at epoch 2, nobody lost, rank 1 up", r, rep, err)
		}
	}
}

// A joiner that cannot join (its data network down, or its process dead)
// is reported lost by the running set at the epoch that brings it in, as
// eb-builder does after --join-timeout-ms; once reachable, a later epoch
// takes it in.
func TestJoinersThatCannotJoinAreLost(t *testing.T) {
	f := NewFarm()
	defer f.Close()
	status := builderclient.New(builderclient.Timeouts{Poll: time.Second, Control: time.Second})
	ctx := context.Background()
	// Ranks 0 and 1 live, 2 and 3 spares: 2 unreachable, 3 killed.
	for r := range 4 {
		f.Start(fmt.Sprint(r), Options{Token: "tok", Rank: int32(r), Mesh: "m"})
		post(t, f.URL(fmt.Sprint(r)), "tok", "configure", cfgBody(r, 1, "live", "live", "dummy", "dummy"))
		post(t, f.URL(fmt.Sprint(r)), "tok", "start", "")
	}
	f.SetUnreachable("2", true)
	f.Kill("3")
	configure := func(epoch int64, states ...string) {
		t.Helper()
		for r := range 3 {
			if a := post(t, f.URL(fmt.Sprint(r)), "tok", "configure", cfgBody(r, epoch, states...)); a.code != 200 {
				t.Fatalf("configure rank %d at epoch %d: %v", r, epoch, a)
			}
		}
	}
	configure(2, "live", "live", "live", "live")
	for r := range 2 {
		if rep, err := status.Get(ctx, f.URL(fmt.Sprint(r))); err != nil || rep.Epoch != 2 || !slices.Equal(rep.LostPeers, []int32{2, 3}) {
			t.Errorf("rank %d: epoch %d lost_peers %v (%v); want both joiners lost at epoch 2", r, rep.Epoch, rep.LostPeers, err)
		}
	}
	rep, err := status.Get(ctx, f.URL("2"))
	if err != nil || rep.State != Running || rep.Epoch != 2 || len(rep.LostPeers) != 0 || rep.Peers[0].State != "connecting" ||
		rep.EventsBuilt != 0 || rep.EventsPerSecond != 0 {
		t.Errorf("the unreachable joiner: %+v (%v); want RUNNING at epoch 2, connecting, nobody lost, building nothing", rep, err)
	}

	// Its network back, the next epoch takes rank 2 in (and makes the dead
	// rank 3 a dummy).
	f.SetUnreachable("2", false)
	configure(3, "live", "live", "live", "dummy")
	for r := range 3 {
		if rep, err := status.Get(ctx, f.URL(fmt.Sprint(r))); err != nil || rep.Epoch != 3 || len(rep.LostPeers) != 0 ||
			(r != 2 && rep.Peers[2].State != "up") {
			t.Errorf("rank %d: %+v (%v); want epoch 3, rank 2 up, nobody lost", r, rep, err)
		}
	}
}

// A unit cut off from its set's data network while it runs (its control
// API still answering) and its peers mark each other lost; it goes on
// alone in its session. Configured with a new epoch as it is, it is at
// its own place in the event stream: it and the set refuse each other
// (lost both ways) and it builds on alone; so even when the partition had
// not healed yet at an earlier epoch (it went on alone through it). Reset
// first, it rejoins as a restarted process does.
func TestHealedPartition(t *testing.T) {
	status := builderclient.New(builderclient.Timeouts{Poll: time.Second, Control: time.Second})
	ctx := context.Background()
	// start runs ranks 0..2 at epoch 1 and cuts rank 1 off.
	start := func(t *testing.T) *Farm {
		f := NewFarm()
		t.Cleanup(f.Close)
		for r := range 3 {
			f.Start(fmt.Sprint(r), Options{Token: "tok", Rank: int32(r), Mesh: "m"})
			post(t, f.URL(fmt.Sprint(r)), "tok", "configure", cfgBody(r, 1, "live", "live", "live"))
		}
		for r := range 3 {
			post(t, f.URL(fmt.Sprint(r)), "tok", "start", "")
		}
		f.SetUnreachable("1", true)
		return f
	}
	configure := func(t *testing.T, f *Farm, epoch int64) {
		t.Helper()
		for r := range 3 {
			if a := post(t, f.URL(fmt.Sprint(r)), "tok", "configure", cfgBody(r, epoch, "live", "live", "live")); a.code != 200 {
				t.Fatalf("configure rank %d at epoch %d: %v", r, epoch, a)
			}
		}
	}
	// check: every unit RUNNING at epoch, no error, with these lost peers
	// (none: rank 1 up for the others).
	check := func(t *testing.T, f *Farm, epoch int64, lost ...[]int32) {
		t.Helper()
		for r := range 3 {
			rep, err := status.Get(ctx, f.URL(fmt.Sprint(r)))
			var want []int32
			if lost != nil {
				want = lost[r]
			}
			if err != nil || rep.State != Running || rep.Epoch != epoch || rep.LastError != "" || !slices.Equal(rep.LostPeers, want) ||
				(lost == nil && r != 1 && rep.Peers[1].State != "up") {
				t.Errorf("rank %d: %+v (%v); want RUNNING at epoch %d, lost_peers %v", r, rep, err, epoch, want)
			}
		}
	}
	apart := [][]int32{{1}, {0, 2}, {1}} // rank 1 and the set lost each other
	rejoin := func(t *testing.T, f *Farm, epoch int64) {
		t.Helper()
		if a := post(t, f.URL("1"), "tok", "reset", ""); a.code != 200 || a.doc["state"] != NotReady {
			t.Fatalf("reset: %v", a)
		}
		configure(t, f, epoch)
		post(t, f.URL("1"), "tok", "start", "")
		check(t, f, epoch)
	}

	// reachable: each rank's lost_peers_reachable.
	reachable := func(t *testing.T, f *Farm, want ...[]int32) {
		t.Helper()
		for r := range 3 {
			rep, err := status.Get(ctx, f.URL(fmt.Sprint(r)))
			if err != nil || rep.LostPeersReachable == nil || !slices.Equal(*rep.LostPeersReachable, want[r]) {
				t.Errorf("rank %d: lost_peers_reachable %v (%v), want %v", r, rep.LostPeersReachable, err, want[r])
			}
		}
	}

	t.Run("cut off: it and the set lose each other, it goes on alone", func(t *testing.T) {
		f := start(t)
		check(t, f, 1, apart...)
		reachable(t, f, []int32{}, []int32{}, []int32{}) // their dials do not cross the cut
		f.SetUnreachable("1", false)
		reachable(t, f, []int32{1}, []int32{0, 2}, []int32{1}) // healed: they do
	})
	t.Run("outside a session it dials nobody", func(t *testing.T) {
		f := start(t)
		post(t, f.URL("1"), "tok", "reset", "")
		if rep, err := status.Get(ctx, f.URL("1")); err != nil || rep.LostPeersReachable != nil {
			t.Errorf("reset: lost_peers_reachable %v (%v), want null", rep.LostPeersReachable, err)
		}
	})
	t.Run("healed, configured in its session: refused both ways; reset, it rejoins", func(t *testing.T) {
		f := start(t)
		f.SetUnreachable("1", false)
		configure(t, f, 2)
		check(t, f, 2, apart...)
		rejoin(t, f, 3)
	})
	t.Run("configured in its session while cut off, then healed: refused at the next epoch", func(t *testing.T) {
		f := start(t)
		configure(t, f, 2)
		check(t, f, 2, apart...) // rank 1 cannot reach the set: it goes on alone
		f.SetUnreachable("1", false)
		configure(t, f, 3)
		check(t, f, 3, apart...)
		rejoin(t, f, 4)
	})
	t.Run("healed, reset first: rejoins", func(t *testing.T) {
		f := start(t)
		f.SetUnreachable("1", false)
		rejoin(t, f, 2)
	})
	t.Run("reset while cut off: lost at the new epoch, joins the next once healed", func(t *testing.T) {
		f := start(t)
		post(t, f.URL("1"), "tok", "reset", "")
		configure(t, f, 2)
		post(t, f.URL("1"), "tok", "start", "")
		check(t, f, 2, []int32{1}, []int32{}, []int32{1}) // a joiner that cannot join loses nobody: it waits
		f.SetUnreachable("1", false)
		configure(t, f, 3) // a joiner that never got in has no session of its own
		check(t, f, 3)
	})
}

// StartPod reads a controlled builder's command line and its token file
// through the pod's Secret volume, as the kubelet lays it out.
func TestStartPod(t *testing.T) {
	f := NewFarm()
	defer f.Close()
	pod := func(args ...string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{"run": "r"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Command: []string{"eb-builder"}, Args: args,
					VolumeMounts: []corev1.VolumeMount{{Name: "tok", MountPath: "/var/run/control", ReadOnly: true}}}},
				Volumes: []corev1.Volume{{Name: "tok", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: "r-control", Items: []corev1.KeyToPath{{Key: "token", Path: "token"}}}}}},
			},
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r-control"}, Data: map[string][]byte{"token": []byte("abc\n")}}
	b, err := f.StartPod("k", pod("--rank", "4", "--token-file", "/var/run/control/token"), secret, "run")
	if err != nil || b.opts.Token != "abc" || b.opts.Rank != 4 || b.opts.Mesh != "ns/r" || b.opts.Transport != "tcp" {
		t.Errorf("StartPod: %v, options %+v", err, b)
	}
	b, err = f.StartPod("v", pod("--rank", "4", "--token-file", "/var/run/control/token", "--transport", "verbs", "--rdma-device", "mlx5_1"), secret, "run")
	if err != nil || b.opts.Transport != "verbs" || b.opts.RDMADevice != "mlx5_1" {
		t.Errorf("StartPod of a verbs builder: %v, options %+v", err, b)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rank", "0", "--peers", "a:1"}, "self-configured"},
		{[]string{"--rank", "0", "--token-file", "/elsewhere/token"}, "no volume is mounted there"},
		{[]string{"--rank", "0", "--token-file", "/var/run/control/other"}, "no file other"},
		{[]string{"--rank"}, "no value"},
		{[]string{"--rank", "0", "--transport", "udp"}, "expected tcp or verbs"},
	} {
		if _, err := f.StartPod("x", pod(tc.args...), secret, "run"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
	if _, err := f.StartPod("x", pod("--token-file", "/var/run/control/token"), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, "run"); err == nil {
		t.Errorf("a pod whose Secret does not exist started")
	}
	blank := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r-control"}, Data: map[string][]byte{"token": []byte(" \n")}}
	if _, err := f.StartPod("x", pod("--token-file", "/var/run/control/token"), blank, "run"); err == nil || !strings.Contains(err.Error(), "the file is empty") {
		t.Errorf("a token file with no token: %v; eb-builder exits at start saying the file is empty", err)
	}
}

// A builder reports its transport as eb-builder does: the kind alone for
// tcp; for verbs the device it was given, its port, and a queue pair per
// live peer (ready to send once up, in error once lost).
func TestTransportReport(t *testing.T) {
	f := NewFarm()
	defer f.Close()
	f.Start("tcp", Options{Token: "tok", Rank: -1})
	for r := range 3 {
		f.Start(fmt.Sprint(r), Options{Token: "tok", Rank: int32(r), Mesh: "m", Transport: "verbs", RDMADevice: fmt.Sprintf("mlx5_%d", r)})
	}
	status := func(key string) builderapi.Report {
		rep, err := builderclient.New(builderclient.Timeouts{Poll: time.Second, Control: time.Second}).Get(context.Background(), f.URL(key))
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if got := status("tcp").Transport; got == nil || !reflect.DeepEqual(*got, builderapi.Transport{Kind: "tcp"}) {
		t.Errorf("tcp builder reports transport %+v", got)
	}
	port := func(state string, qps ...builderapi.QueuePair) builderapi.Transport {
		return builderapi.Transport{Kind: "verbs", Device: "mlx5_0", Port: 1, GIDIndex: ptr.To[int32](-1), PortState: state,
			LinkLayer: "InfiniBand", Peers: qps}
	}
	check := func(when string, want builderapi.Transport) {
		t.Helper()
		if got := status("0").Transport; got == nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: rank 0 reports transport %+v, want %+v", when, got, want)
		}
	}
	check("unconfigured", port("ACTIVE"))
	for r := range 3 {
		post(t, f.URL(fmt.Sprint(r)), "tok", "configure", cfgBody(r, 1, "live", "live", "dummy"))
	}
	check("configured", port("ACTIVE", builderapi.QueuePair{Rank: 1, QPState: "INIT"}))
	for r := range 3 {
		post(t, f.URL(fmt.Sprint(r)), "tok", "start", "")
	}
	check("running", port("ACTIVE", builderapi.QueuePair{Rank: 1, QPState: "RTS"}))
	f.Kill("1")
	check("peer lost", port("ACTIVE", builderapi.QueuePair{Rank: 1, QPState: "ERR"}))
	f.SetUnreachable("0", true)
	check("data network down", port("DOWN", builderapi.QueuePair{Rank: 1, QPState: "ERR"}))
}

// goldenKeys are the top-level keys of a body eb-builder's tests write
// (builder/tests/golden.hpp).
func goldenKeys(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile("../builderapi/testdata/builder/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(doc))
}

// The emulation's /status and error bodies have exactly the fields
// eb-builder's have.
func TestBodiesHaveTheBuildersFields(t *testing.T) {
	f := NewFarm()
	defer f.Close()
	f.Start("b", Options{Token: "t", Rank: 0, Mesh: "m"})
	url := f.URL("b")
	refused := post(t, url, "t", "start", "")
	unauthorized := post(t, url, "wrong", "start", "")
	if a := post(t, url, "t", "configure", cfgBody(0, 1, "live")); a.code != http.StatusOK {
		t.Fatalf("configure: %+v", a)
	}
	_, body := get(t, url, "/status")
	var status map[string]any
	if err := json.Unmarshal([]byte(body), &status); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		golden string
		doc    map[string]any
	}{{"status-running.json", status}, {"error-409.json", refused.doc}, {"error-401.json", unauthorized.doc}} {
		if got, want := slices.Sorted(maps.Keys(c.doc)), goldenKeys(t, c.golden); !slices.Equal(got, want) {
			t.Errorf("the emulation's body has fields %v; eb-builder's (%s) %v", got, c.golden, want)
		}
	}
}

// The NUMA report has eb-builder's keys (builder/src/app/numa.hpp), and
// says aligned where the operator asked for a NUMA node, until
// SetMisaligned.
func TestNUMAReportHasTheBuildersKeys(t *testing.T) {
	raw, err := os.ReadFile("../builderapi/testdata/builder/status-running.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		NUMA map[string]any `json:"numa"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	f := NewFarm()
	defer f.Close()
	unasked, asked := f.Start("a", Options{Rank: 0}), f.Start("b", Options{Rank: 1, NUMANode: "1", RDMADevice: "mlx5_1"})
	for _, b := range []*Builder{unasked, asked} {
		var doc map[string]any
		enc, _ := json.Marshal(b.numa())
		if err := json.Unmarshal(enc, &doc); err != nil {
			t.Fatal(err)
		}
		if got, want := slices.Sorted(maps.Keys(doc)), slices.Sorted(maps.Keys(golden.NUMA)); !slices.Equal(got, want) {
			t.Errorf("the emulation's NUMA report has %v; eb-builder's %v", got, want)
		}
	}
	if n := unasked.numa(); n.Asked() || n.Aligned() {
		t.Errorf("no NUMA node asked: %+v, want nothing asked", n)
	}
	if n := asked.numa(); !n.Aligned() || *n.Node != 1 || n.DeviceLocal == nil {
		t.Errorf("NUMA node 1 asked: %+v, want aligned there with its device", n)
	}
	f.SetMisaligned("b", true)
	if n := asked.numa(); n.Aligned() || n.CPUsLocal || n.Misplaced() != "CPUs" {
		t.Errorf("misaligned: %+v (misplaced %q), want the CPUs elsewhere", n, n.Misplaced())
	}
}

// An RU whose readout is unread (sourceUnread in the table) leaves every
// event incomplete: the BUs drop them under --incomplete drop, and deliver
// them flagged under --incomplete flag. Each builder is reached at the
// root of its own address too (Handler), as at a pod's IP.
func TestIncompleteEventsDroppedOrFlagged(t *testing.T) {
	body := func(rank int) string {
		return fmt.Sprintf(`{"rank":%d,"table":{"version":"eventbuilder.daq.io/ranktable/v1","run":"r","epoch":1,"layout":"Folded","ranks":[`+
			`{"rank":0,"address":"r-eb-0.r-eb:7000","state":"live","function":"RU+BU"},`+
			`{"rank":1,"address":"r-eb-1.r-eb:7000","state":"live","function":"BU","sourceUnread":true}]}}`, rank)
	}
	for _, flag := range []bool{false, true} {
		t.Run(fmt.Sprintf("flag=%v", flag), func(t *testing.T) {
			f := NewFarm()
			defer f.Close()
			mesh := fmt.Sprint("m", flag)
			for r := range 2 {
				f.Start(fmt.Sprint(r), Options{Token: "tok", Rank: int32(r), Mesh: mesh, FlagIncomplete: flag})
			}
			for r := range 2 {
				if a := post(t, f.URL(fmt.Sprint(r)), "tok", "configure", body(r)); a.code != 200 {
					t.Fatalf("configure rank %d: %v", r, a)
				}
				post(t, f.URL(fmt.Sprint(r)), "tok", "start", "")
			}
			srv := httptest.NewServer(f.Handler("0"))
			defer srv.Close()
			own := srv.URL
			var st builderapi.Report
			deadline := time.Now().Add(10 * time.Second)
			for st.EventsBuilt+st.EventsDropped == 0 {
				if time.Now().After(deadline) {
					t.Fatal("rank 0 counted no event in 10 s")
				}
				_, doc := get(t, own, "/status")
				if err := json.Unmarshal([]byte(doc), &st); err != nil {
					t.Fatal(err)
				}
			}
			if flag && (st.EventsDropped != 0 || st.EventsIncomplete != st.EventsBuilt) {
				t.Errorf("--incomplete flag: built %d, incomplete %d, dropped %d; want every event built flagged, none dropped",
					st.EventsBuilt, st.EventsIncomplete, st.EventsDropped)
			}
			if !flag && (st.EventsBuilt != 0 || st.EventsIncomplete != 0) {
				t.Errorf("--incomplete drop: built %d, incomplete %d, dropped %d; want every event dropped",
					st.EventsBuilt, st.EventsIncomplete, st.EventsDropped)
			}
		})
	}
}
