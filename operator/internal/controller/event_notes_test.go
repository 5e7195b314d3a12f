package controller

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// notes records what reaches the API server's client.
type notes []string

func (n *notes) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	*n = append(*n, fmt.Sprintf(note, args...))
}

func TestEventNotesAreCutToWhatTheAPIServerTakes(t *testing.T) {
	long := strings.Repeat("endpoint sim-eb000-numa0 unread; ", 100)
	tests := []struct {
		name, format string
		args         []any
		want         string
	}{
		{name: "short, formatted", format: "epoch %d: %s", args: []any{3, "moved"}, want: "epoch 3: moved"},
		{name: "short, a percent sign without arguments", format: "100% read", want: "100% read"},
		{name: "at the limit", format: "%s", args: []any{long[:maxEventNote]}, want: long[:maxEventNote]},
		{name: "over it", format: "streams: %s", args: []any{long}, want: ("streams: " + long)[:maxEventNote-3] + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got notes
			withBoundedNotes(&got).Eventf(nil, nil, "Warning", "StreamsUnread", "Readout", tt.format, tt.args...)
			if len(got) != 1 || got[0] != tt.want {
				t.Fatalf("note %q, want %q", got, tt.want)
			}
			if len(got[0]) > maxEventNote {
				t.Fatalf("note of %d characters, over %d", len(got[0]), maxEventNote)
			}
		})
	}
	var got notes
	twice := withBoundedNotes(withBoundedNotes(&got))
	if _, ok := twice.(boundedEvents).EventRecorder.(*notes); !ok {
		t.Fatal("wrapping a bounded recorder again wrapped it twice")
	}
}
