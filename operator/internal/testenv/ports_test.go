package testenv

import "testing"

// Two calls in a row hand out distinct ports, all below the ephemeral
// range, and each free to listen on.
func TestFreePortsAreDistinctAndBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for _, port := range append(FreePorts(t, 8), FreePorts(t, 8)...) {
		if seen[port] {
			t.Errorf("port %d handed out twice", port)
		}
		seen[port] = true
		if port < 10000 || port >= low {
			t.Errorf("port %d outside [10000, %d): the ephemeral range starts at %d", port, low, low)
		}
	}
}
