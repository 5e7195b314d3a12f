package shortlist

import (
	"strconv"
	"testing"
)

func TestJoin(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{0, ""},
		{1, "0"},
		{5, "0, 1, 2, 3, 4"},
		{6, "0, 1, 2, 3, 4, and 1 more"},
		{300, "0, 1, 2, 3, 4, and 295 more"},
	}
	for _, tt := range tests {
		items := make([]int, tt.n)
		for i := range items {
			items[i] = i
		}
		if got := Join(items, ", ", strconv.Itoa); got != tt.want {
			t.Errorf("Join of %d items = %q, want %q", tt.n, got, tt.want)
		}
	}
}
