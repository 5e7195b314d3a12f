package soak

import "testing"

func TestTallyCountsAcrossReplacedPods(t *testing.T) {
	var tl Tally
	steps := []struct {
		now  map[string]Lost
		want Lost
	}{
		{map[string]Lost{"eb-0": {5, 1}, "eb-1": {0, 2}}, Lost{}},                     // baseline: before the soak
		{map[string]Lost{"eb-0": {7, 1}, "eb-1": {0, 2}}, Lost{2, 0}},                 // grew
		{map[string]Lost{"eb-0": {7, 1}}, Lost{2, 0}},                                 // eb-1 unread: nothing lost
		{map[string]Lost{"eb-0": {1, 0}, "eb-1": {0, 3}}, Lost{3, 1}},                 // eb-0 restarted from 0; eb-1 grew
		{map[string]Lost{"eb-0": {1, 0}, "eb-1": {0, 3}, "eb-2": {4, 0}}, Lost{7, 1}}, // eb-2 new: all of it
	}
	for i, s := range steps {
		tl.Observe(s.now)
		if tl.Total != s.want {
			t.Errorf("step %d: total %+v, want %+v", i, tl.Total, s.want)
		}
	}
}
