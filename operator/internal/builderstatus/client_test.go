package builderstatus

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestClientGet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    Report
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
			want: Report{State: StateRunning, EventsBuilt: 42, EventsIncomplete: 1, BytesBuilt: 5376, LastError: "slow peer"},
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
			wantErr: "Timeout",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			got, err := NewClient(200*time.Millisecond).Get(context.Background(), srv.URL)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Get() error = %v, want one containing %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Get() error = %v", err)
			case got != tc.want:
				t.Errorf("Get() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
