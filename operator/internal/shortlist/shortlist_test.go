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

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		text string
		most int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven char", 10, "eleven cha..."},
		{"", 0, ""},
	} {
		if got := Clip(tc.text, tc.most); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.text, tc.most, got, tc.want)
		}
	}
}
