package builderclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"daq.io/eventbuilder/operator/internal/builderapi"

	"k8s.io/utils/ptr"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

func TestClientGet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    builderapi.Report
		wantErr string
	}{
		{
			name: "report",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/status" {
					http.NotFound(w, r)
					return
				}
				_, _ = w.Write([]byte(`{"state":"RUNNING","events_built":42,"events_incomplete":1,"bytes_built":5376,"rank":3,"units":4,"meps_built":7,"last_error":"slow peer"}`))
			},
			want: builderapi.Report{Rank: 3, Units: 4, State: builderapi.StateRunning, EventsBuilt: 42, EventsIncomplete: 1, MEPsBuilt: 7, BytesBuilt: 5376, LastError: "slow peer"},
		},
		{
			// The example of builder/docs/control-api.md, verbatim.
			name: "control API status",
			handler: func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(`{"rank":3,"units":8,"state":"RUNNING","role":"live","epoch":2,"pending_epoch":0,
   "events_built":123000,"events_incomplete":0,"events_dropped":0,"meps_built":123,
   "bytes_built":17000000,"events_per_second":3.1e6,"bytes_per_second":4.2e8,
   "peers":[{"rank":0,"state":"up"},{"rank":1,"state":"lost"},{"rank":2,"state":"dummy"},{"rank":3,"state":"self"}],
   "lost_peers":[1],
   "numa":{"requested":"0","node":0,"pinned":true,"cpus_local":true,"memory_local":true,"device_local":null,"warning":""},
   "allowed":["configure","pause","stop","reset"],"last_error":""}`))
			},
			want: builderapi.Report{Rank: 3, Units: 8, State: builderapi.StateRunning, Role: builderapi.RoleLive, Epoch: 2, EventsBuilt: 123000, MEPsBuilt: 123,
				BytesBuilt: 17000000, EventsPerSecond: 3.1e6, BytesPerSecond: 4.2e8,
				Peers:     []builderapi.Peer{{Rank: 0, State: "up"}, {Rank: 1, State: "lost"}, {Rank: 2, State: "dummy"}, {Rank: 3, State: "self"}},
				LostPeers: []int32{1}, Allowed: []string{"configure", "pause", "stop", "reset"},
				NUMA: &builderapi.NUMA{Requested: "0", Node: ptr.To(int32(0)), Pinned: true, CPUsLocal: true, MemoryLocal: true}},
		},
		{
			name: "verbs transport",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"rank":0,"state":"RUNNING","transport":{"kind":"verbs","device":"rxe0","port":1,"gid_index":1,
   "port_state":"ACTIVE","link_layer":"Ethernet","peers":[{"rank":1,"qp_state":"RTS"},{"rank":2,"qp_state":"ERR"}]}}`))
			},
			want: builderapi.Report{State: builderapi.StateRunning, Transport: &builderapi.Transport{Kind: ebv1.TransportVerbs, Device: "rxe0", Port: 1, GIDIndex: ptr.To[int32](1),
				PortState: "ACTIVE", LinkLayer: "Ethernet", Peers: []builderapi.QueuePair{{Rank: 1, QPState: "RTS"}, {Rank: 2, QPState: "ERR"}}}},
		},
		{
			name: "tcp transport",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"state":"READY","transport":{"kind":"tcp"}}`))
			},
			want: builderapi.Report{State: builderapi.StateReady, Transport: &builderapi.Transport{Kind: ebv1.TransportTCP}},
		},
		{
			name:    "HTTP error",
			handler: func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
			wantErr: "500",
		},
		{
			name:    "not JSON",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("RUNNING")) },
			wantErr: "decoding status",
		},
		{
			name:    "timeout",
			handler: func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			wantErr: "no answer within the poll timeout",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			got, err := New(Timeouts{Poll: 200 * time.Millisecond, Control: 200 * time.Millisecond}).Get(context.Background(), srv.URL)
			switch {
			case tc.wantErr != "" && (err == nil || strings.Count(err.Error(), tc.wantErr) != 1):
				t.Fatalf("Get() error = %v, want one containing %q once", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Get() error = %v", err)
			case !reflect.DeepEqual(got, tc.want):
				t.Errorf("Get() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The rank table shows a verbs builder's port, nothing of a TCP one's or
// of a builder that does not report its transport.
func TestRankTransport(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *builderapi.Transport
		want *ebv1.RankTransport
	}{
		{"not reported", nil, nil},
		{"tcp", &builderapi.Transport{Kind: ebv1.TransportTCP}, nil},
		{"RoCE", &builderapi.Transport{Kind: ebv1.TransportVerbs, Device: "rxe0", Port: 1, GIDIndex: ptr.To[int32](1), PortState: "ACTIVE", LinkLayer: "Ethernet",
			Peers: []builderapi.QueuePair{{Rank: 1, QPState: "RTS"}}}, &ebv1.RankTransport{Device: "rxe0", GIDIndex: ptr.To[int32](1), PortState: "ACTIVE"}},
		{"GID index 0", &builderapi.Transport{Kind: ebv1.TransportVerbs, Device: "mlx5_0", GIDIndex: ptr.To[int32](0), PortState: "DOWN"},
			&ebv1.RankTransport{Device: "mlx5_0", GIDIndex: ptr.To[int32](0), PortState: "DOWN"}},
		// InfiniBand addresses peers by LID: no GID index to show.
		{"InfiniBand", &builderapi.Transport{Kind: ebv1.TransportVerbs, Device: "mlx5_1", GIDIndex: ptr.To[int32](-1), PortState: "ACTIVE", LinkLayer: "InfiniBand"},
			&ebv1.RankTransport{Device: "mlx5_1", PortState: "ACTIVE"}},
	} {
		if got := (builderapi.Report{Transport: tc.in}).RankTransport(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: RankTransport() = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
