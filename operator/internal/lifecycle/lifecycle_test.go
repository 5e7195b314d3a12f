package lifecycle

import (
	"reflect"
	"slices"
	"testing"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
	"daq.io/eventbuilder/operator/internal/builderapi"
)

// rep is a report in state at epoch (and pending epoch).
func rep(state string, epoch, pending int64) *builderapi.Report {
	return &builderapi.Report{State: state, Epoch: epoch, PendingEpoch: pending}
}

const (
	notReady = builderapi.StateNotReady
	ready    = builderapi.StateReady
	running  = builderapi.StateRunning
	paused   = builderapi.StatePaused
	failed   = builderapi.StateError
)

func TestToConfigure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		epoch    int64
		builders []Builder
		want     []int32
	}{
		{"fresh builders", 1, []Builder{{0, true, rep(notReady, 0, 0)}, {1, true, rep(notReady, 0, 0)}}, []int32{0, 1}},
		{"not answering: nothing to send", 1, []Builder{{0, true, nil}}, nil},
		{"already at the epoch", 2, []Builder{{0, true, rep(running, 2, 0)}, {1, false, rep(ready, 2, 0)}}, nil},
		{"holding it as pending", 3, []Builder{{0, true, rep(running, 2, 3)}}, nil},
		{"failover: running survivors and the standby spare on the old epoch", 3,
			[]Builder{{0, true, rep(running, 2, 0)}, {2, true, rep(running, 2, 0)}, {5, true, rep(paused, 2, 0)}}, []int32{0, 2, 5}},
		{"a pending epoch older than the table", 4, []Builder{{0, true, rep(running, 2, 3)}}, []int32{0}},
		{"ERROR is left alone", 2, []Builder{{0, true, rep(failed, 1, 0)}, {1, true, rep(ready, 1, 0)}}, []int32{1}},
		{"reset builder (NOT_READY) is configured even if it reports the epoch", 2, []Builder{{0, true, rep(notReady, 2, 0)}}, []int32{0}},
		{"a builder ahead of the table is not sent an older one", 2, []Builder{{0, true, rep(running, 3, 0)}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToConfigure(tc.epoch, tc.builders); !slices.Equal(got, tc.want) {
				t.Errorf("ToConfigure = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDrive(t *testing.T) {
	type B = Builder
	for _, tc := range []struct {
		name     string
		desired  ebv1.RunState
		epoch    int64
		builders []Builder
		live     []int32
		want     []Step
	}{
		{
			name: "all configured: start live and spare together", desired: ebv1.StateRunning, epoch: 1,
			builders: []B{{0, true, rep(ready, 1, 0)}, {1, true, rep(ready, 1, 0)}, {2, false, rep(ready, 1, 0)}},
			live:     []int32{0, 1},
			want:     []Step{{builderapi.Start, []int32{0, 1, 2}}},
		},
		{
			name: "default desired state is Running", desired: "", epoch: 1,
			builders: []B{{0, true, rep(ready, 1, 0)}}, live: []int32{0},
			want: []Step{{builderapi.Start, []int32{0}}},
		},
		{
			name: "a live builder not configured yet holds the start back", desired: ebv1.StateRunning, epoch: 1,
			builders: []B{{0, true, rep(ready, 1, 0)}, {1, true, rep(notReady, 0, 0)}}, live: []int32{0, 1},
		},
		{
			name: "a live builder not answering holds the start back", desired: ebv1.StateRunning, epoch: 1,
			builders: []B{{0, true, rep(ready, 1, 0)}}, live: []int32{0, 1},
		},
		{
			name: "a spare not answering does not", desired: ebv1.StateRunning, epoch: 1,
			builders: []B{{0, true, rep(ready, 1, 0)}, {2, false, nil}}, live: []int32{0},
			want: []Step{{builderapi.Start, []int32{0}}},
		},
		{
			name: "a restarted builder joins a running set", desired: ebv1.StateRunning, epoch: 2,
			builders: []B{{0, true, rep(running, 2, 0)}, {1, true, rep(ready, 2, 0)}}, live: []int32{0, 1},
			want: []Step{{builderapi.Start, []int32{1}}},
		},
		{
			name: "running with a pending epoch: nothing to do", desired: ebv1.StateRunning, epoch: 3,
			builders: []B{{0, true, rep(running, 2, 3)}, {1, true, rep(running, 3, 0)}}, live: []int32{0, 1},
		},
		{
			name: "resume paused builders", desired: ebv1.StateRunning, epoch: 1,
			builders: []B{{0, true, rep(paused, 1, 0)}, {1, true, rep(running, 1, 0)}, {2, false, rep(paused, 1, 0)}}, live: []int32{0, 1},
			want: []Step{{builderapi.Resume, []int32{0, 2}}},
		},
		{
			name: "pause running builders, standby spares too", desired: ebv1.StatePaused, epoch: 1,
			builders: []B{{0, true, rep(running, 1, 0)}, {1, true, rep(paused, 1, 0)}, {2, false, rep(running, 1, 0)}}, live: []int32{0, 1},
			want: []Step{{builderapi.Pause, []int32{0, 2}}},
		},
		{
			name: "paused: READY builders are not started", desired: ebv1.StatePaused, epoch: 1,
			builders: []B{{0, true, rep(ready, 1, 0)}}, live: []int32{0},
		},
		{
			name: "stop running and paused builders", desired: ebv1.StateStopped, epoch: 1,
			builders: []B{{0, true, rep(running, 1, 0)}, {1, true, rep(paused, 1, 0)}, {2, false, rep(ready, 1, 0)}}, live: []int32{0, 1},
			want: []Step{{builderapi.Stop, []int32{0, 1}}},
		},
		{
			name: "ERROR is left alone", desired: ebv1.StateRunning, epoch: 1,
			builders: []B{{0, true, rep(failed, 1, 0)}, {1, true, rep(ready, 1, 0)}}, live: []int32{0, 1},
		},
		{
			name: "a builder on an older epoch is configured first, not driven", desired: ebv1.StatePaused, epoch: 2,
			builders: []B{{0, true, rep(running, 1, 0)}, {1, true, rep(running, 2, 0)}}, live: []int32{0, 1},
			want: []Step{{builderapi.Pause, []int32{1}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Drive(tc.desired, tc.epoch, tc.builders, tc.live); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Drive = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestConfigured(t *testing.T) {
	builders := []Builder{
		{0, true, rep(running, 2, 3)},
		{1, true, rep(running, 3, 0)},
		{2, true, rep(running, 2, 0)},
		{3, true, nil},
		{4, false, rep(running, 2, 0)}, // a spare behind does not count
		{5, true, rep(failed, 3, 0)},
	}
	ok, missing := Configured(3, builders, []int32{0, 1, 2, 3, 5})
	if ok || !slices.Equal(missing, []int32{2, 3, 5}) {
		t.Errorf("Configured = %v %v, want false [2 3 5]", ok, missing)
	}
	if ok, missing := Configured(3, builders[:2], []int32{0, 1}); !ok || missing != nil {
		t.Errorf("Configured = %v %v, want true", ok, missing)
	}
}

func TestResizeTo(t *testing.T) {
	at := func(state, activity string, units int32) *builderapi.Report {
		return &builderapi.Report{State: state, Activity: activity, Units: units, Epoch: 1}
	}
	const (
		building = builderapi.ActivityBuilding
		idle     = builderapi.ActivityIdle
		standby  = builderapi.ActivityStandby
	)
	for _, tc := range []struct {
		name      string
		n         int
		builders  []Builder
		want      Resize
		publishes bool
	}{
		{"a table of the same size switches while running", 4,
			[]Builder{{0, true, at(running, building, 4)}, {1, true, at(running, building, 4)}}, Resize{}, true},
		{"a running set of another size is stopped first", 3,
			[]Builder{{0, true, at(running, building, 4)}, {1, true, at(paused, builderapi.ActivityPaused, 4)}, {3, false, at(running, standby, 4)}},
			Resize{Stop: []int32{0, 1, 3}}, false},
		{"stopped but still ending its cycle: wait", 3,
			[]Builder{{0, true, at(ready, building, 4)}, {1, true, at(ready, idle, 4)}}, Resize{Ending: []int32{0}}, false},
		{"the whole set stopped: publish", 5,
			[]Builder{{0, true, at(ready, idle, 4)}, {1, true, at(ready, idle, 4)}}, Resize{}, true},
		{"fresh, reset, silent and failed builders hold no session", 2,
			[]Builder{{0, true, at(notReady, idle, 0)}, {1, true, nil}, {2, true, at(failed, idle, 4)}}, Resize{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ResizeTo(tc.n, tc.builders)
			if !reflect.DeepEqual(got, tc.want) || got.Ready() != tc.publishes {
				t.Errorf("ResizeTo(%d) = %+v (ready %v), want %+v (ready %v)", tc.n, got, got.Ready(), tc.want, tc.publishes)
			}
		})
	}
}
